/**
 * A page is data only if it is not a copy (issue 39, item 4), against real PostgreSQL: an E6 that
 * ignores `pageNumber` (every page answers page 1's records, echoing the number asked, as a proxy
 * that drops the parameter does) at an instant holding 5,000 records stores no copy, parks the
 * window with a reason saying pages repeat, logs it at warn and `sync` exits 1; the other windows
 * are exact. Records that really repeat (a page's worth of identical records) are all stored.
 * Each against the simulator and against a test-only E6 (FakeE6, and a proxy in this file).
 */
import { startSimulator, type Simulator } from '@analytics-exporter/simulator';
import { describe, expect, it } from 'vitest';
import { migrate } from '../../src/db/migrate.js';
import { createLogger } from '../../src/log.js';
import type { E6Pages } from '../../src/sync/store/ports.js';
import { ExporterMetrics } from '../../src/metrics/registry.js';
import { runSync, type SyncObserver } from '../../src/sync/run/run.js';
import { runCliInProcess } from '../helpers/cli.js';
import { useAppPool, useTestDatabase } from '../helpers/db.js';
import { FakeE6, record, type FakeRecord } from '../helpers/fake-e6.js';
import { captureLog } from '../helpers/log-capture.js';
import { pgDeps } from '../helpers/pg-deps.js';
import { silentLogger } from '../helpers/silent-logger.js';
import { canonicalJson, simClient, simulatorEnv, storedMultiset, syncSettings } from '../helpers/sync.js';

const db = useTestDatabase();
const bed = useAppPool(db);
const closers = bed.closers;

const START = new Date('2026-10-31T00:00:00Z');
const END = new Date('2026-11-01T00:00:00Z');
/** The window holding the dense instant, and the instant. */
const DENSE = { start: new Date('2026-10-31T10:00:00Z'), end: new Date('2026-10-31T11:00:00Z') };
const AT = new Date('2026-10-31T10:30:07Z');
const ENV = { SYNC_WINDOW: '1h', SYNC_PAGE_SIZE: '1000', SYNC_SETTLE: '0' };

/** A proxy before `e6` that drops `pageNumber`: E6 answers page 1, the proxy echoes the number asked. */
function droppingPageNumber(e6: E6Pages): E6Pages {
  return {
    fetchPage: async (query, options) => {
      const page = await e6.fetchPage({ ...query, pageNumber: 1 }, options);
      const asked = query.pageNumber ?? 1;
      const text = page.text!.replace(/^\{"pageNumber":1,/, `{"pageNumber":${asked},`);
      return { ...page, pageNumber: asked, text, bytes: Buffer.from(text, 'utf8') };
    },
  };
}

async function run(client: E6Pages, schema: string, log = silentLogger, observer?: SyncObserver) {
  return runSync(pgDeps({ pool: bed.pool, client, ...syncSettings(ENV), schema, log, ...(observer && { observer }) }), {
    from: START,
    to: END,
    now: () => END.getTime(),
  });
}

/** analytics_exporter_sync_repeated_pages_total by outcome. */
async function repeatedPagesTotal(metrics: ExporterMetrics): Promise<Record<string, number>> {
  const { values } = await metrics.registry.getSingleMetric('analytics_exporter_sync_repeated_pages_total')!.get();
  return Object.fromEntries(values.map((v) => [String(v.labels.outcome), v.value]));
}

async function ledger(schema: string) {
  const { rows } = await bed.pool.query<{ start: Date; status: string; reason: string | null }>(
    `select window_start as start, status, reason from "${schema}".sync_windows where status <> 'committed' order by window_start`,
  );
  return rows;
}

/** The warn lines about repeated pages and parking, as the run logged them. */
function warnings(log: ReturnType<typeof captureLog>) {
  const lines = log.lines().filter((l) => l.level === 'warn');
  return {
    repeat: lines.filter((l) => String(l.msg).startsWith('pages repeat')),
    parked: lines.filter((l) => String(l.msg).startsWith('window parked')),
  };
}

const iso = (d: Date) => d.toISOString();

/**
 * A simulator ignoring pageNumber with `count` records at AT, synced into `schema`: asserts the run
 * succeeded with the dense window parked as pages_repeat and every other window exact.
 */
async function parkedBySimulator(count: number, schema: string) {
  const s = await startSimulator({ port: 0, records: 480, start: START, end: END, faults: { ignorePageNumber: true } });
  closers.push(() => s.close());
  s.insertRecords(s.dataset.plausibleRecords(count, AT, AT, true, 1));
  const served = (from: Date, to: Date) => [...s.dataset.iterate(from, to, false)].map(canonicalJson);
  expect(served(AT, new Date(AT.getTime() + 1000))).toHaveLength(count);
  await migrate(bed.pool, schema, silentLogger);
  const client = simClient(s);
  closers.push(() => client.close());
  const log = captureLog();
  const result = await run(client, schema, createLogger('info', { format: 'json', destination: log }));
  expect(result).toMatchObject({ status: 'succeeded', windowsPlanned: 24, windows: 23, parked: 1 });
  // Every other window exact; nothing of the dense window, so no copy.
  const stored = await storedMultiset(bed.pool, schema);
  expect(stored.join('\n') === [...served(START, DENSE.start), ...served(DENSE.end, END)].sort().join('\n')).toBe(true);
  expect(await ledger(schema)).toEqual([
    { start: DENSE.start, status: 'parked', reason: expect.stringMatching(/^pages repeat: .*does not honour pageNumber/) },
  ]);
  const { repeat, parked } = warnings(log);
  expect(repeat.length).toBeGreaterThan(0);
  expect(parked).toEqual([expect.objectContaining({ window: [iso(DENSE.start), iso(DENSE.end)], reason: 'pages_repeat' })]);
  return { s, stored, repeat };
}

describe('an E6 that ignores pageNumber at an instant of 5,000 records (real PostgreSQL)', () => {
  it('the simulator: no copy stored, the window parked saying pages repeat, loud, sync exits 1', { timeout: 120_000 }, async () => {
    const schema = 'repeat_sim';
    const { s, stored, repeat } = await parkedBySimulator(5000, schema);
    for (const line of repeat)
      expect(line).toMatchObject({
        window: [iso(DENSE.start), iso(DENSE.end)],
        pageSize: 1000,
        repeatedPages: [
          [2, 1],
          [3, 1],
          [4, 1],
          [5, 1],
        ],
        outcome: 'parked',
      });

    // `sync` over the window: exit status 1, the warning on stderr naming the source.
    const env = { ...simulatorEnv(s), ...ENV, DATABASE_URL: db.url, DATABASE_SCHEMA: schema, LOG_FORMAT: 'json' };
    const cli = await runCliInProcess(['sync', '--from', iso(DENSE.start), '--to', iso(DENSE.end)], env);
    expect(cli.code, cli.stderr).toBe(1);
    expect(cli.stderr).toMatch(/"level":"warn".*"source":"default".*"outcome":"parked".*"msg":"pages repeat/);
    expect(cli.stderr).toMatch(/"level":"warn".*"reason":"pages_repeat".*"msg":"window parked/);
    expect(await storedMultiset(bed.pool, schema)).toEqual(stored);
  });

  it('the simulator, 4,204 records (a last page of 204): the last page answered full is a copy, not an outage', { timeout: 120_000 }, async () => {
    const { repeat } = await parkedBySimulator(4204, 'repeat_sim_short_last');
    for (const line of repeat) expect(line).toMatchObject({ window: [iso(DENSE.start), iso(DENSE.end)], pageSize: 1000, outcome: 'parked' });
  });

  it('a test-only E6 behind a proxy that drops pageNumber: the same', async () => {
    const t = AT.getTime();
    const dense = Array.from({ length: 5000 }, (_, i) => record(i + 1, t, { n: i }));
    const around = Array.from({ length: 48 }, (_, i) => record(10_000 + i, START.getTime() + i * 30 * 60_000 + 1000));
    const e6 = new FakeE6([...dense, ...around], { sleep: async () => undefined });
    const schema = 'repeat_fake';
    await migrate(bed.pool, schema, silentLogger);
    const log = captureLog();
    const metrics = new ExporterMetrics({ processMetrics: false });
    const result = await run(droppingPageNumber(e6), schema, createLogger('info', { format: 'json', destination: log }), metrics.syncObserver('default'));
    expect(result).toMatchObject({ status: 'succeeded', windows: 23, parked: 1 });
    const expected = around.filter((r) => Date.parse(r.timestamp) < DENSE.start.getTime() || Date.parse(r.timestamp) >= DENSE.end.getTime());
    expect(await storedMultiset(bed.pool, schema)).toEqual(expected.map(canonicalJson).sort());
    expect(await ledger(schema)).toEqual([{ start: DENSE.start, status: 'parked', reason: expect.stringMatching(/^pages repeat: /) }]);
    const { repeat, parked } = warnings(log);
    expect(repeat.length).toBeGreaterThan(0);
    expect(new Set(repeat.map((l) => l.outcome))).toEqual(new Set(['parked']));
    expect(parked.map((l) => l.reason)).toEqual(['pages_repeat']);
    // Pages 2 to 5 of 1,000, each read that found them counted.
    const counted = await repeatedPagesTotal(metrics);
    expect(counted.stored).toBe(0);
    expect(counted.parked! % 4).toBe(0);
    expect(counted.parked).toBeGreaterThan(0);
  });
});

describe('records that really repeat a page (real PostgreSQL)', () => {
  /** 2,000 copies of one record at the instant, then 500 others: pages 1 and 2 of 1,000 are equal. */
  function denseWithCopies(make: (i: number) => FakeRecord): FakeRecord[] {
    return [...Array.from({ length: 2000 }, () => make(1)), ...Array.from({ length: 500 }, (_, i) => make(i + 2))];
  }

  it('a test-only E6: every copy stored, and the check said so', async () => {
    const t = AT.getTime();
    const around = Array.from({ length: 48 }, (_, i) => record(10_000 + i, START.getTime() + i * 30 * 60_000 + 1000));
    const records = [...denseWithCopies((id) => record(id, t, { same: id === 1 })), ...around];
    const e6 = new FakeE6(records, { sleep: async () => undefined });
    const schema = 'really_repeat_fake';
    await migrate(bed.pool, schema, silentLogger);
    const log = captureLog();
    const metrics = new ExporterMetrics({ processMetrics: false });
    const result = await run(e6, schema, createLogger('info', { format: 'json', destination: log }), metrics.syncObserver('default'));
    expect(result).toMatchObject({ status: 'succeeded', windows: 24, parked: 0 });
    const stored = await storedMultiset(bed.pool, schema);
    expect(stored).toEqual(records.map(canonicalJson).sort());
    expect(stored.filter((r) => r === canonicalJson(record(1, t, { same: true })))).toHaveLength(2000);
    // The instant, and the second before it (an inclusive toDate returns the instant with it too).
    const { repeat } = warnings(log);
    expect(repeat.length).toBeGreaterThan(0);
    for (const line of repeat) expect(line).toMatchObject({ window: [iso(DENSE.start), iso(DENSE.end)], repeatedPages: [[2, 1]], outcome: 'stored' });
    expect(await repeatedPagesTotal(metrics)).toEqual({ stored: repeat.length, parked: 0 });
  });

  it('the simulator: every copy stored, exactly', { timeout: 120_000 }, async () => {
    const s: Simulator = await startSimulator({ port: 0, records: 480, start: START, end: END });
    closers.push(() => s.close());
    const [one, ...others] = s.dataset.plausibleRecords(501, AT, AT, true, 2);
    s.insertRecords([...Array.from({ length: 2000 }, () => one!), ...others]);
    const schema = 'really_repeat_sim';
    await migrate(bed.pool, schema, silentLogger);
    const client = simClient(s);
    closers.push(() => client.close());
    const log = captureLog();
    const result = await run(client, schema, createLogger('info', { format: 'json', destination: log }));
    expect(result).toMatchObject({ status: 'succeeded', windows: 24, parked: 0 });
    const expected = [...s.dataset.iterate(START, END, false)].map(canonicalJson).sort();
    const stored = await storedMultiset(bed.pool, schema);
    expect(stored.length).toBe(expected.length);
    expect(stored.join('\n') === expected.join('\n')).toBe(true);
    expect(stored.filter((r) => r === canonicalJson(one))).toHaveLength(2000);
    const { repeat } = warnings(log);
    expect(repeat.length).toBeGreaterThan(0);
    expect(new Set(repeat.map((l) => l.outcome))).toEqual(new Set(['stored']));
  });
});
