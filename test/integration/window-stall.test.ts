/**
 * No window stalls its source, and records are never held back because E6's count disagrees
 * (issue 39, parts 1 to 3), against real PostgreSQL: an E6 that refuses deep pages (HTTP 400
 * `Result window is too large` from offset 2,000) or answers them empty, with 20,000 records on one
 * instant beside a normal window, parks the dense window and loads the rest; an E6 whose
 * `totalRecords` claims one more record than it serves gets every served record stored, its windows
 * marked short, each window's requests bounded, and a later run does not pay for them again. Shown
 * against the simulator and against the test's own fake E6 (test/helpers/fake-e6.ts).
 */
import { startSimulator, type Simulator } from '@analytics-exporter/simulator';
import { describe, expect, it } from 'vitest';
import { migrate } from '../../src/db/migrate.js';
import { UpstreamHttpError } from '../../src/errors.js';
import { runSync } from '../../src/sync/run/run.js';
import type { E6Pages } from '../../src/sync/store/ports.js';
import { runCliInProcess } from '../helpers/cli.js';
import { useAppPool, useTestDatabase } from '../helpers/db.js';
import { FakeE6, record } from '../helpers/fake-e6.js';
import { pgDeps } from '../helpers/pg-deps.js';
import { silentLogger } from '../helpers/silent-logger.js';
import { expectExactDataset, expectedMultiset, simClient, simulatorEnv, storedMultiset, syncSettings, watermarkOf } from '../helpers/sync.js';

const db = useTestDatabase();
const bed = useAppPool(db);
const closers = bed.closers;

const HOUR = 3_600_000;
const START = new Date('2026-10-31T00:00:00Z');
const DENSE_AT = '2026-10-31T01:30:07Z';
const DENSE = { start: new Date('2026-10-31T01:00:00Z'), end: new Date('2026-10-31T02:00:00Z') };
const ENV = { SYNC_WINDOW: '1h', SYNC_SETTLE: '0', SYNC_LOOKBACK: '1h' };
const LIMIT = 2000;

async function simulator(options: Parameters<typeof startSimulator>[0]): Promise<Simulator> {
  const s = await startSimulator({ port: 0, ...options });
  closers.push(() => s.close());
  return s;
}

async function windows(schema: string): Promise<{ start: string; status: string; reason: string | null }[]> {
  const { rows } = await bed.pool.query<{ start: string; status: string; reason: string | null }>(
    `select to_char(window_start at time zone 'UTC', 'HH24:MI') as start, status, reason from "${schema}".sync_windows order by window_start`,
  );
  return rows;
}

function runner(schema: string, client: () => E6Pages, env: Record<string, string> = {}) {
  return (options: { from?: Date; to?: Date; now: number }) =>
    runSync(pgDeps({ pool: bed.pool, client: client(), ...syncSettings({ ...ENV, ...env }), schema, log: silentLogger }), {
      ...(options.from ? { from: options.from } : {}),
      ...(options.to ? { to: options.to } : {}),
      now: () => options.now,
    });
}

describe('a deep-paging limit at a dense instant (real PostgreSQL)', () => {
  for (const answer of ['refuse', 'empty'] as const) {
    it(
      `simulator, deep pages ${answer === 'refuse' ? 'refused with 400' : 'answered empty'}: the dense window is parked, the others exact, newer windows still load`,
      { timeout: 120_000 },
      async () => {
        const s = await simulator({ records: 300, start: START, end: new Date(START.getTime() + 3 * HOUR), admin: true });
        const added = await fetch(`${s.url}/admin/records`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ at: DENSE_AT, count: 20_000 }),
        });
        expect(added.status).toBe(200);
        s.faults.deepPages = { fromOffset: LIMIT, answer };
        const schema = `deep_${answer}`;
        await migrate(bed.pool, schema, silentLogger);
        const run = runner(schema, () => simClient(s));
        const first = await run({ from: START, to: DENSE.end, now: DENSE.end.getTime() });
        expect(first).toMatchObject({ status: 'succeeded', windowsPlanned: 2, windows: 1, parked: 1, parkedWindows: 1 });
        expect(await windows(schema)).toEqual([
          { start: '00:00', status: 'committed', reason: null },
          { start: '01:00', status: 'parked', reason: expect.stringMatching(/paging limit|Result window is too large/) },
        ]);
        expect(await storedMultiset(bed.pool, schema)).toEqual(expectedMultiset(s, START, DENSE.start));
        expect(await watermarkOf(bed.pool, schema)).toEqual(DENSE.end);
        // A later run loads the newer window, the parked one tried again (the lookback) and parked again.
        const later = await run({ now: START.getTime() + 3 * HOUR });
        expect(later).toMatchObject({ status: 'succeeded', windows: 1, parked: 1, parkedWindows: 1 });
        expect(await watermarkOf(bed.pool, schema)).toEqual(new Date(START.getTime() + 3 * HOUR));
        expect(await storedMultiset(bed.pool, schema)).toEqual(
          [...expectedMultiset(s, START, DENSE.start), ...expectedMultiset(s, DENSE.end, new Date(START.getTime() + 3 * HOUR))].sort(),
        );
        // The command exits 1 for it.
        const env = { ...simulatorEnv(s), ...ENV, DATABASE_URL: db.url, DATABASE_SCHEMA: schema, LOG_FORMAT: 'json' };
        const cli = await runCliInProcess(['sync', '--from', DENSE.start.toISOString(), '--to', DENSE.end.toISOString()], env);
        expect(cli.code, cli.stderr).toBe(1);
        expect(cli.stderr).toMatch(/"reason":"paging_limit".*"msg":"window parked/);
      },
    );
  }

  it('fake E6 refusing pages from offset 2,000 with HTTP 400: parked with its reason, the window beside it exact', async () => {
    const t0 = START.getTime();
    const normal = Array.from({ length: 50 }, (_, i) => record(i + 1, t0 + i * 60_000));
    const dense = Array.from({ length: 20_000 }, (_, i) => record(1000 + i, t0 + HOUR + 30 * 60_000 + 7000, { n: i }));
    const e6 = new FakeE6([...normal, ...dense], { sleep: async () => undefined });
    e6.fault = (q) =>
      ((q.pageNumber ?? 1) - 1) * (q.pageSize ?? 500) >= LIMIT
        ? new UpstreamHttpError('analytics', 400, 'E6 fake: HTTP 400 {"error":"Result window is too large"}')
        : undefined;
    const schema = 'deep_fake';
    await migrate(bed.pool, schema, silentLogger);
    const run = runner(schema, () => e6);
    const result = await run({ from: START, to: DENSE.end, now: DENSE.end.getTime() });
    expect(result).toMatchObject({ status: 'succeeded', windows: 1, parked: 1 });
    expect(await windows(schema)).toEqual([
      { start: '00:00', status: 'committed', reason: null },
      { start: '01:00', status: 'parked', reason: expect.stringMatching(/paging limit/) },
    ]);
    const { rows } = await bed.pool.query<{ n: number }>(`select count(*)::int as n from "${schema}".records`);
    expect(rows[0]!.n).toBe(50);
  });
});

describe('a totalRecords that claims one record more than E6 serves (real PostgreSQL)', () => {
  const END = new Date('2026-11-01T00:00:00Z');

  it(
    'simulator, 5,000 records in hourly windows: every record stored, each window short, requests bounded, a later run does not pay again',
    { timeout: 120_000 },
    async () => {
      const s = await simulator({ records: 5000, start: START, end: END });
      s.faults.totalRecordsExtra = 1;
      const schema = 'lying_total';
      await migrate(bed.pool, schema, silentLogger);
      const run = runner(schema, () => simClient(s));
      const before = s.stats.analyticsRequests;
      const first = await run({ from: START, to: END, now: END.getTime() });
      const requests = s.stats.analyticsRequests - before;
      expect(first).toMatchObject({ status: 'succeeded', windows: 24, records: 5000, short: 24 });
      await expectExactDataset(bed.pool, schema, s, START, END);
      const { rows } = await bed.pool.query<{ claimed: number; served: number }>(
        `select short_claimed::int as claimed, short_served::int as served from "${schema}".sync_windows order by window_start`,
      );
      expect(rows).toHaveLength(24);
      for (const row of rows) expect(row.claimed - row.served).toBeGreaterThanOrEqual(1);
      // About three requests a window (page 1 twice, and page 2 showing E6 has no more; 81 seen for
      // the 24, boundary sets included), never 1,700.
      expect(requests).toBeLessThanOrEqual(24 * 4);
      // A later run reads only its lookback (one window) again, once: 5 requests seen.
      const again = s.stats.analyticsRequests;
      const second = await run({ now: END.getTime() });
      expect(second).toMatchObject({ status: 'succeeded', records: expect.any(Number) });
      expect(s.stats.analyticsRequests - again).toBeLessThanOrEqual(6);
      await expectExactDataset(bed.pool, schema, s, START, END);
      // The command exits 1 when it finds a short window.
      const env = { ...simulatorEnv(s), ...ENV, DATABASE_URL: db.url, DATABASE_SCHEMA: schema, LOG_FORMAT: 'json' };
      const cli = await runCliInProcess(['sync', '--from', START.toISOString(), '--to', new Date(START.getTime() + HOUR).toISOString()], env);
      expect(cli.code, cli.stderr).toBe(1);
      expect(cli.stderr).toMatch(/"level":"warn".*"msg":"window short/);
      // Listed by state show (text and JSON) and by verify.
      const json = await runCliInProcess(['state', 'show', '--json'], env);
      expect(json.code, json.stderr).toBe(0);
      const shown = JSON.parse(json.stdout) as { sources: { windows: { short: unknown } }[] };
      expect(shown.sources[0]!.windows.short).toEqual({ count: 24, from: START.toISOString(), to: END.toISOString(), claimed: 5024, served: 5000 });
      const text = await runCliInProcess(['state', 'show'], env);
      expect(text.stdout).toMatch(/short\s+24 windows in \[2026-10-31T00:00:00.000Z, 2026-11-01T00:00:00.000Z\): E6 claimed 5024 records, served 5000/);
      const verify = await runCliInProcess(['verify'], env);
      expect(verify.stderr.split('\n').filter((l) => l.includes('audit: the window is short'))).toHaveLength(24);
    },
  );

  it('SYNC_WINDOW_MAX_REQUESTS: a window that needs more requests is parked with the reason, the others load', async () => {
    const t0 = START.getTime();
    // 30 records in the first hour, 3,000 in the second (more than a page: split into slices), 30 in the third.
    const records = [
      ...Array.from({ length: 30 }, (_, i) => record(i + 1, t0 + i * 60_000)),
      ...Array.from({ length: 3000 }, (_, i) => record(100 + i, t0 + HOUR + i * 1000)),
      ...Array.from({ length: 30 }, (_, i) => record(5000 + i, t0 + 2 * HOUR + 60_000 + i * 60_000)),
    ];
    const e6 = new FakeE6(records, { sleep: async () => undefined });
    const schema = 'bounded';
    await migrate(bed.pool, schema, silentLogger);
    const run = runner(schema, () => e6, { SYNC_WINDOW_MAX_REQUESTS: '3' });
    const result = await run({ from: START, to: new Date(t0 + 3 * HOUR), now: t0 + 3 * HOUR });
    expect(result).toMatchObject({ status: 'succeeded', windows: 2, parked: 1 });
    expect(await windows(schema)).toEqual([
      { start: '00:00', status: 'committed', reason: null },
      { start: '01:00', status: 'parked', reason: expect.stringMatching(/spent 3 E6 requests in this run without being read \(SYNC_WINDOW_MAX_REQUESTS\)/) },
      { start: '02:00', status: 'committed', reason: null },
    ]);
  });

  it('fake E6 claiming one more: every record stored and the windows marked short', async () => {
    const t0 = START.getTime();
    const records = Array.from({ length: 600 }, (_, i) => record(i + 1, t0 + i * 36_000));
    const e6 = new FakeE6(records, { sleep: async () => undefined });
    e6.totalRecordsExtra = 1;
    const schema = 'lying_fake';
    await migrate(bed.pool, schema, silentLogger);
    const run = runner(schema, () => e6);
    const result = await run({ from: START, to: new Date(t0 + 6 * HOUR), now: t0 + 6 * HOUR });
    expect(result).toMatchObject({ status: 'succeeded', windows: 6, records: 600, short: 6 });
    // Page 1 twice, page 2, and each cut's boundary set asked (E6's counts cannot settle it).
    expect(e6.requests).toBeLessThanOrEqual(6 * 6);
    const { rows } = await bed.pool.query<{ n: number }>(`select count(*)::int as n from "${schema}".records`);
    expect(rows[0]!.n).toBe(600);
  });
});
