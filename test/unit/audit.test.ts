/**
 * The audit (src/sync/audit/compare.ts, src/sync/audit/source.ts) against an in-memory store and a fake E6 that
 * counts its requests: a year of hourly windows with no drift and with k drifted windows, within
 * the request budgets of issue 24 (no drift: at most 20; k windows: at most 1 + 2·k·⌈log2 n⌉);
 * records exactly at a window's end owned by that window; gaps and expired windows; the repair
 * loading the differing windows again through a sync run, on fake timers.
 *
 * The year is seeded straight into the store (ledger and records as a sync stores them: a record
 * at a window's end in the window that ends there), not loaded through 8,760 sync windows.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { UpstreamHttpError } from '../../src/errors.js';
import { silentLogger } from '../helpers/silent-logger.js';
import { compareWithE6, contiguousRuns } from '../../src/sync/audit/compare.js';
import { auditSource } from '../../src/sync/audit/source.js';
import { auditClean } from '../helpers/audit.js';
import type { E6Pages } from '../../src/sync/store/ports.js';
import type { Window } from '../../src/sync/windows.js';
import type { AnalyticsPage, PageQuery } from '../../src/upstream/analytics.js';
import { FakeE6, record, type FakeRecord } from '../helpers/fake-e6.js';
import { MemoryStore } from '../helpers/memory-store.js';

const HOUR = 3_600_000;
const T0 = Date.parse('2025-11-01T00:00:00Z');
const YEAR = 8760;
/** ⌈log2 8,760⌉. */
const DEPTH = Math.ceil(Math.log2(YEAR));

/** Two records in each of `n` hourly windows from T0 (at :10 and :40), ids from 1. */
function hourly(n: number): FakeRecord[] {
  const out: FakeRecord[] = [];
  for (let h = 0; h < n; h++) out.push(record(2 * h + 1, T0 + h * HOUR + 10 * 60_000), record(2 * h + 2, T0 + h * HOUR + 40 * 60_000));
  return out;
}

/** The window [start, end) a record at `ms` belongs to as the sync stores it: one at a window's end is that window's. */
function ownerOf(ms: number): Window {
  const start = ms - T0 === 0 ? T0 : T0 + Math.ceil((ms - T0) / HOUR - 1) * HOUR;
  return { start, end: start + HOUR };
}

/** A store holding `n` hourly windows from T0 and `data` in them, as a sync leaves them. */
function seeded(n: number, data: readonly FakeRecord[]): MemoryStore {
  const store = new MemoryStore();
  const held = new Map<number, number>();
  for (const r of data) {
    const window = ownerOf(Date.parse(r.timestamp));
    store.records.push({ payload: r, eventTime: Date.parse(r.timestamp), window, runId: 1 });
    held.set(window.start, (held.get(window.start) ?? 0) + 1);
  }
  // As a sync leaves them: each window's count from E6 (totalRecords) is what it stored.
  for (let h = 0; h < n; h++) {
    const start = T0 + h * HOUR;
    const count = held.get(start) ?? 0;
    store.ledger.push({ start, end: start + HOUR, recordCount: count, totalRecords: count, pages: 1, runId: 1, expired: false });
  }
  store.watermark = T0 + n * HOUR;
  return store;
}

/**
 * E6 for a year of counts: only `totalRecords` of [startDate, toDate] (inclusive, as FakeE6),
 * by binary search over the sorted record times, so 8,760 windows stay quick. FakeE6 answers the
 * same counts (the smaller tests use it).
 */
class CountingE6 implements E6Pages {
  requests = 0;
  readonly #times: number[];
  constructor(records: readonly FakeRecord[]) {
    this.#times = records.map((r) => Date.parse(r.timestamp)).sort((a, b) => a - b);
  }
  async fetchPage(query: PageQuery): Promise<AnalyticsPage> {
    this.requests++;
    const count = this.#below(query.toDate!.getTime() + 1) - this.#below(query.startDate.getTime());
    return { pageNumber: 1, pageSize: 1, totalRecords: count, totalPages: count, data: [] };
  }
  /** Records before `ms`. */
  #below(ms: number): number {
    let lo = 0;
    let hi = this.#times.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.#times[mid]! < ms) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }
}

const windowsOf = (store: MemoryStore) => store.session((s) => s.ledger.auditWindows({ start: 0, end: 8.64e15 }));

afterEach(() => {
  vi.useRealTimers();
});

describe('the audit compares the stored windows with E6 by counts, bisecting only what differs', () => {
  it('a year of hourly windows with no drift: accepted in its 14 segments, 14 requests (budget 20)', async () => {
    const data = hourly(YEAR);
    const e6 = new CountingE6(data);
    const result = await compareWithE6(e6, await windowsOf(seeded(YEAR, data)));
    // No window before the first: the records at its start are its own, so no count of that instant.
    expect(result).toEqual({ windows: YEAR, drifted: [], requests: 14 });
    expect(e6.requests).toBe(14);
    expect(e6.requests).toBeLessThanOrEqual(20);
  });

  it.each([1, 3, 10, 40])('%i drifted windows of a year: each found, stored and E6 counts named, within 1 + 2·k·⌈log2 8,760⌉ requests', async (k) => {
    const data = hourly(YEAR);
    const store = seeded(YEAR, data);
    // Spread over the year: up to 10, alternately a late arrival upstream and a record deleted
    // upstream (each in a segment of its own, of the 14); 40, late arrivals (an arrival and a deletion in one
    // segment would cancel out: see the next test).
    const hours = Array.from({ length: k }, (_, i) => Math.floor(((i + 0.5) * YEAR) / k));
    const arrival = (i: number) => k > 10 || i % 2 === 0;
    const upstream = [...data];
    hours.forEach((h, i) => {
      if (arrival(i)) upstream.push(record(1e6 + i, T0 + h * HOUR + 20 * 60_000));
      else
        upstream.splice(
          upstream.findIndex((r) => r.id === 2 * h + 1),
          1,
        );
    });
    const e6 = new CountingE6(upstream);
    const result = await compareWithE6(e6, await windowsOf(store));
    expect(result.drifted).toEqual(hours.map((h, i) => ({ start: T0 + h * HOUR, end: T0 + (h + 1) * HOUR, stored: 2, upstream: arrival(i) ? 3 : 1 })));
    expect(result.requests).toBe(e6.requests);
    expect(e6.requests).toBeLessThanOrEqual(1 + 2 * k * DEPTH);
  });

  it("a record exactly at a window's end belongs to that window (at the origin, to the first): no drift when stored there, both windows named when stored in the next", async () => {
    // 9000 sits at the origin: no window before the first, so the first window keeps it.
    const data = [...hourly(48), record(9000, T0), record(9001, T0 + 5 * HOUR), record(9002, T0 + 5 * HOUR), record(9003, T0 + 32 * HOUR)];
    const e6 = new FakeE6(data);
    expect((await compareWithE6(e6, await windowsOf(seeded(48, data)))).drifted).toEqual([]);
    // The ownership of a sync that gives the instant to the later window: the audit disagrees.
    const store = seeded(48, data);
    for (const r of store.records) if ((r.payload as FakeRecord).id === 9003) r.window = { start: T0 + 32 * HOUR, end: T0 + 33 * HOUR };
    expect((await compareWithE6(new FakeE6(data), await windowsOf(store))).drifted).toEqual([
      { start: T0 + 31 * HOUR, end: T0 + 32 * HOUR, stored: 2, upstream: 3 },
      { start: T0 + 32 * HOUR, end: T0 + 33 * HOUR, stored: 3, upstream: 2 },
    ]);
  });

  it('expired windows are not audited; windows apart from each other are compared as separate runs, records between them never counted', async () => {
    const data = hourly(30);
    const store = seeded(30, data);
    // Hours 10..19 were never loaded (a gap), hour 2 expired (RETENTION dropped its records).
    store.ledger = store.ledger.filter((w) => w.start < T0 + 10 * HOUR || w.start >= T0 + 20 * HOUR);
    store.records = store.records.filter((r) => r.window.start < T0 + 10 * HOUR || r.window.start >= T0 + 20 * HOUR);
    store.ledger[2]!.expired = true;
    store.records = store.records.filter((r) => r.window.start !== T0 + 2 * HOUR);
    const windows = await windowsOf(store);
    expect(windows).toHaveLength(19);
    expect(contiguousRuns(windows).map((run) => run.length)).toEqual([2, 7, 10]);
    const e6 = new FakeE6(data);
    // 19 windows: 5 segments, shared by the runs by length (1, 2 and 3); the second run follows the
    // expired window, so its origin's instant is counted too: 1 + (1 + 2) + 3.
    expect(await compareWithE6(e6, windows)).toEqual({ windows: 19, drifted: [], requests: 7 });
  });

  it("the records at a window's start are the window's before it whenever the ledger has one, expired or not", async () => {
    const data = [...hourly(10), record(9000, T0 + 3 * HOUR)];
    const store = seeded(10, data);
    // Windows 0..2 expired: 3..9 are audited, and the record at 03:00 belongs to expired window 2.
    for (const w of store.ledger) if (w.start < T0 + 3 * HOUR) w.expired = true;
    store.records = store.records.filter((r) => r.window.start >= T0 + 3 * HOUR);
    const e6 = new FakeE6(data);
    const windows = await windowsOf(store);
    expect(windows[0]).toMatchObject({ start: T0 + 3 * HOUR, followsLedger: true });
    expect((await compareWithE6(e6, windows)).drifted).toEqual([]);
    // Stored in window 3 instead (as if window 2 had not been loaded when 3 was): window 3 holds one too many.
    store.records.push({ payload: data[data.length - 1], eventTime: T0 + 3 * HOUR, window: { start: T0 + 3 * HOUR, end: T0 + 4 * HOUR }, runId: 1 });
    expect((await compareWithE6(e6, await windowsOf(store))).drifted).toEqual([{ start: T0 + 3 * HOUR, end: T0 + 4 * HOUR, stored: 3, upstream: 2 }]);
  });

  it('known limit: an arrival and a deletion in one segment cancel out, and the segment is accepted', async () => {
    const data = hourly(YEAR);
    const upstream = [...data, record(1e6, T0 + 3 * HOUR + 60_000)].filter((r) => r.id !== 2 * 7 + 1);
    expect((await compareWithE6(new CountingE6(upstream), await windowsOf(seeded(YEAR, data)))).drifted).toEqual([]);
  });

  it('counts with pageSize 1 and toDate, one request per count', async () => {
    const data = hourly(4);
    const asked: unknown[] = [];
    const e6 = new FakeE6(data);
    const spy = { fetchPage: (q: Parameters<FakeE6['fetchPage']>[0]) => (asked.push(q), e6.fetchPage(q)) };
    await compareWithE6(spy, await windowsOf(seeded(4, data)));
    // F at each segment's end (4 windows: 2 segments of 2); no window before the first, so no count of its instant.
    expect(asked).toEqual([2, 4].map((h) => ({ startDate: new Date(T0), toDate: new Date(T0 + h * HOUR), pageNumber: 1, pageSize: 1 })));
  });
});

describe('auditSource: compare under the lock, then repair through sync runs', () => {
  const settings = (env: Record<string, string> = {}) => {
    const config = loadConfig({ SYNC_PAGE_SIZE: '10', SYNC_MIN_SPLIT: '1s', SYNC_WINDOW: '1h', ...env });
    return { config: config.sources[0]!.sync, tables: config.tables };
  };
  const NOW = T0 + 60 * HOUR;

  /** Moves the fake clock on a second at a time until `promise` settles. */
  async function onFakeTimers<T>(promise: Promise<T>): Promise<T> {
    let settled = false;
    void promise.finally(() => (settled = true)).catch(() => undefined);
    while (!settled) await vi.advanceTimersByTimeAsync(1000);
    return promise;
  }

  it('a late arrival and a deletion: found without --repair (left), loaded again with it (nothing left), the store then equal to E6', async () => {
    vi.useFakeTimers({ now: NOW });
    const data = hourly(48);
    const store = seeded(48, data);
    const late = record(5000, T0 + 7 * HOUR + 5 * 60_000);
    const e6 = new FakeE6([...data, late].filter((r) => r.id !== 2 * 30 + 2));
    // The first E6 request fails as a 503 would: the client's retry (on the fake timers) carries the audit on.
    e6.failNext = 1;
    const deps = { store, client: e6, ...settings({ SYNC_SHRINK: 'replace' }), schema: 'unit', log: silentLogger };
    const found = await onFakeTimers(auditSource(deps, { repair: false, now: () => NOW }));
    expect(found.drifted.map((w) => [w.start, w.stored, w.upstream])).toEqual([
      [T0 + 7 * HOUR, 2, 3],
      [T0 + 30 * HOUR, 2, 1],
    ]);
    expect(found.left).toEqual(found.drifted);
    expect(auditClean(found)).toBe(false);
    expect(found.verifiedThrough).toBe(T0 + 7 * HOUR);
    expect(store.commits).toEqual([]);

    const repaired = await onFakeTimers(auditSource(deps, { repair: true, now: () => NOW }));
    expect(repaired.left).toEqual([]);
    expect(auditClean(repaired)).toBe(true);
    expect(repaired.verifiedThrough).toBe(T0 + 48 * HOUR);
    // One sync run per window that differed, loading that window only.
    expect(repaired.repairs.map((r) => r.status)).toEqual(['succeeded', 'succeeded']);
    expect(store.commits).toEqual([
      { start: T0 + 7 * HOUR, end: T0 + 8 * HOUR },
      { start: T0 + 30 * HOUR, end: T0 + 31 * HOUR },
    ]);
    const ids = store.records.map((r) => (r.payload as FakeRecord).id).sort((a, b) => a - b);
    expect(ids).toEqual(e6.records.map((r) => r.id).sort((a, b) => a - b));
    // And a third audit finds nothing.
    const again = await onFakeTimers(auditSource(deps, { repair: false }));
    expect(again.drifted).toEqual([]);
  });

  it('a repair run that fails leaves its windows differing (and the verified history ends before them); a stopped audit repairs nothing', async () => {
    const data = hourly(48);
    const e6 = new FakeE6([...data, record(5000, T0 + 7 * HOUR + 60_000), record(5001, T0 + 40 * HOUR + 60_000)]);
    // The counts (pageSize 1) are answered; the repair's reads of the windows fail as a 400 would (no retry).
    const client: E6Pages = {
      fetchPage: (q, o) => (q.pageSize === 1 ? e6.fetchPage(q, o) : Promise.reject(new UpstreamHttpError('analytics', 400, 'fake E6: HTTP 400'))),
    };
    const store = seeded(48, data);
    const deps = { store, client, ...settings(), schema: 'unit', log: silentLogger };
    const result = await auditSource(deps, { repair: true, now: () => NOW });
    expect(result.drifted.map((w) => w.start)).toEqual([T0 + 7 * HOUR, T0 + 40 * HOUR]);
    expect(result.repairs.map((r) => r.status)).toEqual(['failed', 'failed']);
    expect(result.left).toEqual(result.drifted);
    expect(auditClean(result)).toBe(false);
    expect(result.verifiedThrough).toBe(T0 + 7 * HOUR);
    expect(store.commits).toEqual([]);

    const stop = new AbortController();
    stop.abort();
    const e6Only = { ...deps, client: e6 };
    const stopped = await auditSource(e6Only, { repair: true, signal: stop.signal });
    expect(stopped.left).toEqual(stopped.drifted);
    expect(stopped.left).toHaveLength(2);
    expect(store.commits).toEqual([]);
  });

  it('an audit stopped during a repair run counts the windows that run committed as repaired, and leaves only the rest', async () => {
    vi.useFakeTimers({ now: NOW });
    const data = hourly(48);
    const store = seeded(48, data);
    // Hours 7 to 10 each gained a record: one stretch, so one repair run over four windows.
    const late = [7, 8, 9, 10].map((h) => record(5000 + h, T0 + h * HOUR + 20 * 60_000));
    const stop = new AbortController();
    // The signal comes as the repair's first window commits (Ctrl-C during the audit's repairs).
    const observer = { windowCommitted: () => stop.abort() };
    const deps = { store, client: new FakeE6([...data, ...late]), ...settings({ SYNC_SHRINK: 'replace' }), schema: 'unit', log: silentLogger, observer };
    const result = await onFakeTimers(auditSource(deps, { repair: true, signal: stop.signal, now: () => NOW }));
    expect(result.drifted.map((w) => w.start)).toEqual([7, 8, 9, 10].map((h) => T0 + h * HOUR));
    expect(result.repairs.map((r) => r.status)).toEqual(['interrupted']);
    expect(store.commits.length).toBeGreaterThan(0);
    expect(store.commits.length).toBeLessThan(4);
    // Left: the drifted windows the stopped run did not commit, no more.
    const committed = new Set(store.commits.map((w) => w.start));
    expect(result.left.map((w) => w.start)).toEqual(result.drifted.map((w) => w.start).filter((start) => !committed.has(start)));
    expect(auditClean(result)).toBe(false);
    // The next audit finds exactly those still differing.
    const again = await onFakeTimers(auditSource({ ...deps, observer: {} }, { repair: false, now: () => NOW }));
    expect(again.drifted.map((w) => w.start)).toEqual(result.left.map((w) => w.start));
  });

  it("under SYNC_SHRINK=keep, a record deleted upstream is drift once: the repair keeps it and records E6's count, and the next audit finds nothing", async () => {
    vi.useFakeTimers({ now: NOW });
    const data = hourly(48);
    const store = seeded(48, data);
    const deleted = data[30]!;
    const deps = { store, client: new FakeE6(data.filter((r) => r !== deleted)), ...settings({ SYNC_SHRINK: 'keep' }), schema: 'unit', log: silentLogger };
    const first = await onFakeTimers(auditSource(deps, { repair: true, now: () => NOW }));
    expect(first.drifted).toHaveLength(1);
    expect(first.left).toEqual([]);
    // Kept (SYNC_SHRINK=keep), and no longer drift: E6's count now is the ledger's.
    expect(store.records.filter((r) => r.payload === deleted || (r.payload as FakeRecord).id === deleted.id)).toHaveLength(1);
    expect((await onFakeTimers(auditSource(deps, { repair: false }))).drifted).toEqual([]);
    // Under replace the same window is what differs (it holds one more than E6), until repaired.
    const replace = { ...deps, ...settings({ SYNC_SHRINK: 'replace' }) };
    expect((await onFakeTimers(auditSource(replace, { repair: false }))).drifted).toHaveLength(1);
  });

  it('a parked window is loaded again by every audit with repair, even when its counts agree; without repair it is left', async () => {
    vi.useFakeTimers({ now: NOW });
    const data = hourly(48);
    const store = seeded(48, data);
    // Hour 12 parked with its records (a load before it was parked), hour 20 parked with none.
    for (const w of store.ledger) if (w.start === T0 + 12 * HOUR || w.start === T0 + 20 * HOUR) w.parked = { reason: 'over UPSTREAM_MAX_BODY', at: NOW };
    store.records = store.records.filter((r) => r.window.start !== T0 + 20 * HOUR);
    // As parking leaves a window it never loaded: no records, no count from E6.
    for (const w of store.ledger) if (w.start === T0 + 20 * HOUR) Object.assign(w, { recordCount: 0, totalRecords: 0 });
    const deps = { store, client: new FakeE6(data), ...settings(), schema: 'unit', log: silentLogger };
    const found = await onFakeTimers(auditSource(deps, { repair: false }));
    expect(found.drifted).toEqual([
      { start: T0 + 12 * HOUR, end: T0 + 13 * HOUR, stored: 2, upstream: undefined },
      { start: T0 + 20 * HOUR, end: T0 + 21 * HOUR, stored: 0, upstream: 2 },
    ]);
    expect(found.left).toEqual(found.drifted);
    const repaired = await onFakeTimers(auditSource(deps, { repair: true, now: () => NOW }));
    expect(repaired.left).toEqual([]);
    expect(store.commits).toEqual([
      { start: T0 + 12 * HOUR, end: T0 + 13 * HOUR },
      { start: T0 + 20 * HOUR, end: T0 + 21 * HOUR },
    ]);
    expect(store.ledger.filter((w) => w.parked !== undefined)).toEqual([]);
    expect((await onFakeTimers(auditSource(deps, { repair: false }))).drifted).toEqual([]);
  });

  it('a repair run that parks the window again leaves it differing', async () => {
    vi.useFakeTimers({ now: NOW });
    const data = hourly(48);
    const e6 = new FakeE6([...data, record(5000, T0 + 7 * HOUR + 60_000)]);
    // The counts are answered; every read of a window contradicts its own envelope (more records than its totalRecords).
    const client: E6Pages = {
      fetchPage: async (q, o) => {
        const page = await e6.fetchPage(q, o);
        if (q.pageSize === 1 || page.data.length === 0) return page;
        const text = JSON.stringify({ ...page, data: [...page.data, page.data[0]], text: undefined, bytes: undefined });
        return { ...page, data: [...page.data, page.data[0]!], text, bytes: Buffer.from(text) };
      },
    };
    const store = seeded(48, data);
    const result = await onFakeTimers(auditSource({ store, client, ...settings(), schema: 'unit', log: silentLogger }, { repair: true, now: () => NOW }));
    expect(result.drifted.map((w) => w.start)).toEqual([T0 + 7 * HOUR]);
    expect(result.repairs).toMatchObject([{ status: 'succeeded', parked: 1 }]);
    expect(result.left.map((w) => w.start)).toEqual([T0 + 7 * HOUR]);
    expect(store.ledger.filter((w) => w.parked !== undefined).map((w) => w.start)).toEqual([T0 + 7 * HOUR]);
  });

  it('--from/--to audit only the windows overlapping the range', async () => {
    const data = hourly(48);
    const e6 = new FakeE6([...data, record(5000, T0 + 7 * HOUR + 60_000), record(5001, T0 + 40 * HOUR + 60_000)]);
    const deps = { store: seeded(48, data), client: e6, ...settings(), schema: 'unit', log: silentLogger };
    const result = await auditSource(deps, { repair: false, from: new Date(T0 + 30 * HOUR + 1000), to: new Date(T0 + 45 * HOUR) });
    expect(result.windows).toBe(15);
    expect(result.drifted.map((w) => w.start)).toEqual([T0 + 40 * HOUR]);
  });

  it.each([
    ['a sync run of the source', 'sync:unit:default'],
    ['RETENTION or a rollup rebuild (the schema lock, exclusive)', 'sync:unit'],
  ])('waits for %s before comparing', async (_holder, lockName) => {
    vi.useFakeTimers({ now: NOW });
    const data = hourly(4);
    const store = seeded(4, data);
    const deps = { store, client: new FakeE6(data), ...settings(), schema: 'unit', log: silentLogger };
    let release!: () => void;
    const holding = store.session((s) => s.lock(lockName, { wait: false }, () => new Promise<void>((r) => (release = r))));
    let done = false;
    const audit = auditSource(deps, { repair: false }).finally(() => (done = true));
    await vi.advanceTimersByTimeAsync(5000);
    expect(done).toBe(false);
    release();
    await holding;
    const result = await onFakeTimers(audit);
    expect(result.drifted).toEqual([]);
  });
});
