/**
 * A run's `sync progress` lines (src/sync/run/progress-log.ts): their cadence on a clock the test
 * moves, their fields, and a whole run's log shape at info (start, progress, summary; no line per
 * window) against the in-memory store.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/log.js';
import { PROGRESS_INTERVAL_MS, ProgressLog } from '../../src/sync/run/progress-log.js';
import { runSync, type SyncObserver } from '../../src/sync/run/run.js';
import { FakeE6, record } from '../helpers/fake-e6.js';
import { captureLog } from '../helpers/log-capture.js';
import { MemoryStore } from '../helpers/memory-store.js';

afterEach(() => {
  vi.restoreAllMocks();
});

describe('ProgressLog', () => {
  it('logs nothing in the first 10 s, then at most one line per 10 s, never at the last window', () => {
    const log = captureLog();
    let now = 0;
    const progress = new ProgressLog(createLogger('info', { format: 'json', destination: log }), { runId: 7, windowsPlanned: 40 }, { now: () => now });
    // A window a second, 100 records each.
    const logged: number[] = [];
    for (let w = 1; w <= 40; w++) {
      now = w * 1000;
      if (progress.windowDone(100) !== undefined) logged.push(w);
    }
    expect(logged).toEqual([10, 20, 30]);
    const lines = log.lines();
    expect(lines.map((l) => [l.level, l.msg])).toEqual([
      ['info', 'sync progress'],
      ['info', 'sync progress'],
      ['info', 'sync progress'],
    ]);
    expect(lines[0]).toMatchObject({ runId: 7, windows: 10, windowsPlanned: 40, records: 1000, recordsPerSecond: 100, etaSeconds: 30 });
    expect(lines[2]).toMatchObject({ windows: 30, records: 3000, etaSeconds: 10 });
  });

  it('counts from the last line, not from a grid: a slow window then fast ones give one line per 10 s', () => {
    let now = 0;
    const progress = new ProgressLog(createLogger('silent'), { runId: 1, windowsPlanned: 100 }, { now: () => now });
    now = 25_000;
    expect(progress.windowDone(5)).toMatchObject({ windows: 1, records: 5, recordsPerSecond: 0, etaSeconds: 2475 });
    now = 25_000 + PROGRESS_INTERVAL_MS - 1;
    expect(progress.windowDone(5)).toBeUndefined();
    now = 25_000 + PROGRESS_INTERVAL_MS;
    expect(progress.windowDone(5)).toMatchObject({ windows: 3, records: 15 });
  });

  it('a run of one window logs no progress however long it takes', () => {
    let now = 0;
    const progress = new ProgressLog(createLogger('silent'), { runId: 1, windowsPlanned: 1 }, { now: () => now });
    now = 60_000;
    expect(progress.windowDone(5)).toBeUndefined();
  });
});

describe("a run's log at info", () => {
  const HOUR = 3_600_000;
  const T0 = Date.parse('2026-11-01T00:00:00Z');
  const data = Array.from({ length: 30 }, (_, i) => record(i + 1, T0 + i * 6 * 60_000));

  async function logOf(level: 'info' | 'debug', observer?: SyncObserver): Promise<Record<string, unknown>[]> {
    // Each reading of the monotonic clock 6 s after the last: the run "lasts" long enough for progress lines.
    let clock = 0;
    vi.spyOn(performance, 'now').mockImplementation(() => (clock += 6000));
    const config = loadConfig({ SYNC_PAGE_SIZE: '10', SYNC_MIN_SPLIT: '1s' });
    const log = captureLog();
    await runSync(
      {
        store: new MemoryStore(),
        client: new FakeE6(data),
        config: config.sources[0]!.sync,
        tables: config.tables,
        schema: 'unit',
        log: createLogger(level, { format: 'json', destination: log }),
        ...(observer ? { observer } : {}),
      },
      { from: new Date(T0), to: new Date(T0 + 3 * HOUR), now: () => T0 + 10 * HOUR },
    );
    return log.lines();
  }

  it('is a start line, progress lines, and the summary: no line per window', async () => {
    const lines = await logOf('info');
    const messages = lines.map((l) => l.msg);
    expect(messages[0]).toBe('sync run started');
    expect(messages.at(-1)).toBe('sync run succeeded');
    expect(messages).not.toContain('window committed');
    const progress = lines.filter((l) => l.msg === 'sync progress');
    expect(progress.length).toBeGreaterThanOrEqual(1);
    expect(progress[0]).toMatchObject({ level: 'info', windowsPlanned: 3 });
    expect(progress[0]!.windows).toBeLessThan(3);
  });

  it('has the per-window lines at debug', async () => {
    const lines = await logOf('debug');
    expect(lines.filter((l) => l.msg === 'window committed').map((l) => l.level)).toEqual(['debug', 'debug', 'debug']);
  });

  it('under a progress bar has no progress lines, and the success line at debug', async () => {
    const lines = await logOf('info', { showsProgress: true });
    expect(lines.map((l) => l.msg)).toEqual(['sync run started']);
  });
});
