/**
 * A run's progress in its log, for the runs nobody watches on a terminal (`serve`'s schedules, a
 * `sync` under cron or in a pod): one info line `sync progress` at most every
 * {@link PROGRESS_INTERVAL_MS}, the first once the run has lasted that long, so a short run logs
 * only its start and its summary. Under `sync`'s progress bar (src/commands/progress.ts) the bar
 * says the same and no line is logged.
 */
import type { Logger } from '../../log.js';

/** Least time between two progress lines, and the least a run lasts before its first, in milliseconds. */
export const PROGRESS_INTERVAL_MS = 10_000;

/** The fields of a `sync progress` line. */
export interface ProgressLine {
  runId: number;
  /** Windows done (committed or parked) of those planned. */
  windows: number;
  windowsPlanned: number;
  /** Records stored so far. */
  records: number;
  recordsPerSecond: number;
  /** Seconds left at the run's pace so far: windows left × the mean time of a window done. */
  etaSeconds: number;
}

/**
 * Counts a run's windows and logs its pace at most every {@link PROGRESS_INTERVAL_MS}.
 *
 * @param options.now monotonic clock in milliseconds (default `performance.now`).
 */
export class ProgressLog {
  readonly #log: Logger;
  readonly #runId: number;
  readonly #planned: number;
  readonly #now: () => number;
  readonly #started: number;
  #lastLine: number;
  #windows = 0;
  #records = 0;

  constructor(log: Logger, run: { runId: number; windowsPlanned: number }, options: { now?: () => number } = {}) {
    this.#log = log;
    this.#runId = run.runId;
    this.#planned = run.windowsPlanned;
    this.#now = options.now ?? (() => performance.now());
    this.#started = this.#now();
    this.#lastLine = this.#started;
  }

  /**
   * A window is done: committed with `records` stored, or parked (0). Logs a line when the last
   * one (or the run's start) is at least {@link PROGRESS_INTERVAL_MS} ago and windows are left.
   *
   * @returns the line logged, if one was.
   */
  windowDone(records: number): ProgressLine | undefined {
    this.#windows++;
    this.#records += records;
    const now = this.#now();
    if (now - this.#lastLine < PROGRESS_INTERVAL_MS || this.#windows >= this.#planned) return undefined;
    this.#lastLine = now;
    const elapsedSeconds = (now - this.#started) / 1000;
    const line: ProgressLine = {
      runId: this.#runId,
      windows: this.#windows,
      windowsPlanned: this.#planned,
      records: this.#records,
      recordsPerSecond: elapsedSeconds > 0 ? Math.round(this.#records / elapsedSeconds) : 0,
      etaSeconds: Math.round((elapsedSeconds / this.#windows) * (this.#planned - this.#windows)),
    };
    this.#log.info(line, 'sync progress');
    return line;
  }
}
