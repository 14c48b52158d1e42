import { describe, expect, it } from 'vitest';
import { migrate } from '../../src/db/migrate.js';
import { silentLogger } from '../helpers/silent-logger.js';
import { startSimulator, type Simulator } from '@analytics-exporter/simulator';
import { runSync, type SyncResult } from '../../src/sync/run/run.js';
import type { ShrunkWindow } from '../../src/sync/run/summary.js';
import type { AnalyticsClient } from '../../src/upstream/analytics.js';
import { useAppPool, useTestDatabase } from '../helpers/db.js';
import { expectExactDataset, simClient, syncSettings, watermarkOf } from '../helpers/sync.js';
import { pgDeps } from '../helpers/pg-deps.js';

const db = useTestDatabase();
const bed = useAppPool(db, 8);
const closers = bed.closers;
let schemaCounter = 0;

/** A fresh schema, migrated. */
async function freshSchema(): Promise<string> {
  const schema = `sync_${++schemaCounter}`;
  await migrate(bed.pool, schema, silentLogger);
  return schema;
}

async function sim(options: Parameters<typeof startSimulator>[0]): Promise<Simulator> {
  const s = await startSimulator({ port: 0, ...options });
  closers.push(() => s.close());
  return s;
}

function client(s: Simulator, env: Record<string, string> = {}): AnalyticsClient {
  const c = simClient(s, env);
  closers.push(() => c.close());
  return c;
}

// Two days of simulated data; each test picks its record count.
const START = new Date('2026-10-30T00:00:00Z');
const END = new Date('2026-11-01T00:00:00Z');

async function sync(
  s: Simulator,
  schema: string,
  env: Record<string, string> = {},
  options: Parameters<typeof runSync>[1] = {},
): Promise<Extract<SyncResult, { runId: number }>> {
  const result = await runSync(pgDeps({ pool: bed.pool, client: client(s), ...syncSettings(env), schema, log: silentLogger }), {
    from: START,
    to: END,
    ...options,
  });
  if (result.status === 'locked') throw new Error('unexpectedly locked');
  return result;
}

describe('sync (in process, real PostgreSQL)', () => {
  it('loads exactly the records of the range, and a re-run changes nothing', async () => {
    const s = await sim({ records: 8_000, start: START, end: END, duplicateEvery: 500 });
    const schema = await freshSchema();
    // About 1,000 records a window, in slices of 400.
    const env = { SYNC_WINDOW: '6h', SYNC_PAGE_SIZE: '400' };
    const first = await sync(s, schema, env);
    expect(first).toMatchObject({ status: 'succeeded', windows: 8, records: 8_000 });
    expect(await expectExactDataset(bed.pool, schema, s, START, END)).toBe(8_000);
    expect((await watermarkOf(bed.pool, schema))?.toISOString()).toBe(END.toISOString());

    const idsBefore = await bed.pool.query<{ n: number; max: number }>(`select count(*)::int as n, max(id)::int as max from ${schema}.records`);
    const second = await sync(s, schema, env);
    expect(second).toMatchObject({ status: 'succeeded', records: 8_000 });
    await expectExactDataset(bed.pool, schema, s, START, END);
    const idsAfter = await bed.pool.query<{ n: number }>(`select count(*)::int as n from ${schema}.records`);
    expect(idsAfter.rows[0]!.n).toBe(idsBefore.rows[0]!.n);
  });

  it('keeps identical records as separate rows', async () => {
    const s = await sim({ records: 5000, start: START, end: END, duplicateEvery: 10 });
    const schema = await freshSchema();
    await sync(s, schema);
    const { rows } = await bed.pool.query<{ copies: number }>(
      `select count(*)::int as copies from ${schema}.records group by payload having count(*) > 1 order by 1 desc limit 1`,
    );
    expect(rows[0]?.copies).toBeGreaterThanOrEqual(2);
    await expectExactDataset(bed.pool, schema, s, START, END);
  });

  it.each(['inclusive', 'exclusive'] as const)('doubles nothing at window boundaries when toDate is %s', async (toDate) => {
    // 12,000 records in 2 hours at whole-second precision: several records sit on every minute boundary.
    const from = new Date('2026-10-31T10:00:00Z');
    const to = new Date('2026-10-31T12:00:00Z');
    const s = await sim({ records: 12_000, start: from, end: to, toDate, timePrecisionMs: 1000 });
    const onBoundaries = [...s.dataset.iterate(from, to, false)].filter((r) => String(r.timestamp).endsWith(':00Z')).length;
    expect(onBoundaries).toBeGreaterThan(100);
    const schema = await freshSchema();
    const result = await sync(s, schema, { SYNC_WINDOW: '1m', SYNC_PAGE_SIZE: '40' }, { from, to });
    expect(result.windows).toBe(120);
    expect(await expectExactDataset(bed.pool, schema, s, from, to)).toBe(12_000);
    // And again over a shifted range: windows overlap the loaded ones, nothing doubles.
    await sync(s, schema, { SYNC_WINDOW: '7m' }, { from: new Date('2026-10-31T10:30:30Z'), to });
    await expectExactDataset(bed.pool, schema, s, from, to);
  });

  it('stores records that arrive while a window is read, each slice exact as read', async () => {
    // The 5th request lands 37 records inside its own range before it is answered: a split slice
    // (12h windows of 5,000 records at pageSize 500) that then returns them with the rest.
    const s = await sim({ records: 20_000, start: START, end: END, faults: { arrivals: { afterRequests: 5, count: 37 } } });
    const schema = await freshSchema();
    const requests: number[] = [];
    const result = await runSync(
      pgDeps({
        pool: bed.pool,
        client: client(s),
        ...syncSettings({ SYNC_WINDOW: '12h', SYNC_PAGE_SIZE: '500', SYNC_CONCURRENCY: '1' }),
        schema,
        log: silentLogger,
        observer: { windowCommitted: (w) => requests.push(w.requests) },
      }),
      { from: START, to: END },
    );
    expect(result.status).toBe('succeeded');
    expect(s.dataset.count(START, END, false)).toBe(20_037);
    await expectExactDataset(bed.pool, schema, s, START, END);
    // The first window overflowed once and was split; the later ones were split ahead from what it held.
    expect(requests[0]).toBeGreaterThan(requests[1]!);
  });

  it('survives tokens revoked mid-run', async () => {
    // Revoked after every 10th page served rather than on a timer: a timer fast enough to matter
    // could, on a loaded machine, revoke a renewed token before its first use (a second 401 is final).
    let served = 0;
    let revocations = 0;
    const s: Simulator = await sim({
      records: 10_000,
      start: START,
      end: END,
      faults: { latencyMs: 20 },
      onRequest: (event) => {
        if (event.endpoint === 'analytics' && event.status === 200 && ++served % 10 === 0) {
          revocations++;
          s.revokeAllTokens();
        }
      },
    });
    const schema = await freshSchema();
    // About 80 pages: a revocation every 10th.
    const result = await sync(s, schema, { SYNC_WINDOW: '2h', SYNC_PAGE_SIZE: '125' });
    expect(result.status).toBe('succeeded');
    expect(revocations).toBeGreaterThan(5);
    // Each revocation costs a new token (but the last, when no request followed it).
    expect(s.stats.tokenRequests).toBeGreaterThanOrEqual(revocations);
    expect(s.stats.responses['401']).toBeGreaterThan(0);
    await expectExactDataset(bed.pool, schema, s, START, END);
  });

  it('keeps the stored records a window E6 now returns without (SYNC_SHRINK=keep), or replaces them (replace)', async () => {
    const options = { records: 5_000, start: START, end: END };
    const before = await sim(options);
    // Three more records in one window than the second simulator (same seed) will return: E6's retention, say.
    const lateFrom = new Date(START.getTime() + 3 * 3_600_000);
    before.insertRecords(before.dataset.plausibleRecords(3, lateFrom, new Date(lateFrom.getTime() + 3_600_000), false, 7));
    const schema = await freshSchema();
    expect(await sync(before, schema, { SYNC_WINDOW: '6h' })).toMatchObject({ status: 'succeeded', records: 5_003 });
    const count = async () => Number((await bed.pool.query<{ n: string }>(`select count(*) as n from ${schema}.records`)).rows[0]!.n);
    const ledger = async () =>
      (
        await bed.pool.query<{ window_start: Date; record_count: number; run_id: number }>(
          `select window_start, record_count, run_id from ${schema}.sync_windows order by window_start`,
        )
      ).rows;
    const ledgerBefore = await ledger();

    const after = await sim(options);
    const shrunk: ShrunkWindow[] = [];
    const run = (env: Record<string, string>) =>
      runSync(
        pgDeps({
          pool: bed.pool,
          client: client(after),
          ...syncSettings({ SYNC_WINDOW: '6h', ...env }),
          schema,
          log: silentLogger,
          observer: { windowShrunk: (w) => shrunk.push(w) },
        }),
        { from: START, to: END },
      );
    const kept = await run({});
    expect(kept).toMatchObject({ status: 'succeeded', windows: 8 });
    expect(shrunk).toEqual([
      {
        window: { start: START.getTime(), end: START.getTime() + 6 * 3_600_000 },
        stored: expect.any(Number),
        returned: expect.any(Number),
        kept: 3,
        action: 'kept',
      },
    ]);
    expect(shrunk[0]!.stored - shrunk[0]!.returned).toBe(3);
    expect(await count()).toBe(5_003);
    // Every window was re-loaded by this run, the kept one holding its three records E6 no longer returns.
    const ledgerKept = await ledger();
    expect(ledgerKept[0]!.record_count).toBe(ledgerBefore[0]!.record_count);
    expect(ledgerKept.every((row, i) => row.run_id !== ledgerBefore[i]!.run_id)).toBe(true);

    shrunk.length = 0;
    expect(await run({ SYNC_SHRINK: 'replace' })).toMatchObject({ status: 'succeeded', windows: 8 });
    expect(shrunk).toMatchObject([{ action: 'replaced' }]);
    expect(await expectExactDataset(bed.pool, schema, after, START, END)).toBe(5_000);
  });

  it('rides out 429 and 5xx mid-run', async () => {
    const s = await sim({ records: 10_000, start: START, end: END, faults: { rateLimitEvery: 7, retryAfterSeconds: 0, errorRate: 0.1, errorStatus: 503 } });
    const schema = await freshSchema();
    // About 40 pages, as many requests again for the faults.
    const result = await sync(s, schema, { SYNC_WINDOW: '4h', SYNC_PAGE_SIZE: '250', UPSTREAM_MAX_ATTEMPTS: '8' });
    expect(result.status).toBe('succeeded');
    expect(s.stats.responses['429']).toBeGreaterThan(0);
    expect(s.stats.responses['503']).toBeGreaterThan(0);
    await expectExactDataset(bed.pool, schema, s, START, END);
  });

  it('fails the run on a malformed page with nothing committed for that window, then the next run completes the data', async () => {
    const s = await sim({ records: 20_000, start: START, end: END });
    const schema = await freshSchema();
    // The first window loads; then every answer is malformed for longer than the client retries.
    let pagesLoaded = 0;
    const result = await runSync(
      pgDeps({
        pool: bed.pool,
        client: client(s, { UPSTREAM_MAX_ATTEMPTS: '2' }),
        // Streamed (no read-ahead): the fault lands while window 2's transaction is open.
        ...syncSettings({ SYNC_WINDOW: '12h', SYNC_PAGE_SIZE: '1000', SYNC_CONCURRENCY: '1', SYNC_READ_AHEAD: '0' }),
        schema,
        log: silentLogger,
        observer: {
          pageLoaded: () => {
            if (++pagesLoaded === 7) s.queueFault('malformed-json', 2, 'analytics');
          },
        },
      }),
      { from: START, to: END },
    );
    expect(result.status).toBe('failed');
    expect(result.status !== 'locked' && result.error?.message).toMatch(/body is not valid JSON/);
    // Window 1 (5000 records, 5 pages) committed; window 2 failed on its third page: nothing of it stored.
    expect(result).toMatchObject({ windows: 1, records: 5000 });
    expect((await watermarkOf(bed.pool, schema))?.toISOString()).toBe('2026-10-30T12:00:00.000Z');
    const stored = await bed.pool.query<{ n: number }>(`select count(*)::int as n from ${schema}.records`);
    expect(stored.rows[0]!.n).toBe(5000);

    const next = await sync(s, schema, { SYNC_WINDOW: '12h' }, { from: undefined as unknown as Date, to: END });
    expect(next.status).toBe('succeeded');
    // Resumed from the watermark minus the lookback (1h → the 12h window containing it).
    expect(new Date(next.range.start).toISOString()).toBe('2026-10-30T11:00:00.000Z');
    await expectExactDataset(bed.pool, schema, s, START, END);
  });

  it('lets one of two concurrent syncs run; the other returns locked at once', async () => {
    const s = await sim({ records: 10_000, start: START, end: END, faults: { latencyMs: 30 } });
    const schema = await freshSchema();
    const deps = () => ({ pool: bed.pool, client: client(s), ...syncSettings({ SYNC_WINDOW: '6h' }), schema, log: silentLogger });
    const [a, b] = await Promise.all([runSync(pgDeps(deps()), { from: START, to: END }), runSync(pgDeps(deps()), { from: START, to: END })]);
    expect([a.status, b.status].sort()).toEqual(['locked', 'succeeded']);
    await expectExactDataset(bed.pool, schema, s, START, END);

    // With wait, the second runs after the first and changes nothing.
    const [c, d] = await Promise.all([
      runSync(pgDeps(deps()), { from: START, to: END, wait: true }),
      runSync(pgDeps(deps()), { from: START, to: END, wait: true }),
    ]);
    expect([c.status, d.status]).toEqual(['succeeded', 'succeeded']);
    await expectExactDataset(bed.pool, schema, s, START, END);
  });

  it('rolls back the open window when the signal aborts, keeping committed windows', async () => {
    const s = await sim({ records: 20_000, start: START, end: END, faults: { latencyMs: 15 } });
    const schema = await freshSchema();
    const controller = new AbortController();
    let pages = 0;
    const result = await runSync(
      pgDeps({
        pool: bed.pool,
        client: client(s),
        // Streamed (no read-ahead): the abort lands while window 2's transaction is open.
        ...syncSettings({ SYNC_WINDOW: '12h', SYNC_PAGE_SIZE: '500', SYNC_CONCURRENCY: '2', SYNC_READ_AHEAD: '0' }),
        schema,
        log: silentLogger,
        observer: { pageLoaded: () => void (++pages === 15 && controller.abort()) },
      }),
      { from: START, to: END, signal: controller.signal },
    );
    expect(result).toMatchObject({ status: 'interrupted', windows: 1 });
    const stored = await bed.pool.query<{ n: number }>(`select count(*)::int as n from ${schema}.records`);
    expect(stored.rows[0]!.n).toBe(5000);
    const next = await sync(s, schema, { SYNC_WINDOW: '12h' });
    expect(next.status).toBe('succeeded');
    await expectExactDataset(bed.pool, schema, s, START, END);
  });

  it('keeps records whose RECORD_TIME_FIELD lies outside the window E6 returned them for, and counts them', async () => {
    // Records without the field get no boundary guard, so an exclusive toDate keeps them single (docs/etl.md, Window membership).
    const s = await sim({ records: 2000, start: START, end: END, toDate: 'exclusive' });
    // A field that is not what E6 filters on: its time is months before the window.
    const odd = s.dataset
      .plausibleRecords(5, new Date('2026-10-31T10:00:00Z'), new Date('2026-10-31T11:00:00Z'), false, 7)
      .map((r) => ({ ...r, createdAt: '2026-01-01T00:00:00Z' }));
    s.insertRecords(odd);
    const schema = await freshSchema();
    let outside = 0;
    const result = await runSync(
      pgDeps({
        pool: bed.pool,
        client: client(s),
        ...syncSettings({ RECORD_TIME_FIELD: 'createdAt', SYNC_WINDOW: '6h' }),
        schema,
        log: silentLogger,
        observer: { windowCommitted: (w) => void (outside += w.outside) },
      }),
      { from: START, to: END },
    );
    expect(result.status).toBe('succeeded');
    expect(outside).toBe(5);
    expect(await expectExactDataset(bed.pool, schema, s, START, END)).toBe(s.dataset.count(START, END, false));
  });

  it('records each run in sync_runs', async () => {
    const s = await sim({ records: 2000, start: START, end: END });
    const schema = await freshSchema();
    const result = await sync(s, schema, { SYNC_WINDOW: '1d' });
    const { rows } = await bed.pool.query(
      `select status, windows, pages, records, error, finished_at is not null as finished from ${schema}.sync_runs where id = $1`,
      [result.runId],
    );
    // About 1,000 records a day: the first day fits one page; the second, planned from it, in one or two.
    expect(result.pages).toBeGreaterThanOrEqual(2);
    expect(rows[0]).toEqual({ status: 'succeeded', windows: 2, pages: result.pages, records: '2000', error: null, finished: true });
  });
});
