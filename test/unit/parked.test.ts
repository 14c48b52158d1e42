/**
 * A window that cannot be loaded never stalls its source (src/sync/read/oversize.ts, src/sync/run/park.ts),
 * against the in-memory store and a fake E6 with a body cap: a slice over UPSTREAM_MAX_BODY is split
 * in time and an instant read at smaller pages; a window that still fails for a reason of its own
 * (its size, E6 contradicting itself about it) is parked (kept in the ledger with its reason, the watermark passes
 * it, the run goes on, the gauge and a warning say so) and loaded by a later run over it; an outage
 * still fails the run.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  InconsistentWindowError,
  PagingLimitError,
  ResponseTooLargeError,
  TokenRequestError,
  TokenResponseError,
  UpstreamBodyError,
  UpstreamHttpError,
  UpstreamNetworkError,
  UpstreamTimeoutError,
  WindowBudgetError,
} from '../../src/errors.js';
import { ExporterMetrics } from '../../src/metrics/registry.js';
import { isWindowFault } from '../../src/sync/run/park.js';
import { smallerPageSizes } from '../../src/sync/read/oversize.js';
import type { SyncObserver, SyncOptions, SyncResult } from '../../src/sync/run/run.js';
import type { ParkedEvent, WindowSummary } from '../../src/sync/run/summary.js';
import { FakeE6, record, type FakeRecord } from '../helpers/fake-e6.js';
import { MemoryStore } from '../helpers/memory-store.js';
import { captureLog } from '../helpers/log-capture.js';
import { runUnitSync } from '../helpers/unit-sync.js';

const HOUR = 3_600_000;
const MINUTE = 60_000;
const T0 = Date.parse('2026-11-01T00:00:00Z');
const FROM = new Date(T0);
const TO = new Date(T0 + 3 * HOUR);
const NOW = T0 + 10 * HOUR;
/** The second window, which the tests make too large or faulty. */
const SECOND = { start: T0 + HOUR, end: T0 + 2 * HOUR };

/** `n` records every `step` ms from `start`, ids from `firstId`, each padded with `pad` characters. */
function records(start: number, n: number, step: number, firstId = 1, pad = 0): FakeRecord[] {
  return Array.from({ length: n }, (_, i) => record(firstId + i, start + i * step, pad > 0 ? { pad: 'x'.repeat(pad) } : {}));
}

const ids = (rs: readonly { id: number }[]): number[] => rs.map((r) => r.id).sort((a, b) => a - b);
const storedIds = (store: MemoryStore): number[] => ids(store.records.map((r) => r.payload as FakeRecord));
const before = (ms: number) => (r: FakeRecord) => Date.parse(r.timestamp) < ms;
// A record exactly at a cut belongs to the earlier window (the fake E6's toDate is inclusive: src/sync/membership/boundary.ts), so a window holds (start, end].
const inside = (w: { start: number; end: number }) => (r: FakeRecord) => Date.parse(r.timestamp) > w.start && Date.parse(r.timestamp) <= w.end;

function harness(data: readonly FakeRecord[]) {
  const store = new MemoryStore();
  const e6 = new FakeE6(data);
  const metrics = new ExporterMetrics({ processMetrics: false });
  const gauge = metrics.syncObserver('default');
  const parked: ParkedEvent[] = [];
  const committed: WindowSummary[] = [];
  const log = captureLog();
  const run = async (options: SyncOptions = {}, env: Record<string, string> = {}): Promise<Exclude<SyncResult, { status: 'locked' }>> => {
    const observer: SyncObserver = {
      ...gauge,
      windowParked: (e) => parked.push(e),
      windowCommitted: (w) => (committed.push(w), gauge.windowCommitted?.(w)),
    };
    return runUnitSync({ store, client: e6, log, level: 'info', observer }, { SYNC_MIN_SPLIT: '1s', ...env }, { now: () => NOW, ...options });
  };
  const parkedGauge = async (): Promise<number | undefined> =>
    (await metrics.registry.getSingleMetric('analytics_exporter_sync_windows_parked')!.get()).values.find((v) => v.labels.source === 'default')?.value;
  return { store, e6, parked, committed, log, run, parkedGauge };
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

describe('slices over UPSTREAM_MAX_BODY', () => {
  it('halves the page size down to one record', () => {
    expect(smallerPageSizes(1000)).toEqual([500, 250, 125, 62, 31, 15, 7, 3, 1]);
    expect(smallerPageSizes(10)).toEqual([5, 2, 1]);
    expect(smallerPageSizes(1)).toEqual([]);
  });

  it('splits a slice over the cap in time and reads an instant at smaller pages: the window loads exactly', async () => {
    // 30 records two minutes apart, and 12 more at one instant, each about 300 bytes: a page of 10
    // (SYNC_PAGE_SIZE) is ~3 KB, the cap ~4 records.
    const spread = records(T0, 30, 2 * MINUTE, 1, 200);
    const bunched = records(T0 + 30 * MINUTE + 1000, 12, 0, 100, 200);
    const data = [...spread, ...bunched];
    const { store, e6, parked, committed, run } = harness(data);
    e6.maxBodyBytes = 1300;
    const result = await run({ from: FROM, to: new Date(T0 + HOUR) });
    expect(result).toMatchObject({ status: 'succeeded', windows: 1, parked: 0, parkedWindows: 0 });
    expect(parked).toEqual([]);
    expect(storedIds(store)).toEqual(ids(data));
    expect(committed[0]).toMatchObject({ records: 42 });
    expect(committed[0]!.splits).toBeGreaterThan(0);
    // The instant, 12 records, was read at pages of 2 (10 and 5 are over the cap): twice, compared.
    expect(committed[0]!.instants).toBeGreaterThan(0);
  });
});

describe('a window that cannot be loaded', () => {
  // Three hourly windows of 12 records; one record of the second is ~5 KB, over a 3 KB cap even alone.
  const data = records(T0, 36, 5 * MINUTE);
  const huge = record(1000, T0 + 90 * MINUTE + 7000, { pad: 'y'.repeat(5000) });

  it('is parked: the source moves on, the watermark passes it, a later run over it loads it', async () => {
    const { store, e6, parked, log, run, parkedGauge } = harness([...data, huge]);
    e6.maxBodyBytes = 3000;
    const first = await run({ from: FROM, to: TO });
    expect(first).toMatchObject({ status: 'succeeded', windowsPlanned: 3, windows: 2, parked: 1, parkedWindows: 1, watermark: TO.getTime() });
    expect(first.records).toBe(24);
    expect(storedIds(store)).toEqual(ids(data.filter((r) => !inside(SECOND)(r))));
    expect(store.watermark).toBe(TO.getTime());
    // Kept in the ledger with its reason, beside the committed windows.
    const row = store.ledger.find((w) => w.start === SECOND.start)!;
    expect(row).toMatchObject({
      end: SECOND.end,
      recordCount: 0,
      runId: 1,
      parked: { reason: expect.stringMatching(/over UPSTREAM_MAX_BODY even at one record a page/) },
    });
    expect(store.ledger.filter((w) => !w.parked).map((w) => w.start)).toEqual([T0, T0 + 2 * HOUR]);
    expect(parked).toEqual([{ window: SECOND, reason: 'response_too_large', error: expect.stringContaining('2026-11-01T01:30:07.000Z') }]);
    expect(await parkedGauge()).toBe(1);
    // Loud: a warning naming the window and the reason, and the run's summary at warn.
    const warned = log.lines().filter((l) => l.level === 'warn');
    const parkedLine = warned.find((l) => String(l.msg).startsWith('window parked'))!;
    expect(parkedLine).toMatchObject({ window: ['2026-11-01T01:00:00.000Z', '2026-11-01T02:00:00.000Z'], reason: 'response_too_large' });
    expect(String(parkedLine.msg)).toContain('sync --from 2026-11-01T01:00:00.000Z --to 2026-11-01T02:00:00.000Z');
    expect(warned.find((l) => String(l.msg).startsWith('sync run succeeded but parked 1 window'))).toBeDefined();
    expect(store.runs[0]).toMatchObject({ status: 'succeeded' });

    // A resumed run does not reach back to it (SYNC_LOOKBACK 1h): it stays parked and counted.
    const resumed = await run();
    expect(resumed).toMatchObject({ status: 'succeeded', parked: 0, parkedWindows: 1 });
    expect(await parkedGauge()).toBe(1);

    // Once the cap allows it, a run over it loads it and it becomes committed.
    e6.maxBodyBytes = Number.POSITIVE_INFINITY;
    const retried = await run({ from: new Date(SECOND.start), to: new Date(SECOND.end) });
    expect(retried).toMatchObject({ status: 'succeeded', windows: 1, records: 13, parked: 0, parkedWindows: 0 });
    const loaded = store.ledger.find((w) => w.start === SECOND.start)!;
    expect(loaded.recordCount).toBe(13);
    expect(loaded.parked).toBeUndefined();
    expect(storedIds(store)).toEqual(ids([...data, huge].filter(before(NOW))));
    expect(await parkedGauge()).toBe(0);
  });

  it('keeps what an earlier load stored for it while parked, and replaces it when loaded', async () => {
    const { store, e6, run } = harness(data);
    await run({ from: FROM, to: TO });
    e6.records = [...data, huge];
    e6.maxBodyBytes = 3000;
    const result = await run({ from: FROM, to: TO });
    expect(result).toMatchObject({ status: 'succeeded', windows: 2, parked: 1 });
    // Its twelve records of the first load stay, counted in its (now parked) ledger row.
    expect(storedIds(store)).toEqual(ids(data));
    expect(store.ledger.find((w) => w.start === SECOND.start)).toMatchObject({ recordCount: 12, parked: expect.anything() });
    e6.maxBodyBytes = Number.POSITIVE_INFINITY;
    await run({ from: FROM, to: TO });
    expect(storedIds(store)).toEqual(ids([...data, huge]));
    expect(store.ledger.every((w) => w.parked === undefined)).toBe(true);
  });

  it('is retried by the lookback while it is in range, and parked again while it still fails', async () => {
    const { store, e6, run } = harness([...data, huge]);
    e6.maxBodyBytes = 3000;
    await run({ from: FROM, to: new Date(SECOND.end) });
    expect(store.watermark).toBe(SECOND.end);
    // The next run starts at the watermark minus SYNC_LOOKBACK (1h): the parked window again.
    const next = await run({ to: TO });
    expect(next).toMatchObject({ status: 'succeeded', windowsPlanned: 2, windows: 1, parked: 1, parkedWindows: 1 });
    expect(store.ledger.filter((w) => w.parked).map((w) => [w.start, w.runId])).toEqual([[SECOND.start, 2]]);
  });

  it('is parked when E6 contradicts itself about it after SYNC_WINDOW_ATTEMPTS (InconsistentWindowError)', async () => {
    const { store, e6, parked, run } = harness(data);
    const error = new InconsistentWindowError('two reads of an instant disagreed');
    e6.fault = (query) => (query.startDate.getTime() >= SECOND.start && query.startDate.getTime() < SECOND.end ? error : undefined);
    const result = await run({ from: FROM, to: TO }, { SYNC_CONCURRENCY: '1' });
    expect(result).toMatchObject({ status: 'succeeded', windows: 2, parked: 1, watermark: TO.getTime() });
    expect(parked).toEqual([{ window: SECOND, reason: 'inconsistent_window', error: 'two reads of an instant disagreed (ERR_INCONSISTENT_WINDOW)' }]);
    expect(storedIds(store)).toEqual(ids(data.filter((r) => !inside(SECOND)(r))));
  });
});

describe('an outage', () => {
  const data = records(T0, 36, 5 * MINUTE);

  it.each([
    ['a network fault', new UpstreamNetworkError('analytics', 'E6: ECONNRESET', { retryable: true })],
    ['HTTP 503', new UpstreamHttpError('analytics', 503, 'E6: HTTP 503', { retryable: true })],
    ['a timeout', new UpstreamTimeoutError('analytics', 'E6: timed out', { retryable: true })],
    ['no token', new TokenRequestError('E0: HTTP 503')],
    ['an HTML error page', new UpstreamBodyError('analytics', 'content_type', 'E6: text/html', { retryable: true })],
    // Body faults of one response: retried by the client, and as likely the service or a proxy as the window.
    ['invalid page JSON', new UpstreamBodyError('analytics', 'invalid_json', 'E6: body is not valid JSON', { retryable: true })],
    ['an invalid envelope', new UpstreamBodyError('analytics', 'invalid_envelope', 'E6: totalRecords missing', { retryable: true })],
    ['a page contradicting itself', new UpstreamBodyError('analytics', 'inconsistent_page', 'E6: page 2 of 1', { retryable: true })],
  ])('still fails the run (%s): nothing is parked, the watermark stays before the window', async (_name, error) => {
    vi.useFakeTimers();
    const { store, e6, parked, run } = harness(data);
    e6.fault = (query) => (query.startDate.getTime() >= SECOND.start && query.startDate.getTime() < SECOND.end ? error : undefined);
    const result = await onFakeTimers(run({ from: FROM, to: TO }, { SYNC_CONCURRENCY: '1' }));
    expect(result).toMatchObject({ status: 'failed', windows: 1, parked: 0, parkedWindows: 0 });
    expect(result.error).toBe(error);
    expect(parked).toEqual([]);
    expect(store.ledger.map((w) => [w.start, w.parked])).toEqual([[T0, undefined]]);
    expect(store.watermark).toBe(SECOND.start);
  });

  it('tells window faults from outages', () => {
    expect(isWindowFault(new ResponseTooLargeError('analytics', 'x'))).toBe(true);
    expect(isWindowFault(new InconsistentWindowError('x'))).toBe(true);
    expect(isWindowFault(new PagingLimitError('x'))).toBe(true);
    expect(isWindowFault(new WindowBudgetError('x'))).toBe(true);
    // An HTTP status is an outage, a deep page's refusal too until the reader concluded a paging limit.
    expect(isWindowFault(new UpstreamHttpError('analytics', 400, 'x'))).toBe(false);
    expect(isWindowFault(new UpstreamHttpError('analytics', 503, 'x'))).toBe(false);
    // E7 and E0 bodies are not a window's.
    expect(isWindowFault(new ResponseTooLargeError('prometheus', 'x'))).toBe(false);
    expect(isWindowFault(new TokenResponseError('x'))).toBe(false);
    expect(isWindowFault(new UpstreamBodyError('analytics', 'content_encoding', 'x'))).toBe(false);
    expect(isWindowFault(new UpstreamBodyError('analytics', 'invalid_json', 'x'))).toBe(false);
    expect(isWindowFault(new UpstreamBodyError('analytics', 'invalid_body', 'x'))).toBe(false);
    expect(isWindowFault(new Error('Connection terminated unexpectedly'))).toBe(false);
  });
});
