import { afterEach, describe, expect, it, vi } from 'vitest';
import { UpstreamHttpError } from '../../src/errors.js';
import { createLogger } from '../../src/log.js';
import { BarAwareStream, CLEAR_LINE, progressBar, type TerminalLike } from '../../src/commands/progress.js';
import { formatRunSummary } from '../../src/commands/format/sync.js';
import type { SyncResult } from '../../src/sync/run/run.js';

/** A terminal that records every write, in order; no TTY behind it. */
function fakeTerminal(columns = 100): TerminalLike & { writes: string[] } {
  const writes: string[] = [];
  return {
    isTTY: true,
    columns,
    writes,
    write(chunk: string, callback?: (err?: Error | null) => void) {
      writes.push(chunk);
      callback?.();
      return true;
    },
  };
}

describe('BarAwareStream', () => {
  it('passes writes through while no bar is shown', () => {
    const out = fakeTerminal();
    const stream = new BarAwareStream(out);
    stream.write('a line\n');
    expect(out.writes).toEqual(['a line\n']);
    expect(stream.isTTY).toBe(true);
    expect(new BarAwareStream({ write: () => true }).isTTY).toBe(false);
  });

  it('writes a log line above the bar: clear the bar line, the line, redraw the bar', () => {
    const out = fakeTerminal();
    const stream = new BarAwareStream(out);
    const redraw = vi.fn(() => out.write('[bar]'));
    stream.showBar(redraw);
    stream.write('first\n');
    stream.write('second without a newline');
    expect(out.writes).toEqual([`${CLEAR_LINE}first\n`, '[bar]', `${CLEAR_LINE}second without a newline\n`, '[bar]']);
    expect(redraw).toHaveBeenCalledTimes(2);

    stream.hideBar();
    stream.write('after\n');
    expect(out.writes.at(-1)).toBe('after\n');
    expect(redraw).toHaveBeenCalledTimes(2);
  });

  it('gives the bar a stream narrower than the terminal that drops cursor save and restore', () => {
    const out = fakeTerminal(120);
    const { barStream } = new BarAwareStream(out);
    // A bar ending in the last column would put the echoed ^C of Ctrl-C on a line of its own.
    expect(barStream.columns).toBe(117);
    out.columns = 80;
    expect(barStream.columns).toBe(77);
    // A terminal of unknown width (0 columns: a pseudo-terminal nobody sized) gets 80 columns, not a bar of one.
    out.columns = 0;
    expect(barStream.columns).toBe(77);
    out.columns = 120;
    const done = vi.fn();
    barStream.write('\x1b7', done);
    barStream.write('bar text');
    barStream.write('\x1b8');
    expect(out.writes).toEqual(['bar text']);
    expect(done).toHaveBeenCalledOnce();
  });
});

describe('progressBar (cli-progress on a fake terminal)', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('draws the bar, puts a log line above it, and leaves an empty line with the cursor shown when stopped', async () => {
    vi.useFakeTimers();
    const out = fakeTerminal(100);
    const terminal = new BarAwareStream(out);
    const log = createLogger('info', { format: 'json', destination: terminal });
    const progress = await progressBar(terminal);
    expect(progress.observer.showsProgress).toBe(true);

    progress.observer.runStarted!({
      runId: 1,
      windows: [
        { start: 0, end: 1 },
        { start: 1, end: 2 },
      ],
    });
    progress.observer.pageLoaded!({ records: 250 });
    out.writes.length = 0;
    log.warn({ endpoint: 'analytics', attempt: 1 }, 'upstream request failed; retrying');
    const [clearAndLine, ...redraw] = out.writes;
    expect(clearAndLine!.startsWith(CLEAR_LINE)).toBe(true);
    expect(JSON.parse(clearAndLine!.slice(CLEAR_LINE.length))).toMatchObject({ level: 'warn', msg: 'upstream request failed; retrying' });
    const drawn = redraw.join('');
    expect(drawn).toContain('windows 0/2 | 250 records');
    // Cut to the width, never wider: the terminal keeps wrapping on for the log lines.
    const barText = redraw.find((w) => w.includes('windows 0/2'))!;
    expect(barText.length).toBeLessThanOrEqual(100);

    out.writes.length = 0;
    progress.stop();
    const stopped = out.writes.join('');
    expect(stopped).toContain('\x1b[?25h'); // the cursor shown again
    expect(stopped.endsWith('\x1b[2K')).toBe(true); // the bar's line cleared last
    expect(out.writes).not.toContain('\x1b8');
    expect(stopped).not.toContain('\x1b[?7l');

    // Stopped: log lines pass through, the bar is not drawn again.
    out.writes.length = 0;
    log.warn('after the bar');
    vi.advanceTimersByTime(1000);
    expect(out.writes).toHaveLength(1);
    expect(out.writes[0]!.startsWith('{')).toBe(true);
    progress.stop();
  });
});

describe('formatRunSummary', () => {
  const result = {
    status: 'succeeded',
    runId: 4,
    range: { start: 0, end: 86_400_000 },
    windowsPlanned: 24,
    windows: 24,
    pages: 60,
    records: 52_340,
    quarantined: 2,
    watermark: 86_400_000,
    durationSeconds: 12.4,
  } satisfies Exclude<SyncResult, { status: 'locked' }>;

  it('says windows, records, quarantined, duration and rate in one line', () => {
    expect(formatRunSummary(result)).toBe('sync succeeded: 24/24 windows, 52,340 records, 2 quarantined in 12.4 s (4,221 records/s)');
  });

  it('adds the error of a failed run', () => {
    const error = new UpstreamHttpError('analytics', 503, 'E6: HTTP 503');
    expect(formatRunSummary({ ...result, status: 'failed', windows: 3, error })).toBe(
      'sync failed: 3/24 windows, 52,340 records, 2 quarantined in 12.4 s (4,221 records/s): E6: HTTP 503 (ERR_UPSTREAM_HTTP)',
    );
  });
});
