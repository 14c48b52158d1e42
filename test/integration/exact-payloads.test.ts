/**
 * Records are stored as E6 sent them: the payload comes from the body's own text, so numbers that
 * JSON.parse would round or rewrite (an id above 2^53, `1.10`, `1e400`, `1e-400`) keep every digit in
 * jsonb, end to end through a real HTTP client and a real PostgreSQL.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { migrate } from '../../src/db/migrate.js';
import { createPool, type Pool } from '../../src/db/pool.js';
import { silentLogger } from '../helpers/silent-logger.js';
import { runSync } from '../../src/sync/run/run.js';
import { AnalyticsClient } from '../../src/upstream/analytics.js';
import { useTestDatabase } from '../helpers/db.js';
import { syncSettings } from '../helpers/sync.js';
import { pgDeps } from '../helpers/pg-deps.js';

const db = useTestDatabase();
let pool: Pool;
let server: http.Server;
let url: string;

const FROM = new Date('2026-10-01T00:00:00Z');
const TO = new Date('2026-10-02T00:00:00Z');

// Written by hand, as a server in another language might: none of these survive JSON.parse + JSON.stringify.
const RECORDS = [
  '{"id":12345678901234567891,"timestamp":"2026-10-01T01:00:00Z","amount":1.10,"note":"\\ud83d\\ude00"}',
  '{"id":9007199254740993,"timestamp":"2026-10-01T02:00:00Z","huge":1e400,"tiny":1e-400,"neg":-0}',
  '{"id":3,"timestamp":"2026-10-01T03:00:00Z","exp":2.50E+3,"precise":0.1000000000000000055511151231257827}',
];
const BODY = `{"pageNumber":1,"pageSize":1000,"totalRecords":3,"totalPages":1,"data":[${RECORDS.join(',')}]}`;
// Whitespace between tokens (tabs, CR, LF) and backslashes, the characters COPY's text format escapes.
const SPACED_RECORDS = [
  '{\n\t"id": 1,\r\n "timestamp": "2026-10-01T04:00:00Z", "path": "C:\\\\temp\\\\new", "quote": "say \\"hi\\"\\tand\\nbye", "slashN": "\\\\N", "amount": 1.10 }',
  '{"id":2,"timestamp":"2026-10-01T05:00:00Z","nested":{"a":[1, 2,\n3]},"tab":"\\t","empty":""}',
];
const SPACED_BODY = `{"pageNumber":1,"pageSize":1000,"totalRecords":2,"totalPages":1,"data": [\n\t${SPACED_RECORDS.join(',\r\n\t')}\n]}`;
let body = BODY;

beforeAll(async () => {
  pool = createPool(db.url, silentLogger, { max: 2 });
  server = http.createServer((req, res) => {
    if (req.method === 'POST' && req.url === '/connect/token') {
      req.resume();
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"access_token":"t-exact","expires_in":3600,"token_type":"Bearer"}');
    } else if (req.url?.startsWith('/analytics?')) {
      res.writeHead(200, { 'content-type': 'application/json' }).end(body);
    } else {
      res.writeHead(404).end();
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await pool?.end();
  await new Promise((resolve) => server?.close(resolve));
});

describe('stored payloads', () => {
  it('keep every number exactly as E6 wrote it', async () => {
    const schema = 'exact';
    await migrate(pool, schema, silentLogger);
    const config = loadConfig({ STATISTICS_URL: url, AUTH_URL: url, CLIENT_ID: 'c', CLIENT_SECRET: 's' });
    const client = AnalyticsClient.fromConfig(config.sources[0]!.upstream!, { log: silentLogger, random: () => 0 });
    try {
      const result = await runSync(pgDeps({ pool, client, ...syncSettings({ SYNC_WINDOW: '1d' }), schema, log: silentLogger }), { from: FROM, to: TO });
      expect(result).toMatchObject({ status: 'succeeded', records: 3 });
    } finally {
      await client.close();
    }
    const { rows } = await pool.query<{
      id: string;
      amount: string | null;
      note: string | null;
      huge: string | null;
      tiny: string | null;
      neg: string | null;
      exp: string | null;
      precise: string | null;
      event_time: Date;
    }>(
      `select payload->>'id' as id, payload->>'amount' as amount, payload->>'note' as note, payload->>'huge' as huge, payload->>'tiny' as tiny,
              payload->>'neg' as neg, payload->>'exp' as exp, payload->>'precise' as precise, event_time
         from exact.records order by event_time`,
    );
    expect(rows.map((r) => r.id)).toEqual(['12345678901234567891', '9007199254740993', '3']);
    expect(rows[0]).toMatchObject({ amount: '1.10', note: '😀' });
    expect(rows[1]!.huge).toBe(`1${'0'.repeat(400)}`);
    expect(rows[1]!.tiny).toBe(`0.${'0'.repeat(399)}1`);
    expect(rows[1]!.neg).toBe('0'); // numeric has no negative zero: PostgreSQL's rule, not ours
    expect(rows[2]).toMatchObject({ exp: '2500', precise: '0.1000000000000000055511151231257827' });
    // Equal, as jsonb, to the records as sent: PostgreSQL's own reading of E6's text.
    const same = await pool.query<{ n: string }>(
      `select count(*) as n from exact.records r join jsonb_array_elements($1::jsonb) e(payload) on r.payload = e.payload`,
      [`[${RECORDS.join(',')}]`],
    );
    expect(Number(same.rows[0]!.n)).toBe(3);
  });
  it('keep their exact text through COPY: whitespace between tokens, backslashes, tabs and newlines in strings', async () => {
    const schema = 'spaced';
    body = SPACED_BODY;
    await migrate(pool, schema, silentLogger);
    const config = loadConfig({ STATISTICS_URL: url, AUTH_URL: url, CLIENT_ID: 'c', CLIENT_SECRET: 's' });
    const client = AnalyticsClient.fromConfig(config.sources[0]!.upstream!, { log: silentLogger, random: () => 0 });
    try {
      const result = await runSync(pgDeps({ pool, client, ...syncSettings({ SYNC_WINDOW: '1d' }), schema, log: silentLogger }), { from: FROM, to: TO });
      expect(result).toMatchObject({ status: 'succeeded', records: 2 });
    } finally {
      body = BODY;
      await client.close();
    }
    const { rows } = await pool.query<{ path: string; quote: string; slashN: string; tab: string; empty: string }>(
      `select payload->>'path' as path, payload->>'quote' as quote, payload->>'slashN' as "slashN", payload->>'tab' as tab, payload->>'empty' as empty
         from spaced.records order by event_time`,
    );
    expect(rows[0]).toMatchObject({ path: 'C:\\temp\\new', quote: 'say "hi"\tand\nbye', slashN: '\\N' });
    expect(rows[1]).toMatchObject({ tab: '\t', empty: '' });
    // The same text as PostgreSQL's own reading of the body (jsonb's text keeps `1.10`, which jsonb equality would not tell from `1.1`).
    const same = await pool.query<{ n: string }>(
      `select count(*) as n from spaced.records r join jsonb_array_elements($1::jsonb -> 'data') e(payload) on r.payload::text = e.payload::text`,
      [SPACED_BODY],
    );
    expect(Number(same.rows[0]!.n)).toBe(2);
  });
});
