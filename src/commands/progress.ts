/**
 * What `sync` shows on a terminal: a progress bar on the last line, log lines printed above it
 * (never inside it), and once the bar is cleared, the run's summary (src/commands/format/sync.ts).
 */
import type { SyncObserver } from '../sync/run/run.js';

/** process.stderr, or a test's fake; writes are synchronous, as a TTY's are. */
export interface TerminalLike {
  write(chunk: string, callback?: (err?: Error | null) => void): unknown;
  isTTY?: boolean;
  columns?: number;
}

/** Room right of the bar for an echoed ^C: on a full line it would wrap, and the bar stay on screen. */
const BAR_MARGIN_COLUMNS = 3;

/** cli-progress's default, for a terminal that reports 0 columns (an unsized pseudo-terminal) or none. */
const UNKNOWN_WIDTH_COLUMNS = 80;

/** Back to the start of the line, then erase it (ECMA-48 EL 2). */
export const CLEAR_LINE = '\r\x1b[2K';

/** DEC save and restore cursor, dropped: log lines scroll the screen, so the saved position goes stale. */
const CURSOR_SAVE_RESTORE: ReadonlySet<string> = new Set(['\x1b7', '\x1b8']);

/**
 * A log destination in front of a terminal that may show a progress bar on its last line: while
 * one is shown, each write clears the bar's line, writes the log line and has the bar redrawn.
 */
export class BarAwareStream {
  readonly #out: TerminalLike;
  #redraw: (() => void) | undefined;
  /** What the bar library draws on: the terminal, narrower (read at each draw), cursor save and restore dropped. */
  readonly barStream: TerminalLike & { isTTY: true; write(chunk: string, callback?: (err?: Error | null) => void): boolean };

  constructor(out: TerminalLike) {
    this.#out = out;
    this.barStream = {
      isTTY: true,
      get columns() {
        const width = out.columns !== undefined && out.columns > 0 ? out.columns : UNKNOWN_WIDTH_COLUMNS;
        return Math.max(1, width - BAR_MARGIN_COLUMNS);
      },
      write: (chunk, callback) => {
        if (!CURSOR_SAVE_RESTORE.has(chunk)) out.write(chunk, callback);
        else callback?.();
        return true;
      },
    };
  }

  /** The logger's `auto` format reads it. */
  get isTTY(): boolean {
    return this.#out.isTTY === true;
  }

  /** Writes whole log lines, above the bar while one is shown. */
  write(chunk: string): boolean {
    const redraw = this.#redraw;
    if (redraw === undefined) {
      this.#out.write(chunk);
      return true;
    }
    this.#out.write(CLEAR_LINE + (chunk.endsWith('\n') ? chunk : `${chunk}\n`));
    redraw();
    return true;
  }

  /** From now on, log lines go above the bar, and `redraw` draws it again after each. */
  showBar(redraw: () => void): void {
    this.#redraw = redraw;
  }

  hideBar(): void {
    this.#redraw = undefined;
  }
}

/** A progress display of a run, and how to take it off the screen. */
export interface Progress {
  observer: SyncObserver;
  /** Stops and clears the bar. Idempotent. */
  stop(): void;
}

/**
 * A progress bar (windows, records, rate, ETA) on `terminal`'s last line, cli-progress loaded only
 * here. Its observer may serve several sources' runs: one bar, its total every run's windows so far.
 */
export async function progressBar(terminal: BarAwareStream): Promise<Progress> {
  const { default: cliProgress } = await import('cli-progress');
  const barStream = terminal.barStream;
  const bar = new cliProgress.SingleBar(
    {
      stream: barStream as unknown as NodeJS.WritableStream,
      format: 'sync [{bar}] {percentage}% | windows {value}/{total} | {records} records | {rate} records/s | ETA {eta_formatted}',
      hideCursor: true,
      // Cut to the width: with wrapping off, the log lines above would be cut too.
      linewrap: true,
      // Every log line clears the bar's line: redraw even when nothing changed.
      forceRedraw: true,
      clearOnComplete: true,
    },
    cliProgress.Presets.shades_classic,
  );
  let records = 0;
  let shown = false;
  let total = 0;
  const started = Date.now();
  const payload = () => ({ records, rate: Math.round(records / Math.max(0.001, (Date.now() - started) / 1000)) });
  // A forced exit (a second signal) must not leave the terminal without its cursor.
  const showCursor = () => void barStream.write('\x1b[?25h');
  return {
    observer: {
      showsProgress: true,
      runStarted: ({ windows }) => {
        total += windows.length;
        if (shown) {
          bar.setTotal(total);
          return;
        }
        bar.start(total, 0, payload());
        shown = true;
        terminal.showBar(() => bar.render());
        process.once('exit', showCursor);
      },
      pageLoaded: (e) => {
        records += e.records;
        bar.update(payload());
      },
      windowCommitted: () => bar.increment(1, payload()),
    },
    stop: () => {
      if (!shown) return;
      shown = false;
      terminal.hideBar();
      bar.stop();
      process.removeListener('exit', showCursor);
    },
  };
}
