/**
 * The exporter against the simulator with `--gzip auto` (issue 27 item 3): E6 and E7 requests ask
 * for gzip, the simulator compresses only because they ask, and the exporter decodes it: every
 * record is stored exactly as E6 sent it, and E7's text reads as the uncompressed answer. Over a
 * bandwidth-limited link too, whose paced bodies arrive whole.
 */
import { startSimulator } from '@analytics-exporter/simulator';
import { request } from 'undici';
import { describe, expect, it } from 'vitest';
import { migrate } from '../../src/db/migrate.js';
import { silentLogger } from '../helpers/silent-logger.js';
import { runSync } from '../../src/sync/run/run.js';
import { useAppPool, useTestDatabase } from '../helpers/db.js';
import { simClient, syncSettings } from '../helpers/sync.js';
import { pgDeps } from '../helpers/pg-deps.js';

const db = useTestDatabase();
const bed = useAppPool(db);
const closers = bed.closers;

const START = new Date('2026-10-28T00:00:00Z');
const END = new Date('2026-11-01T00:00:00Z');

describe('sync against a simulator that gzips when asked (gzip auto)', () => {
  it.each([
    ['unlimited', undefined],
    ['at 50mbit', '50mbit'],
  ])('E6, link %s: asks for gzip, receives only gzip, stores every record exactly as sent', async (_name, bandwidth) => {
    const s = await startSimulator({ port: 0, records: 6000, start: START, end: END, gzip: 'auto', bandwidth, duplicateEvery: 50 });
    closers.push(() => s.close());
    const client = simClient(s);
    closers.push(() => client.close());
    const schema = `gzip_${bandwidth === undefined ? 'free' : 'paced'}`;
    await migrate(bed.pool, schema, silentLogger);
    const result = await runSync(pgDeps({ pool: bed.pool, client, ...syncSettings({ SYNC_WINDOW: '1d' }), schema, log: silentLogger }), {
      from: START,
      to: END,
    });
    const served = s.servedJson(START, END);
    expect(result).toMatchObject({ status: 'succeeded', records: served.length });
    // Every E6 answer went compressed, which `auto` does only when the request allows gzip.
    expect(s.stats.analyticsRequests).toBeGreaterThanOrEqual(4);
    expect(s.stats.gzipResponses.analytics).toBe(s.stats.analyticsRequests);
    expect(s.stats.bodyBytes.analytics).toBeLessThan(served.reduce((n, t) => n + t.length, 0) / 3);
    // Byte-exact as jsonb: the stored payloads are, as a multiset, the texts E6 served (copies included).
    const stored = await bed.pool.query<{ p: string }>(`select payload::text as p from "${schema}".records order by 1`);
    const expected = await bed.pool.query<{ p: string }>(`select e.p::text as p from jsonb_array_elements($1::jsonb) e(p) order by 1`, [
      `[${served.join(',')}]`,
    ]);
    expect(stored.rows.length).toBe(served.length);
    expect(stored.rows.map((r) => r.p).join('\n') === expected.rows.map((r) => r.p).join('\n')).toBe(true);
  });

  it('E7: asks for gzip, receives it, and reads the same text as an uncompressed answer', async () => {
    const s = await startSimulator({ port: 0, records: 6000, start: START, end: END, gzip: 'auto', bandwidth: '50mbit' });
    closers.push(() => s.close());
    const client = simClient(s);
    closers.push(() => client.close());
    const text = await client.fetchPrometheusText({ startDate: START, toDate: END });
    expect(s.stats.gzipResponses.prometheus).toBe(1);
    // The same request without Accept-Encoding: `auto` answers it uncompressed.
    const token = await request(`${s.url}/connect/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: 'grant_type=client_credentials&client_id=demo-client&client_secret=demo-secret&scope=api.external',
    });
    const { access_token: bearer } = (await token.body.json()) as { access_token: string };
    const plain = await request(`${s.url}/analytics/prometheus?startDate=${START.toISOString()}&toDate=${END.toISOString()}`, {
      headers: { authorization: `Bearer ${bearer}` },
    });
    expect(plain.headers['content-encoding']).toBeUndefined();
    expect(text).toBe(await plain.body.text());
    expect(s.stats.gzipResponses.prometheus).toBe(1);
    expect(text).toMatch(/^userlogin_event_count\{customer="/);
  });
});
