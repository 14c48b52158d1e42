/**
 * E6 and E7 bodies in a Content-Encoding: the client asks for gzip, decodes gzip, deflate and br
 * (asked or not) into exactly the records sent, bounds the decoded size by the body cap, and fails
 * a request it cannot decode with reason `content_encoding`. The ledger stores the real error of a
 * failed run, even when its message quotes a body full of NUL bytes.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import zlib from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { migrate } from '../../src/db/migrate.js';
import { createPool, type Pool } from '../../src/db/pool.js';
import { ResponseTooLargeError, UpstreamError } from '../../src/errors.js';
import { silentLogger } from '../helpers/silent-logger.js';
import { runSync } from '../../src/sync/run/run.js';
import { AnalyticsClient } from '../../src/upstream/analytics.js';
import { useTestDatabase } from '../helpers/db.js';
import { syncSettings } from '../helpers/sync.js';
import { pgDeps } from '../helpers/pg-deps.js';

/** UPSTREAM_MAX_BODY's default, in bytes: the client of this file is configured with it. */
const MAX_RESPONSE_BYTES = 64 * 1024 * 1024;

const db = useTestDatabase();
let pool: Pool;
let server: http.Server;
let url: string;

const FROM = new Date('2026-10-01T00:00:00Z');
const TO = new Date('2026-10-02T00:00:00Z');
const RECORDS = [
  '{"id":12345678901234567891,"timestamp":"2026-10-01T01:00:00Z","amount":1.10,"note":"é😀"}',
  '{"id":2,"timestamp":"2026-10-01T02:00:00Z","huge":1e400}',
  '{"id":3,"timestamp":"2026-10-01T03:00:00Z","nested":{"a":[1,2,3]}}',
];
const PROMETHEUS = '# TYPE userlogin_event_count counter\nuserlogin_event_count{customer="a"} 3\n';

type Mode = 'gzip' | 'deflate' | 'br' | 'corrupt-gzip' | 'unlabelled-gzip' | 'zstd' | 'bomb';
let mode: Mode = 'gzip';
const seen: Array<{ path: string; acceptEncoding: string | undefined }> = [];

function pageBody(requestUrl: URL): Buffer {
  const pageSize = Number(requestUrl.searchParams.get('pageSize') ?? 500);
  return Buffer.from(`{"pageNumber":1,"pageSize":${pageSize},"totalRecords":3,"totalPages":1,"data":[${RECORDS.join(',')}]}`);
}

/** The body and its Content-Encoding in the test's current mode. */
function encode(body: Buffer): { bytes: Buffer; coding?: string } {
  switch (mode) {
    case 'gzip':
      return { bytes: zlib.gzipSync(body), coding: 'gzip' };
    case 'deflate':
      return { bytes: zlib.deflateSync(body), coding: 'deflate' };
    case 'br':
      return { bytes: zlib.brotliCompressSync(body), coding: 'br' };
    case 'corrupt-gzip': {
      const bytes = zlib.gzipSync(body);
      bytes.fill(0xab, 12, bytes.length - 8); // header and trailer intact, the deflate stream garbage
      return { bytes, coding: 'gzip' };
    }
    case 'unlabelled-gzip':
      return { bytes: zlib.gzipSync(body) }; // compressed, but not said so: JSON.parse sees the NUL bytes
    case 'zstd':
      return { bytes: body, coding: 'zstd' };
    case 'bomb':
      return { bytes: zlib.gzipSync(Buffer.alloc(MAX_RESPONSE_BYTES + 1024, 0x20)), coding: 'gzip' };
  }
}

beforeAll(async () => {
  pool = createPool(db.url, silentLogger, { max: 2 });
  server = http.createServer((req, res) => {
    const requestUrl = new URL(req.url ?? '/', 'http://127.0.0.1');
    if (req.method === 'POST' && requestUrl.pathname === '/connect/token') {
      req.resume();
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"access_token":"t-coded","expires_in":3600,"token_type":"Bearer"}');
      return;
    }
    const e7 = requestUrl.pathname === '/analytics/prometheus';
    if (!e7 && requestUrl.pathname !== '/analytics') {
      res.writeHead(404).end();
      return;
    }
    seen.push({ path: requestUrl.pathname, acceptEncoding: req.headers['accept-encoding'] });
    const { bytes, coding } = encode(e7 ? Buffer.from(PROMETHEUS) : pageBody(requestUrl));
    res.writeHead(200, { 'content-type': e7 ? 'text/plain; version=0.0.4' : 'application/json', ...(coding ? { 'content-encoding': coding } : {}) }).end(bytes);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await pool?.end();
  await new Promise((resolve) => server?.close(resolve));
});

function client(): AnalyticsClient {
  const config = loadConfig({ STATISTICS_URL: url, AUTH_URL: url, CLIENT_ID: 'c', CLIENT_SECRET: 's', UPSTREAM_MAX_ATTEMPTS: '2' });
  return AnalyticsClient.fromConfig(config.sources[0]!.upstream!, { log: silentLogger, random: () => 0 });
}

/** One sync of [FROM, TO) into a fresh schema, in `m`; the run's result and the ledger's row. */
async function syncIn(m: Mode, schema: string) {
  mode = m;
  await migrate(pool, schema, silentLogger);
  const c = client();
  try {
    const result = await runSync(pgDeps({ pool, client: c, ...syncSettings({ SYNC_WINDOW: '1d' }), schema, log: silentLogger }), { from: FROM, to: TO });
    const { rows } = await pool.query<{ status: string; error: string | null }>(`select status, error from "${schema}".sync_runs`);
    return { result, runs: rows };
  } finally {
    await c.close();
  }
}

describe('E6 bodies in a Content-Encoding', () => {
  it.each(['gzip', 'deflate', 'br'] as const)('stores exactly the records of a %s body, and asks for gzip', async (m) => {
    seen.length = 0;
    const schema = `coded_${m}`;
    const { result, runs } = await syncIn(m, schema);
    expect(result).toMatchObject({ status: 'succeeded', records: 3 });
    expect(runs).toEqual([{ status: 'succeeded', error: null }]);
    expect(seen.length).toBeGreaterThan(0);
    expect(seen.every((s) => s.acceptEncoding === 'gzip')).toBe(true);
    // The payloads are E6's text as sent (digits beyond 2^53, 1.10, 1e400), decoded from the coding.
    const same = await pool.query<{ n: string }>(
      `select count(*) as n from "${schema}".records r join jsonb_array_elements($1::jsonb) e(payload) on r.payload::text = e.payload::text`,
      [`[${RECORDS.join(',')}]`],
    );
    expect(Number(same.rows[0]!.n)).toBe(3);
    const { rows } = await pool.query<{ id: string; note: string }>(
      `select payload->>'id' as id, payload->>'note' as note from "${schema}".records order by event_time`,
    );
    expect(rows[0]).toEqual({ id: '12345678901234567891', note: 'é😀' });
  });

  it('fails a run on a corrupt gzip body with reason content_encoding, and the ledger stores that error', async () => {
    const { result, runs } = await syncIn('corrupt-gzip', 'coded_corrupt');
    expect(result.status).toBe('failed');
    const error = (result as { error?: unknown }).error;
    expect(error).toBeInstanceOf(UpstreamError);
    expect(error).toMatchObject({ code: 'ERR_UPSTREAM_BODY', reason: 'content_encoding' });
    expect(runs).toHaveLength(1);
    expect(runs[0]!.status).toBe('failed');
    expect(runs[0]!.error).toMatch(/E6 http:\/\/127\.0\.0\.1:\d+\/analytics: body is not valid gzip \(/);
  });

  it('stores the real error of a run whose message quotes NUL bytes (a gzip body not labelled as one)', async () => {
    const { result, runs } = await syncIn('unlabelled-gzip', 'coded_unlabelled');
    expect(result.status).toBe('failed');
    expect((result as { error?: unknown }).error).toMatchObject({ reason: 'invalid_json' });
    expect(runs).toHaveLength(1);
    expect(runs[0]!.status).toBe('failed');
    expect(runs[0]!.error).toMatch(/body is not valid JSON/);
    expect(runs[0]!.error).not.toContain('\u0000');
  });

  it('fails a request in a coding it does not decode at once, naming the coding', async () => {
    mode = 'zstd';
    seen.length = 0;
    const c = client();
    try {
      const err = await c.fetchPage({ startDate: FROM, toDate: TO }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(UpstreamError);
      expect(err).toMatchObject({ code: 'ERR_UPSTREAM_BODY', reason: 'content_encoding', retryable: false });
      expect((err as Error).message).toContain('Content-Encoding zstd');
      expect(seen).toHaveLength(1); // final: not retried
    } finally {
      await c.close();
    }
  });

  it('refuses a small body that decodes past the body cap', async () => {
    mode = 'bomb';
    const c = client();
    try {
      const err = await c.fetchPage({ startDate: FROM, toDate: TO }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(ResponseTooLargeError);
      expect(err).toMatchObject({ code: 'ERR_UPSTREAM_BODY' });
      expect((err as Error).message).toContain(`larger than ${MAX_RESPONSE_BYTES} bytes (UPSTREAM_MAX_BODY) once decoded from gzip`);
    } finally {
      await c.close();
    }
  });
});

describe('E7 bodies in a Content-Encoding', () => {
  it.each(['gzip', 'br'] as const)('reads a %s Prometheus text, asking for gzip', async (m) => {
    mode = m;
    seen.length = 0;
    const c = client();
    try {
      expect(await c.fetchPrometheusText({ startDate: FROM, toDate: TO })).toBe(PROMETHEUS);
      expect(seen).toEqual([{ path: '/analytics/prometheus', acceptEncoding: 'gzip' }]);
    } finally {
      await c.close();
    }
  });
});
