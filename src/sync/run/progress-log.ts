/**
 * A run's progress in its log, for runs nobody watches on a terminal: `sync progress` at most every
 * {@link PROGRESS_INTERVAL_MS}, the first once the run lasted that long. Not under the progress bar.
 */
import type { Logger } from '../../log.js';

/** ms. */
export const PROGRESS_INTERVAL_MS = 10_000;

export interface ProgressLine {
  runId: number;
  /** Committed or parked. */
  windows: number;
  windowsPlanned: number;
  records: number;
  recordsPerSecond: number;
  /** Windows left × the mean time of a window done. */
  etaSeconds: number;
}

/** @param options.now monotonic clock, ms (default `performance.now`). */
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

  /** A window committed with `records`, or parked (0). @returns the line logged, if one was. */
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
