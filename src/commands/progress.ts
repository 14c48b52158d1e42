/**
 * What `sync` shows on a terminal: a progress bar on the last line, log lines printed above it
 * (never inside it), and once the bar is cleared, the run's summary (src/commands/format/sync.ts).
 */
import type { SyncObserver } from '../sync/run/run.js';

/** The terminal side of a stream: process.stderr, or a test's fake. Writes are synchronous (a TTY's are). */
export interface TerminalLike {
  write(chunk: string, callback?: (err?: Error | null) => void): unknown;
  isTTY?: boolean;
  /** Width in characters; the bar is cut {@link BAR_MARGIN_COLUMNS} short of it. */
  columns?: number;
}

/** Columns left free right of the bar: room for the two characters of an echoed ^C, and one more. */
const BAR_MARGIN_COLUMNS = 3;

/**
 * Width assumed when the terminal reports none: 0 columns (a pseudo-terminal nobody sized, as
 * `script` gives when it is not run from a terminal) or no `columns` at all; cli-progress's own default.
 */
const UNKNOWN_WIDTH_COLUMNS = 80;

/** Back to the start of the line, then erase the whole line (ECMA-48 EL 2): the bar's line is empty again. */
export const CLEAR_LINE = '\r\x1b[2K';

/**
 * DEC save and restore cursor, which cli-progress writes when a bar starts and stops. Log lines
 * printed above the bar scroll the screen, so the saved position is stale by the end: restoring
 * it would leave the cursor (and the cleared line) in the middle of the screen. The bar's own
 * line handling (start of line, clear to the right) is all it needs.
 */
const CURSOR_SAVE_RESTORE: ReadonlySet<string> = new Set(['\x1b7', '\x1b8']);

/**
 * A log destination in front of a terminal that may show a progress bar on its last line. While
 * a bar is shown ({@link showBar}), each write clears the bar's line, writes the log line (ending
 * it with a newline if it has none) and has the bar redrawn below it; otherwise writes pass
 * through untouched. The bar library writes through {@link barStream}.
 */
export class BarAwareStream {
  readonly #out: TerminalLike;
  #redraw: (() => void) | undefined;
  /**
   * The stream the bar library draws on: the terminal itself, {@link BAR_MARGIN_COLUMNS} narrower (read at each
   * draw, so a resize applies), except for the cursor save and restore ({@link CURSOR_SAVE_RESTORE}),
   * which are dropped.
   */
  readonly barStream: TerminalLike & { isTTY: true; write(chunk: string, callback?: (err?: Error | null) => void): boolean };

  constructor(out: TerminalLike) {
    this.#out = out;
    this.barStream = {
      isTTY: true,
      // Short of the width by BAR_MARGIN_COLUMNS: the ^C a terminal echoes on Ctrl-C lands after the
      // bar, and on a bar filling the line it would wrap to a new line; CLEAR_LINE would then clear
      // that one, and the bar would stay on screen above the log lines.
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

  /** Whether the terminal side is a TTY (the logger's `auto` format reads it). */
  get isTTY(): boolean {
    return this.#out.isTTY === true;
  }

  /** Writes one or more whole log lines: above the bar while one is shown. */
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

  /** From now on, log lines go above the bar and `redraw` draws it again (on the cleared last line). */
  showBar(redraw: () => void): void {
    this.#redraw = redraw;
  }

  /** The bar is gone: log lines pass through again. */
  hideBar(): void {
    this.#redraw = undefined;
  }
}

/** A progress display of a run, and how to take it off the screen. */
export interface Progress {
  observer: SyncObserver;
  /** Stops and clears the bar, leaving the cursor at the start of an empty last line. Idempotent. */
  stop(): void;
}

/**
 * A progress bar of a run (windows, records, rate, ETA) drawn by cli-progress on `terminal`'s
 * last line, with log lines printed above it. cli-progress is loaded only here, when stderr is a TTY.
 *
 * The observer may serve the runs of several sources at once: the bar is then one for all of them,
 * its total the windows of every run started so far (a run that starts later adds its windows).
 */
export async function progressBar(terminal: BarAwareStream): Promise<Progress> {
  const { default: cliProgress } = await import('cli-progress');
  const barStream = terminal.barStream;
  const bar = new cliProgress.SingleBar(
    {
      stream: barStream as unknown as NodeJS.WritableStream,
      format: 'sync [{bar}] {percentage}% | windows {value}/{total} | {records} records | {rate} records/s | ETA {eta_formatted}',
      hideCursor: true,
      // Cut to the terminal's width instead of turning wrapping off: with wrapping off, the log
      // lines printed above the bar would be cut at the right edge too.
      linewrap: true,
      // The line is cleared under the bar by every log line, so redraw even when nothing changed.
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
