/**
 * The pure parts of the `state` commands (src/sync/store/pg/ledger-state.ts, src/app/state.ts, src/commands/state.ts):
 * the first stretch a forward watermark would skip, the union of planned and marked windows, the
 * JSON shape and text of `state show`, the usage rules naming their flags; and, against the
 * in-memory store and a fake E6, that a resumed run loads the windows `state reset` marked wherever
 * they lie, and only a resumed run. The SQL is test/integration/state-cli.test.ts's to prove.
 */
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { silentLogger } from '../helpers/silent-logger.js';
import { formatStateText, stateJson } from '../../src/app/state.js';
import { resetOptions, setWatermarkOptions, showOptions } from '../../src/commands/state.js';
import { runSync, type SyncOptions, type SyncResult } from '../../src/sync/run/run.js';
import { firstUnloaded } from '../../src/sync/store/pg/ledger.js';
import type { SourceState } from '../../src/sync/store/ports.js';
import { unionWindows } from '../../src/sync/windows.js';
import { FakeE6, record, type FakeRecord } from '../helpers/fake-e6.js';
import { MemoryStore } from '../helpers/memory-store.js';

const HOUR = 3_600_000;
const T0 = Date.parse('2026-11-01T00:00:00Z');
const NOW = T0 + 10 * HOUR;

describe('firstUnloaded: what moving the watermark forward would skip', () => {
  const w = (from: number, to: number, loaded = true) => ({ start: T0 + from * HOUR, end: T0 + to * HOUR, loaded });
  const at = (from: number, to: number) => ({ start: T0 + from * HOUR, end: T0 + to * HOUR });

  it('is nothing when committed or expired windows cover the range', () => {
    expect(firstUnloaded(T0, T0 + 3 * HOUR, [w(0, 1), w(1, 2), w(2, 4)])).toBeUndefined();
    expect(firstUnloaded(T0 + HOUR / 2, T0 + HOUR, [w(0, 1)])).toBeUndefined();
  });

  it('is the first gap, or the first parked window, clipped to the range', () => {
    expect(firstUnloaded(T0, T0 + 3 * HOUR, [])).toEqual(at(0, 3));
    expect(firstUnloaded(T0, T0 + 3 * HOUR, [w(0, 1), w(2, 3)])).toEqual(at(1, 2));
    expect(firstUnloaded(T0, T0 + 3 * HOUR, [w(1, 2), w(0, 1)])).toEqual(at(2, 3));
    expect(firstUnloaded(T0, T0 + 3 * HOUR, [w(0, 1), w(1, 5, false)])).toEqual(at(1, 3));
    expect(firstUnloaded(T0 + HOUR, T0 + 3 * HOUR, [w(0, 2), w(3, 4)])).toEqual(at(2, 3));
  });
});

describe('unionWindows', () => {
  it('merges overlapping windows and keeps touching ones apart, in time order', () => {
    const a = [
      { start: 5, end: 8 },
      { start: 0, end: 2 },
    ];
    const b = [
      { start: 7, end: 9 },
      { start: 2, end: 3 },
    ];
    expect(unionWindows(a, b)).toEqual([
      { start: 0, end: 2 },
      { start: 2, end: 3 },
      { start: 5, end: 9 },
    ]);
    expect(unionWindows([], [])).toEqual([]);
  });
});

describe('a resumed run loads the windows state reset marked', () => {
  const data = (extra: FakeRecord[] = []): FakeRecord[] => [...Array.from({ length: 60 }, (_, i) => record(i + 1, T0 + i * 6 * 60_000 + 1000)), ...extra];
  function harness() {
    const store = new MemoryStore();
    const e6 = new FakeE6(data());
    const config = loadConfig({ SYNC_PAGE_SIZE: '10', SYNC_CONCURRENCY: '2', SYNC_MIN_SPLIT: '1s', SYNC_LOOKBACK: '0s' });
    const run = (options: SyncOptions = {}): Promise<SyncResult> =>
      runSync({ store, client: e6, config: config.sources[0]!.sync, tables: config.tables, schema: 'unit', log: silentLogger }, { now: () => NOW, ...options });
    return { store, e6, run };
  }
  const mark = (store: MemoryStore, starts: number[]) => {
    for (const row of store.ledger) if (starts.includes(row.start)) row.reloadRequested = true;
  };

  it('loads exactly the marked windows (before the lookback too), clears the marks, and leaves the watermark', async () => {
    const { store, e6, run } = harness();
    expect(await run({ from: new Date(T0), to: new Date(T0 + 6 * HOUR) })).toMatchObject({ status: 'succeeded', windows: 6 });
    expect(store.watermark).toBe(T0 + 6 * HOUR);
    // Late records in the second and third hours, which only a re-load of those windows stores.
    e6.records = data([record(1001, T0 + HOUR + 30_000), record(1002, T0 + 2 * HOUR + 30_000)]);
    mark(store, [T0 + HOUR, T0 + 2 * HOUR]);
    const commitsBefore = store.commits.length;

    expect(await run({ to: new Date(T0 + 6 * HOUR) })).toMatchObject({ status: 'succeeded', windows: 2 });
    expect(store.commits.slice(commitsBefore)).toEqual([
      { start: T0 + HOUR, end: T0 + 2 * HOUR },
      { start: T0 + 2 * HOUR, end: T0 + 3 * HOUR },
    ]);
    expect(store.ledger.filter((w) => w.reloadRequested === true)).toEqual([]);
    expect(store.records.map((r) => (r.payload as FakeRecord).id)).toEqual(expect.arrayContaining([1001, 1002]));
    expect(store.records).toHaveLength(62);
    expect(store.watermark).toBe(T0 + 6 * HOUR);
    // The run's row covers what it loaded.
    expect(store.runs.at(-1)!.range).toEqual({ start: T0 + HOUR, end: T0 + 6 * HOUR });

    // Nothing is marked any more: the next resumed run has nothing to load.
    expect(await run({ to: new Date(T0 + 6 * HOUR) })).toMatchObject({ status: 'succeeded', windows: 0 });
  });

  it('a resumed run with --to loads the marked windows that end by it, and leaves the later ones marked', async () => {
    const { store, run } = harness();
    await run({ from: new Date(T0), to: new Date(T0 + 6 * HOUR) });
    mark(store, [T0 + HOUR, T0 + 4 * HOUR]);
    const commitsBefore = store.commits.length;
    expect(await run({ to: new Date(T0 + 4 * HOUR + HOUR / 2) })).toMatchObject({ status: 'succeeded', windows: 1 });
    expect(store.commits.slice(commitsBefore)).toEqual([{ start: T0 + HOUR, end: T0 + 2 * HOUR }]);
    expect(store.ledger.filter((w) => w.reloadRequested === true).map((w) => w.start)).toEqual([T0 + 4 * HOUR]);
  });

  it('an explicit --from loads its range only, and leaves the marks for the next resumed run', async () => {
    const { store, run } = harness();
    await run({ from: new Date(T0), to: new Date(T0 + 6 * HOUR) });
    mark(store, [T0]);
    const commitsBefore = store.commits.length;
    expect(await run({ from: new Date(T0 + 4 * HOUR), to: new Date(T0 + 5 * HOUR) })).toMatchObject({ status: 'succeeded', windows: 1 });
    expect(store.commits.slice(commitsBefore)).toEqual([{ start: T0 + 4 * HOUR, end: T0 + 5 * HOUR }]);
    expect(store.ledger.find((w) => w.start === T0)?.reloadRequested).toBe(true);
  });
});

describe('state show: its JSON shape and its text', () => {
  const state: SourceState = {
    source: 'default',
    watermark: T0 + 6 * HOUR,
    lastRun: { id: 3, status: 'failed', startedAt: T0 + 7 * HOUR, finishedAt: T0 + 7 * HOUR + 5000, error: 'E6 answered 503' },
    windows: {
      committed: { count: 5, from: T0, to: T0 + 6 * HOUR, records: 1234 },
      parked: { count: 1, from: T0 + 2 * HOUR, to: T0 + 3 * HOUR },
      expired: { count: 0, from: undefined, to: undefined },
      reloadRequested: { count: 2, from: T0, to: T0 + 2 * HOUR },
    },
    verified: { through: T0 + 2 * HOUR, at: T0 + 8 * HOUR },
  };

  it('is stable: instants in ISO 8601 UTC, null when absent', () => {
    expect(stateJson([state])).toEqual({
      sources: [
        {
          source: 'default',
          watermark: '2026-11-01T06:00:00.000Z',
          lastRun: { id: 3, status: 'failed', startedAt: '2026-11-01T07:00:00.000Z', finishedAt: '2026-11-01T07:00:05.000Z', error: 'E6 answered 503' },
          windows: {
            committed: { count: 5, from: '2026-11-01T00:00:00.000Z', to: '2026-11-01T06:00:00.000Z', records: 1234 },
            parked: { count: 1, from: '2026-11-01T02:00:00.000Z', to: '2026-11-01T03:00:00.000Z' },
            expired: { count: 0, from: null, to: null },
            reloadRequested: { count: 2, from: '2026-11-01T00:00:00.000Z', to: '2026-11-01T02:00:00.000Z' },
          },
          verifiedThrough: '2026-11-01T02:00:00.000Z',
          verifiedAt: '2026-11-01T08:00:00.000Z',
        },
      ],
    });
    const never: SourceState = {
      ...state,
      watermark: undefined,
      lastRun: undefined,
      verified: { through: undefined, at: undefined },
    };
    expect(stateJson([never]).sources[0]).toMatchObject({ watermark: null, lastRun: null, verifiedThrough: null, verifiedAt: null });
  });

  it('prints one block a source, one line an item', () => {
    const text = formatStateText([state]);
    expect(text).toContain('source default\n');
    expect(text).toMatch(/^ {2}watermark +2026-11-01T06:00:00\.000Z$/m);
    expect(text).toMatch(/^ {2}last run +#3 failed, started 2026-11-01T07:00:00\.000Z, finished 2026-11-01T07:00:05\.000Z$/m);
    expect(text).toMatch(/^ {2}last error +E6 answered 503$/m);
    expect(text).toMatch(/^ {2}committed +5 windows in \[2026-11-01T00:00:00\.000Z, 2026-11-01T06:00:00\.000Z\), 1234 records$/m);
    expect(text).toMatch(/^ {2}parked +1 window in \[/m);
    expect(text).toMatch(/^ {2}expired +none$/m);
    expect(text).toMatch(/^ {2}marked for re-load +2 windows in \[/m);
    expect(text).toMatch(/^ {2}verified through +2026-11-01T02:00:00\.000Z \(audit of 2026-11-01T08:00:00\.000Z\)$/m);
  });
});

describe('state usage: each rule names its flag', () => {
  const messages = (result: { success: boolean; error?: { issues: { message: string }[] } }) => result.error?.issues.map((i) => i.message) ?? [];

  it('set-watermark needs --source and an ISO 8601 instant with a zone', () => {
    expect(messages(setWatermarkOptions.safeParse({ to: '2026-11-01T00:00:00Z' }))).toEqual(['--source NAME is required: the configured source to change']);
    expect(messages(setWatermarkOptions.safeParse({ source: 'default', to: '2026-11-01' }))[0]).toMatch(
      /^the argument <iso> \(the new watermark\) must be an ISO 8601/,
    );
    expect(setWatermarkOptions.parse({ source: 'default', to: '2026-11-01T01:00:00+01:00', force: true })).toEqual({
      source: 'default',
      to: new Date(T0),
      force: true,
    });
  });

  it('reset needs --source, --from and --to, --from before --to', () => {
    expect(messages(resetOptions.safeParse({ source: 'default', to: '2026-11-01T00:00:00Z' }))).toEqual(['--from is required']);
    expect(messages(resetOptions.safeParse({ source: 'default', from: 'yesterday', to: '2026-11-01T00:00:00Z' }))[0]).toMatch(/^--from must be an ISO 8601/);
    expect(messages(resetOptions.safeParse({ source: 'default', from: '2026-11-01T00:00:00Z', to: '2026-11-01T00:00:00Z' }))).toEqual([
      '--from 2026-11-01T00:00:00.000Z must be before --to 2026-11-01T00:00:00.000Z',
    ]);
    expect(showOptions.parse({ source: ['a', 'b'], json: true })).toEqual({ source: ['a', 'b'], json: true });
  });
});
