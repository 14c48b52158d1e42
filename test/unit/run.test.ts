/**
 * Whole sync runs (src/sync/run/run.ts and its steps) against an in-memory store and a fake E6, no
 * server: the windows planned and the watermark, retries of a transient E6 failure on fake timers,
 * a window E6 now returns shrunk (SYNC_SHRINK keep and replace), records quarantined or refused,
 * the session (and with it the lock) lost mid-run. The SQL is the integration tests' to prove.
 */
import fc from 'fast-check';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { loadConfig, type SyncConfig, type TablesConfig } from '../../src/config.js';
import { UpstreamError } from '../../src/errors.js';
import { silentLogger } from '../helpers/silent-logger.js';
import { sourceLockName } from '../../src/sync/run/context.js';
import { runSync, type SyncObserver, type SyncOptions, type SyncResult } from '../../src/sync/run/run.js';
import { FakeE6, record, type FakeE6Filter, type FakeRecord } from '../helpers/fake-e6.js';
import { ConnectionLost, MemoryStore } from '../helpers/memory-store.js';

const HOUR = 3_600_000;
const T0 = Date.parse('2026-11-01T00:00:00Z');
/** Three hourly windows from T0. */
const FROM = new Date(T0);
const TO = new Date(T0 + 3 * HOUR);
const NOW = T0 + 10 * HOUR;
const SCHEMA = 'unit';

/** The source's sync settings and the schema's table settings, from settings text as the environment gives it. */
function settings(env: Record<string, string> = {}): { config: SyncConfig; tables: TablesConfig } {
  const config = loadConfig({ SYNC_PAGE_SIZE: '10', SYNC_CONCURRENCY: '2', SYNC_MIN_SPLIT: '1s', ...env });
  return { config: config.sources[0]!.sync, tables: config.tables };
}

/** `n` records every `step` ms from `start`, ids from `firstId`. */
function records(start: number, n: number, step: number, firstId = 1): FakeRecord[] {
  return Array.from({ length: n }, (_, i) => record(firstId + i, start + i * step, { eventType: i % 2 ? 'a' : 'b' }));
}

/** The stored payloads' ids, sorted. */
const storedIds = (store: MemoryStore): number[] => store.records.map((r) => (r.payload as FakeRecord).id).sort((a, b) => a - b);
const ids = (rs: readonly FakeRecord[]): number[] => rs.map((r) => r.id).sort((a, b) => a - b);

interface Harness {
  store: MemoryStore;
  e6: FakeE6;
  events: { shrunk: unknown[]; quarantined: unknown[]; committed: unknown[]; pages: number };
  run: (options?: SyncOptions, env?: Record<string, string>) => Promise<SyncResult>;
}

function harness(data: readonly FakeRecord[], filter: FakeE6Filter = {}): Harness {
  const store = new MemoryStore();
  const e6 = new FakeE6(data, {}, filter);
  const events = { shrunk: [] as unknown[], quarantined: [] as unknown[], committed: [] as unknown[], pages: 0 };
  const observer: SyncObserver = {
    windowShrunk: (e) => events.shrunk.push(e),
    recordsQuarantined: (e) => events.quarantined.push(e),
    windowCommitted: (e) => events.committed.push(e),
    pageLoaded: (e) => (events.pages += e.records),
  };
  const run = (options: SyncOptions = {}, env: Record<string, string> = {}) =>
    runSync({ store, client: e6, ...settings(env), schema: SCHEMA, log: silentLogger, observer }, { now: () => NOW, ...options });
  return { store, e6, events, run };
}

/** The result of a run that loaded, narrowed. */
function loaded(result: SyncResult): Exclude<SyncResult, { status: 'locked' }> {
  if (result.status === 'locked') throw new Error('the run found its lock held');
  return result;
}

/** Moves the fake clock on a second at a time until `promise` settles (the run waits only on the backoff). */
async function onFakeTimers<T>(promise: Promise<T>): Promise<T> {
  let settled = false;
  void promise.finally(() => (settled = true)).catch(() => undefined);
  while (!settled) await vi.advanceTimersByTimeAsync(1000);
  return promise;
}

afterEach(() => {
  vi.useRealTimers();
});

describe('a sync run against an in-memory store and a fake E6', () => {
  it('plans whole windows, stores every record once, records each window and moves the watermark to the end', async () => {
    // 25 records 10 min apart from T0. The fake E6's toDate is inclusive: the record on each hour
    // comes with both windows next to it, and the earlier one keeps it.
    const data = records(T0, 25, 10 * 60_000);
    const { store, e6, events, run } = harness(data);
    const result = loaded(await run({ from: FROM, to: TO }));
    expect(result).toMatchObject({ status: 'succeeded', windowsPlanned: 3, windows: 3, records: 19, quarantined: 0, watermark: TO.getTime() });
    expect(storedIds(store)).toEqual(ids(data.filter((r) => Date.parse(r.timestamp) <= TO.getTime())));
    expect(store.ledger.map((w) => [w.start, w.end, w.recordCount])).toEqual([0, 1, 2].map((i) => [T0 + i * HOUR, T0 + (i + 1) * HOUR, i === 0 ? 7 : 6]));
    expect(store.watermark).toBe(TO.getTime());
    expect(store.runs).toEqual([expect.objectContaining({ id: 1, status: 'succeeded', ending: { status: 'succeeded', windows: 3, pages: 3, records: 19 } })]);
    // The first window has none before it and keeps its start's record; each later one leaves
    // out the record at its start, which the window before it kept.
    expect(events.committed).toEqual([
      expect.objectContaining({ records: 7, totalRecords: 7, boundary: 0 }),
      expect.objectContaining({ records: 6, totalRecords: 7, boundary: 1 }),
      expect.objectContaining({ records: 6, totalRecords: 7, boundary: 1 }),
    ]);
    expect(events.pages).toBe(19);
    expect(store.derived.map((d) => d.fields.get('eventType')?.records)).toEqual([7, 6, 6]);
    // A page a window, and one count (pageSize 1) of [T0, T0 + 3h] that shows that the records the
    // windows share at 1h and 2h are one record each.
    expect(e6.requests).toBe(4);

    // The next run resumes at the watermark minus SYNC_LOOKBACK (1h) and ends SYNC_SETTLE (5m) before now.
    const next = loaded(await run());
    expect(next.range).toEqual({ start: TO.getTime() - HOUR, end: NOW - 5 * 60_000 });
    // [2h, 3h) … [8h, 9h), then [9h, 9h55m): the last window ends at the range's end.
    expect(next.windowsPlanned).toBe(8);
    expect(next.watermark).toBe(NOW - 5 * 60_000);
    expect(storedIds(store)).toEqual(ids(data));
    // The window re-read for the lookback replaced its rows: each record is stored once.
    expect(store.records.length).toBe(data.length);
  });

  it('starts a resumed run at the watermark minus SYNC_LOOKBACK, not at its first window aligned below it', async () => {
    const data = records(T0, 30, 5 * 60_000);
    const { store, run } = harness(data);
    await run({ from: FROM, to: TO });
    const resumed = loaded(await run({}, { SYNC_LOOKBACK: '30m' }));
    // The window holding TO - 30m, [2h, 3h), is loaded whole; the run's row says where the lookback began.
    expect(resumed.range).toEqual({ start: TO.getTime() - HOUR / 2, end: NOW - 5 * 60_000 });
    expect(resumed.windowsPlanned).toBe(8);
    expect(store.runs.at(-1)!.range).toEqual(resumed.range);
    expect(storedIds(store)).toEqual(ids(data));
  });

  it('leaves windows RETENTION expired to an explicit --from', async () => {
    const data = records(T0, 30, 5 * 60_000);
    const { store, run } = harness(data);
    await run({ from: FROM, to: TO });
    // What RETENTION leaves of the first window: its ledger row, expired, and no records.
    store.ledger.find((w) => w.start === T0)!.expired = true;
    store.records = store.records.filter((r) => r.window.start !== T0);
    const resumed = loaded(await run({ to: TO }, { SYNC_LOOKBACK: '3h' }));
    expect(resumed.range.start).toBe(T0);
    expect(resumed.windowsPlanned).toBe(2);
    expect(store.recordsOf({ start: T0, end: T0 + HOUR })).toEqual([]);
    const reloaded = loaded(await run({ from: FROM, to: TO }));
    expect(reloaded.windowsPlanned).toBe(3);
    expect(storedIds(store)).toEqual(ids(data));
  });

  it('refuses a range ending later than now minus SYNC_SETTLE before anything is loaded', async () => {
    const { store, run } = harness([]);
    await expect(run({ from: FROM, to: new Date(NOW) })).rejects.toThrow(/later than now minus SYNC_SETTLE/);
    expect(store.runs).toEqual([]);
  });

  it('returns locked while another session holds the source lock', async () => {
    const { store, run } = harness(records(T0, 5, 60_000));
    await store.session(async (other) => {
      await other.lock(sourceLockName(SCHEMA, 'default'), { wait: false }, async () => {
        expect(await run({ from: FROM, to: TO })).toEqual({ status: 'locked' });
      });
    });
    expect(store.runs).toEqual([]);
    expect(loaded(await run({ from: FROM, to: TO })).status).toBe('succeeded');
  });

  it('waits out a transient E6 failure with the backoff and stores the window exactly', async () => {
    vi.useFakeTimers();
    // One page holds the window: a single request, tried three times.
    const data = records(T0, 8, 5 * 60_000);
    const { store, e6, run } = harness(data);
    e6.failNext = 2;
    const running = run({ from: FROM, to: new Date(T0 + HOUR) });
    let settled = false;
    void running.finally(() => (settled = true)).catch(() => undefined);
    await vi.advanceTimersByTimeAsync(2_999);
    // Two waits of the backoff (1 s, then 2 s): not over yet.
    expect(settled).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    const result = loaded(await running);
    expect(result.status).toBe('succeeded');
    expect(e6.delays).toEqual([1000, 2000]);
    expect(e6.requests).toBe(3);
    expect(storedIds(store)).toEqual(ids(data));
  });

  it('fails the run when E6 keeps failing, keeping the windows committed before; the next run completes the data', async () => {
    vi.useFakeTimers();
    const data = records(T0, 30, 5 * 60_000);
    const { store, e6, run } = harness(data);
    // A request of the second window fails every attempt (3): the first window is committed by then.
    const answer = e6.fetchPage.bind(e6);
    let failing = true;
    e6.fetchPage = async (query, options) => {
      if (failing && query.startDate.getTime() >= T0 + HOUR) e6.failNext = 3;
      return answer(query, options);
    };
    const result = loaded(await onFakeTimers(run({ from: FROM, to: TO }, { SYNC_CONCURRENCY: '1' })));
    expect(result.status).toBe('failed');
    expect(result.error).toBeInstanceOf(UpstreamError);
    expect(result.windows).toBe(1);
    expect(store.ledger.map((w) => w.start)).toEqual([T0]);
    expect(store.watermark).toBe(T0 + HOUR);
    expect(store.runs[0]).toMatchObject({ status: 'failed', ending: { error: expect.stringMatching(/503/) } });
    // E6 is well again (a request of the third window read ahead may have left a failure armed).
    failing = false;
    e6.failNext = 0;
    const next = loaded(await run({ from: FROM, to: TO }));
    expect(next.status).toBe('succeeded');
    expect(storedIds(store)).toEqual(ids(data.filter((r) => Date.parse(r.timestamp) < TO.getTime())));
  });

  describe('a window E6 now returns with fewer records than are stored', () => {
    const data = records(T0, 30, 5 * 60_000);
    const inSecondHour = (r: FakeRecord) => Date.parse(r.timestamp) >= T0 + HOUR && Date.parse(r.timestamp) < T0 + 2 * HOUR;

    it('keeps its stored records under SYNC_SHRINK=keep: the window is committed again holding them all', async () => {
      const { store, e6, events, run } = harness(data);
      await run({ from: FROM, to: TO });
      const before = storedIds(store);
      e6.records = data.filter((r) => !(inSecondHour(r) && r.id % 3 === 0));
      const result = loaded(await run({ from: FROM, to: TO }, { SYNC_SHRINK: 'keep' }));
      expect(result.status).toBe('succeeded');
      expect(storedIds(store)).toEqual(before);
      expect(events.shrunk).toEqual([{ window: { start: T0 + HOUR, end: T0 + 2 * HOUR }, stored: 12, returned: 8, kept: 4, action: 'kept' }]);
      // Its ledger row is this run's, counting what the window holds and E6's count for it now (the
      // window's share: not the record at its start, which the window before keeps); the kept records keep their first run.
      expect(store.ledger.find((w) => w.start === T0 + HOUR)).toMatchObject({ runId: 2, recordCount: 12, totalRecords: 8 });
      expect(store.recordsOf({ start: T0 + HOUR, end: T0 + 2 * HOUR }).filter((r) => r.runId === 1)).toHaveLength(4);
      expect(result.records).toBe(30);
    });

    it('is replaced by what E6 returns under SYNC_SHRINK=replace', async () => {
      const { store, e6, events, run } = harness(data);
      await run({ from: FROM, to: TO });
      e6.records = data.filter((r) => !(inSecondHour(r) && r.id % 3 === 0));
      const result = loaded(await run({ from: FROM, to: TO }, { SYNC_SHRINK: 'replace' }));
      expect(result.status).toBe('succeeded');
      expect(storedIds(store)).toEqual(ids(e6.records.filter((r) => Date.parse(r.timestamp) < TO.getTime())));
      expect(events.shrunk).toEqual([{ window: { start: T0 + HOUR, end: T0 + 2 * HOUR }, stored: 12, returned: 8, action: 'replaced' }]);
      expect(store.ledger.find((w) => w.start === T0 + HOUR)?.recordCount).toBe(8);
    });
  });

  describe('a re-read window that lost and gained records upstream', () => {
    // 24 records an hour; the second hour's change between the runs.
    const data = records(T0, 72, 150_000);
    // (T0 + 1h, T0 + 2h]: a record at a cut belongs to the earlier window (src/sync/membership/boundary.ts; the fake E6's toDate is inclusive).
    const second = (r: FakeRecord) => Date.parse(r.timestamp) > T0 + HOUR && Date.parse(r.timestamp) <= T0 + 2 * HOUR;
    const secondIds = data.filter(second).map((r) => r.id);
    const added = (n: number) => Array.from({ length: n }, (_, i) => record(1001 + i, T0 + HOUR + 60_000 + i * 7_000, { eventType: 'new' }));
    const cases = [
      { name: 'losing 10 and gaining 5', lost: secondIds.slice(3, 13), gained: added(5) },
      { name: 'losing 5 and gaining 5', lost: secondIds.slice(0, 5), gained: added(5) },
      { name: 'gaining only', lost: [], gained: added(5) },
    ];
    for (const { name, lost, gained } of cases) {
      it(`${name}: keep stores the union of what was stored and what E6 returns, replace what E6 returns`, async () => {
        for (const shrink of ['keep', 'replace'] as const) {
          const { store, e6, events, run } = harness(data);
          await run({ from: FROM, to: TO });
          e6.records = [...data.filter((r) => !lost.includes(r.id)), ...gained];
          const result = loaded(await run({ from: FROM, to: TO }, { SYNC_SHRINK: shrink }));
          expect(result.status).toBe('succeeded');
          const now = ids(e6.records.filter((r) => Date.parse(r.timestamp) < TO.getTime()));
          const union = ids([...data.filter((r) => Date.parse(r.timestamp) < TO.getTime()), ...gained]);
          expect(storedIds(store)).toEqual(shrink === 'keep' ? union : now);
          const window = { start: T0 + HOUR, end: T0 + 2 * HOUR };
          expect(store.ledger.find((w) => w.start === window.start)?.recordCount).toBe(24 + (shrink === 'keep' ? gained.length : gained.length - lost.length));
          expect(events.shrunk).toEqual(
            shrink === 'keep'
              ? lost.length > 0
                ? [{ window, stored: 24, returned: 24 - lost.length + gained.length, kept: lost.length, action: 'kept' }]
                : []
              : lost.length > gained.length
                ? [{ window, stored: 24, returned: 24 - lost.length + gained.length, action: 'replaced' }]
                : [],
          );
          // The derived tables are handed what the window holds: kept records make the store group the rollup itself.
          const derived = store.derived.filter((d) => d.window.start === window.start).at(-1)!;
          expect(derived.rollup.exact).toBe(!(shrink === 'keep' && lost.length > 0));
        }
      });
    }

    it('keeps as many copies of a payload as the larger of the two reads held', async () => {
      const twice = records(T0 + HOUR + 30_000, 3, 1000, 500);
      const { store, e6, run } = harness([...data, ...twice, ...twice]);
      await run({ from: FROM, to: TO });
      e6.records = [...data, twice[0]!, twice[1]!, twice[1]!, twice[1]!];
      await run({ from: FROM, to: TO }, { SYNC_SHRINK: 'keep' });
      const copies = (id: number) => store.records.filter((r) => (r.payload as FakeRecord).id === id).length;
      expect([copies(500), copies(501), copies(502)]).toEqual([2, 3, 2]);
      await run({ from: FROM, to: TO }, { SYNC_SHRINK: 'replace' });
      expect([copies(500), copies(501), copies(502)]).toEqual([1, 3, 0]);
    });

    it('under keep, a record that reached a cut late moves to the window before when both are read again, stored once', async () => {
      // The fake E6's toDate is inclusive: a record at T0 + 1h comes with both windows, and [T0, T0 + 1h) owns it.
      const atCut = T0 + HOUR;
      const late = [record(700, atCut, { eventType: 'late' }), record(701, atCut, { note: 'a\u0000b' })];
      const { store, e6, events, run } = harness(data);
      await run({ from: FROM, to: TO });
      e6.records = [...data, ...late];
      // [T0, T0 + 1h) is not read again: [T0 + 1h, …) stores what it does not hold (one record, one quarantined).
      await run({ from: new Date(atCut), to: TO }, { SYNC_SHRINK: 'keep' });
      const where = () => [
        ...store.records.filter((r) => (r.payload as FakeRecord).id === 700).map((r) => r.window.start),
        ...store.quarantine.filter((q) => q.text.includes('"id":701')).map((q) => q.window.start),
      ];
      expect(where()).toEqual([atCut, atCut]);
      // Both windows again: the earlier one owns them now; the later one keeps no copy as if E6 had deleted it.
      const shrunkBefore = events.shrunk.length;
      expect(loaded(await run({ from: FROM, to: TO }, { SYNC_SHRINK: 'keep' })).status).toBe('succeeded');
      expect(where()).toEqual([T0, T0]);
      expect(events.shrunk.slice(shrunkBefore)).toEqual([]);
      expect(storedIds(store)).toEqual(ids([...data.filter((r) => Date.parse(r.timestamp) < TO.getTime()), late[0]!]));
    });

    it('keeps quarantined records E6 no longer returns under keep', async () => {
      const bad = record(900, T0 + HOUR + 90_000, { note: 'a\u0000b' });
      const { store, e6, run } = harness([...data, bad]);
      await run({ from: FROM, to: TO });
      expect(store.quarantine).toHaveLength(1);
      e6.records = [...data];
      await run({ from: FROM, to: TO }, { SYNC_SHRINK: 'keep' });
      expect(store.quarantine.map((q) => q.path)).toEqual(['$.note']);
      await run({ from: FROM, to: TO }, { SYNC_SHRINK: 'replace' });
      expect(store.quarantine).toEqual([]);
    });
  });

  it('keeps a record jsonb cannot store in the quarantine and commits the rest of its window', async () => {
    const data = records(T0, 6, 5 * 60_000);
    data[2] = record(3, T0 + 10 * 60_000, { note: 'a\u0000b' });
    const { store, events, run } = harness(data);
    const result = loaded(await run({ from: FROM, to: new Date(T0 + HOUR) }));
    expect(result).toMatchObject({ status: 'succeeded', records: 5, quarantined: 1 });
    expect(storedIds(store)).toEqual([1, 2, 4, 5, 6]);
    expect(store.quarantine).toEqual([expect.objectContaining({ path: '$.note', eventTime: T0 + 10 * 60_000, text: expect.stringContaining('\\u0000') })]);
    expect(events.quarantined).toEqual([{ window: { start: T0, end: T0 + HOUR }, records: 1 }]);
  });

  it('quarantines the records the database refuses for a data reason, with the SQLSTATE and message, and commits the rest', async () => {
    const data = records(T0, 30, 5 * 60_000);
    const { store, events, run } = harness(data);
    const refused = new Set([3, 20, 21]);
    store.refuse = (payload) =>
      refused.has((payload as FakeRecord).id)
        ? (payload as FakeRecord).id === 3
          ? { code: '23514', message: 'refused', constraint: 'records_small' }
          : { code: '22003', message: 'refused' }
        : undefined;
    const result = loaded(await run({ from: FROM, to: TO }, { SYNC_CONCURRENCY: '1' }));
    expect(result).toMatchObject({ status: 'succeeded', windows: 3, records: 27, quarantined: 3 });
    expect(storedIds(store)).toEqual(ids(data).filter((id) => !refused.has(id)));
    expect(store.quarantine.map((q) => [(JSON.parse(q.text) as FakeRecord).id, q.sqlstate, q.message])).toEqual([
      [3, '23514', 'refused'],
      [20, '22003', 'refused'],
      [21, '22003', 'refused'],
    ]);
    expect(store.quarantine.map((q) => q.text)).toEqual([...refused].map((id) => JSON.stringify(data[id - 1])));
    expect(events.quarantined).toEqual([
      { window: { start: T0, end: T0 + HOUR }, records: 1 },
      { window: { start: T0 + HOUR, end: T0 + 2 * HOUR }, records: 2 },
    ]);
    // The derived tables get the window's rows: the catalogue without the refused records, the rollup grouped by the store.
    // (The first window holds [T0, T0 + 1h], 13 records; the others (start, end]: a record at a cut belongs to the earlier window.)
    expect(store.derived.map((d) => [d.fields.get('eventType')?.records, d.rollup.exact])).toEqual([
      [12, false],
      [10, false],
      [5, true],
    ]);
    expect(store.ledger.map((w) => w.recordCount)).toEqual([12, 10, 5]);
    // Quarantined records count as stored: the next run passes the windows without a shrink.
    const again = loaded(await run({ from: FROM, to: TO }, { SYNC_CONCURRENCY: '1' }));
    expect(again).toMatchObject({ status: 'succeeded', windows: 3, records: 27, quarantined: 3 });
    expect(events.shrunk).toEqual([]);
    expect(store.quarantine).toHaveLength(3);
  });

  it('under keep, a stored record a constraint added since refuses: not stored again while E6 returns it, kept in the quarantine once it does not', async () => {
    const data = records(T0, 30, 5 * 60_000);
    const { store, e6, events, run } = harness(data);
    await run({ from: FROM, to: TO });
    const ruled = new Set([14, 15]);
    store.refuse = (payload) =>
      ruled.has((payload as FakeRecord).id) ? { code: '23514', message: 'new row violates check constraint "rule"', constraint: 'rule' } : undefined;
    e6.records = data.filter((r) => r.id !== 15);
    const result = loaded(await run({ from: FROM, to: TO }, { SYNC_SHRINK: 'keep' }));
    expect(result).toMatchObject({ status: 'succeeded', records: 28, quarantined: 2 });
    expect(storedIds(store)).toEqual(ids(data).filter((id) => !ruled.has(id)));
    expect(store.quarantine.map((q) => [(JSON.parse(q.text) as FakeRecord).id, q.sqlstate])).toEqual([
      [14, '23514'],
      [15, '23514'],
    ]);
    expect(events.shrunk).toEqual([
      expect.objectContaining({ window: { start: T0 + HOUR, end: T0 + 2 * HOUR }, stored: 12, returned: 11, kept: 1, action: 'kept' }),
    ]);
  });

  it('rolls a window back whole when the store refuses one of its records for another reason than the data, and fails the run', async () => {
    const data = records(T0, 30, 5 * 60_000);
    const { store, run } = harness(data);
    store.refuse = (payload) => ((payload as FakeRecord).id === 20 ? { code: '57014', message: 'canceling statement due to user request' } : undefined);
    const result = loaded(await run({ from: FROM, to: TO }, { SYNC_CONCURRENCY: '1' }));
    expect(result.status).toBe('failed');
    expect(result.windows).toBe(1);
    expect(store.ledger.map((w) => w.start)).toEqual([T0]);
    // The first window keeps the record at its end too: the fake E6's toDate is inclusive, and the earlier slice keeps a record at a cut.
    expect(storedIds(store)).toEqual(ids(data.slice(0, 13)));
    expect(store.quarantine).toEqual([]);
  });

  it('fails cleanly when the session (and its lock) is lost mid-run: the end is recorded on a fresh session, the next run completes the data', async () => {
    const data = records(T0, 30, 5 * 60_000);
    const { store, run } = harness(data);
    let lost = false;
    store.loseSessionAt = (window) => !lost && window.start === T0 + HOUR && (lost = true);
    const result = loaded(await run({ from: FROM, to: TO }));
    expect(result.status).toBe('failed');
    expect(result.error).toBeInstanceOf(ConnectionLost);
    expect(result.windows).toBe(1);
    // Recorded failed, not left running for the next run to call abandoned.
    expect(store.runs).toEqual([
      expect.objectContaining({ status: 'failed', ending: expect.objectContaining({ error: expect.stringMatching(/terminated/) }) }),
    ]);
    // The lost session's locks are gone with it: nothing is left held.
    expect([...store.locks.values()].every((l) => l.exclusive === undefined && l.shared.size === 0)).toBe(true);
    expect(store.watermark).toBe(T0 + HOUR);
    const next = loaded(await run({ from: FROM, to: TO }));
    expect(next.status).toBe('succeeded');
    expect(storedIds(store)).toEqual(ids(data));
    expect(store.runs.map((r) => r.status)).toEqual(['failed', 'succeeded']);
  });
});

describe('window membership under a filter time the records do not carry (E6 filters on an ingestion time)', () => {
  /** A hidden filter time: the record's own plus a fixed offset per record in [-lagMs, +lagMs], a pure function of its id. */
  const lagged =
    (lagMs: number, seed = 1) =>
    (r: FakeRecord) =>
      Date.parse(r.timestamp) + Math.round((((r.id * 2654435761 + seed) % 1000) / 999) * 2 * lagMs) - lagMs;
  /** ids E6 returns for [from, to] (inclusive) or [from, to) (exclusive), by the filter time. */
  const served = (data: readonly FakeRecord[], filterTime: (r: FakeRecord) => number, toDate: 'inclusive' | 'exclusive', from: number, to: number) =>
    ids(data.filter((r) => filterTime(r) >= from && (toDate === 'inclusive' ? filterTime(r) <= to : filterTime(r) < to)));

  it.each(['inclusive', 'exclusive'] as const)(
    '40 records on every hour, filter time up to 2 min either side, %s toDate: each record E6 serves stored once, the ones outside their window counted',
    async (toDate) => {
      // Hours 1 to 6, half of each hour's records on the hour and half 30 s later.
      const data = Array.from({ length: 6 * 40 }, (_, i) => record(i + 1, T0 + (Math.floor(i / 40) + 1) * HOUR + (i % 2) * 30_000, { k: i }));
      const filterTime = lagged(120_000);
      const { store, events, run } = harness(data, { toDate, filterTime });
      const to = new Date(T0 + 4 * HOUR);
      expect(loaded(await run({ from: FROM, to }, { SYNC_PAGE_SIZE: '100' })).status).toBe('succeeded');
      expect(storedIds(store)).toEqual(served(data, filterTime, toDate, T0, to.getTime()));
      // The lag puts some of each hour's records in the window before it, stored there; those whose
      // time is after that window's end are counted (one exactly at its end is not outside it).
      const outside = (events.committed as { outside: number }[]).reduce((n, w) => n + w.outside, 0);
      const expected = data.filter((r) => {
        const t = Date.parse(r.timestamp);
        return t % HOUR !== 0 && filterTime(r) < Math.floor(t / HOUR) * HOUR && filterTime(r) >= T0 && filterTime(r) <= to.getTime();
      }).length;
      expect(outside).toBe(expected);
      expect(outside).toBeGreaterThan(10);
      // Again, and resumed from a committed window: nothing doubles, nothing goes.
      await run({ from: FROM, to });
      await run({ from: new Date(T0 + 2 * HOUR), to });
      expect(storedIds(store)).toEqual(served(data, filterTime, toDate, T0, to.getTime()));
    },
  );

  it('takes what two slices share as the boundary set without asking under UPSTREAM_TO_DATE=inclusive, and drops nothing under exclusive', async () => {
    const data = records(T0, 31, 6 * 60_000);
    for (const [toDate, rule, requests] of [
      ['inclusive', 'inclusive', 3],
      ['exclusive', 'exclusive', 3],
      ['inclusive', 'auto', 4],
      ['exclusive', 'auto', 3],
    ] as const) {
      const { store, e6, run } = harness(data, { toDate });
      await run({ from: FROM, to: TO }, { UPSTREAM_TO_DATE: rule, SYNC_PAGE_SIZE: '100' });
      expect(storedIds(store), `${toDate} E6, ${rule}`).toEqual(served(data, (r) => Date.parse(r.timestamp), toDate, T0, TO.getTime()));
      expect(e6.requests, `${toDate} E6, ${rule}`).toBe(requests);
    }
  });

  it('property: any filter lag within SYNC_SETTLE, either toDate, any windows and page sizes, runs resumed anywhere: every record stored exactly once', async () => {
    let runs = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.integer({ min: -10 * 60_000, max: 3 * HOUR + 10 * 60_000 }), { maxLength: 160 }),
        fc.constantFrom(60_000, 1000, 1),
        fc.integer({ min: 0, max: 5 * 60_000 }),
        fc.constantFrom<'inclusive' | 'exclusive'>('inclusive', 'exclusive'),
        fc.constantFrom('7m', '20m', '1h'),
        fc.integer({ min: 4, max: 40 }),
        fc.integer({ min: 1, max: 5 }),
        fc.integer({ min: 0, max: 2 }),
        async (offsets, grain, lagMs, toDate, window, pageSize, concurrency, resumeHours) => {
          const data = offsets.map((o, i) => record(i + 1, T0 + Math.floor(o / grain) * grain));
          // No instant may hold more than a page: that case fails loudly under a reshuffling order, tested elsewhere.
          const perSecond = new Map<number, number>();
          for (const r of data) {
            const s = Math.floor(Date.parse(r.timestamp) / 1000);
            perSecond.set(s, (perSecond.get(s) ?? 0) + 1);
          }
          const size = Math.max(pageSize, 2 * Math.max(0, ...perSecond.values()) + 2);
          const filterTime = lagged(lagMs, offsets.length);
          const { store, run } = harness(data, { toDate, filterTime });
          const env = { SYNC_WINDOW: window, SYNC_PAGE_SIZE: String(size), SYNC_CONCURRENCY: String(concurrency) };
          // The first window starts at --from rounded down to SYNC_WINDOW.
          const windowMs = { '7m': 7, '20m': 20, '1h': 60 }[window] * 60_000;
          const start = Math.floor(T0 / windowMs) * windowMs;
          expect(loaded(await run({ from: FROM, to: TO }, env)).status).toBe('succeeded');
          expect(storedIds(store)).toEqual(served(data, filterTime, toDate, start, TO.getTime()));
          expect(loaded(await run({ from: new Date(T0 + resumeHours * HOUR), to: TO }, env)).status).toBe('succeeded');
          expect(storedIds(store)).toEqual(served(data, filterTime, toDate, start, TO.getTime()));
          runs++;
        },
      ),
      { numRuns: 60 },
    );
    expect(runs).toBe(60);
  });
});

describe("a window's transaction and its reads (SYNC_READ_AHEAD)", () => {
  /** Whether a request reads inside window 0, [T0, T0 + 1h]. */
  const inFirstWindow = (q: { startDate: Date; toDate?: Date }) => q.startDate.getTime() < T0 + HOUR && (q.toDate?.getTime() ?? Infinity) <= T0 + HOUR;

  it.each([
    ['32MiB', 'opens once every page of the window is read', 0],
    ['0', 'opens before any page past the bound, reads going on in it', 1],
  ])('SYNC_READ_AHEAD=%s: the transaction %s; the same records either way', async (bound, _what, readsInside) => {
    // A record a minute: 60 a window, pages of 10, so each window takes several requests.
    const data = records(T0, 180, 60_000);
    const { store, e6, run } = harness(data);
    const order: string[] = [];
    e6.fault = (q) => {
      if (inFirstWindow(q)) order.push('read');
      return undefined;
    };
    // Called as each window's transaction begins.
    store.loseSessionAt = (w) => {
      order.push(`begin ${w.start === T0 ? 'first' : 'later'}`);
      return false;
    };
    const result = loaded(await run({ from: FROM, to: TO }, { SYNC_READ_AHEAD: bound }));
    expect(result).toMatchObject({ status: 'succeeded', windows: 3, records: 180 });
    expect(storedIds(store)).toEqual(ids(data));
    const begin = order.indexOf('begin first');
    expect(order.filter((o) => o === 'read').length).toBeGreaterThan(1);
    expect(order.slice(begin).includes('read')).toBe(readsInside === 1);
  });
});

describe('the next window read while one is written (SYNC_READ_AHEAD)', () => {
  /** Whether a request reads inside window 1, [T0 + 1h, T0 + 2h] (window 2's count reaches into it: not counted). */
  const inSecondWindow = (q: { startDate: Date; toDate?: Date }) => q.startDate.getTime() >= T0 + HOUR && (q.toDate?.getTime() ?? Infinity) <= T0 + 2 * HOUR;

  it.each([
    ['32MiB', 'every request of window 1 is sent while window 0 is written', true],
    ['0', 'window 1 holds no more than its budget while window 0 streams', false],
  ])('SYNC_READ_AHEAD=%s: %s; the same records either way', async (bound, _what, whole) => {
    // A record a minute: 60 a window, pages of 10: window 1 needs more requests than SYNC_CONCURRENCY (2).
    const data = records(T0, 180, 60_000);
    const { store, e6, run } = harness(data);
    let second = 0;
    e6.fault = (q) => {
      if (inSecondWindow(q)) second++;
      return undefined;
    };
    let sentWhileFirstWritten: number | undefined;
    store.beforeWrite = async (w) => {
      if (w.start !== T0 || sentWhileFirstWritten !== undefined) return;
      // The fake E6 answers without timers: a few turns of the event loop let the reader do all it may.
      for (let turn = 0; turn < 20; turn++) await new Promise((resolve) => setImmediate(resolve));
      sentWhileFirstWritten = second;
    };
    const result = loaded(await run({ from: FROM, to: TO }, { SYNC_READ_AHEAD: bound }));
    expect(result).toMatchObject({ status: 'succeeded', windows: 3, records: 180 });
    expect(storedIds(store)).toEqual(ids(data));
    expect(second).toBeGreaterThan(2);
    if (whole) expect(sentWhileFirstWritten).toBe(second);
    else expect(sentWhileFirstWritten).toBeLessThanOrEqual(2);
  });
});
