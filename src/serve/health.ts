/**
 * Whether `serve`'s database is reachable, and getting back to it by itself after an outage
 * (down at start, restarted, failed over) without a restart of the process.
 *
 * When a database operation fails because the database is unreachable, {@link DatabaseHealth}
 * sets `analytics_exporter_database_up` to 0, logs one warning naming the database (never its
 * credentials), and probes it with exponential backoff until a probe succeeds. Then it sets the
 * gauge to 1, logs the recovery, and, when a sync could not run meanwhile, asks for one at once
 * instead of leaving the data stale until the next scheduled tick.
 */
import type { Gauge } from 'prom-client';
import type { Logger } from '../log.js';

/** First wait before probing an unreachable database again, in milliseconds; it doubles each time. */
const DATABASE_RETRY_INITIAL_DELAY_MS = 500;
/** Longest wait between two probes of an unreachable database, in milliseconds. */
const DATABASE_RETRY_MAX_DELAY_MS = 30_000;

export interface DatabaseHealthOptions {
  /** `analytics_exporter_database_up` (ExporterMetrics.process.databaseUp): set to 1 at once, 0 while unreachable. */
  up: Gauge;
  log: Logger;
  /** The database for messages, as {@link describeDatabase} names it: `host:port/name`. */
  target: string;
  /** Resolves when the database is reachable and ready for a sync (migrated); rejects otherwise. Must not hang for long. */
  probe: () => Promise<void>;
  /** Called once the database is back after an outage during which a sync could not run. Must not throw. */
  onRecovered: () => void;
  initialDelayMs?: number;
  maxDelayMs?: number;
}

/** Tracks and restores the database connection of `serve`; see the module comment. */
export class DatabaseHealth {
  readonly #o: DatabaseHealthOptions;
  readonly #up: Gauge;
  #down = false;
  #since = 0;
  #syncOwed = false;
  #retrying: Promise<void> | undefined;
  /** Ends the current wait between probes early (stop, or a sign the database is back). */
  #wake: (() => void) | undefined;
  #stopped = false;

  constructor(options: DatabaseHealthOptions) {
    this.#o = options;
    this.#up = options.up;
    this.#up.set(1);
  }

  /** False from a failure that said the database is unreachable until a probe or an operation succeeds. */
  get up(): boolean {
    return !this.#down;
  }

  /**
   * A database operation failed because the database is unreachable: marks it down and starts
   * probing with backoff (if not already). Never throws.
   *
   * @param options.syncOwed a sync could not run because of it: one is asked for on recovery.
   */
  unreachable(err: unknown, options: { syncOwed?: boolean } = {}): void {
    if (this.#stopped) return;
    if (options.syncOwed) this.#syncOwed = true;
    this.#up.set(0);
    if (!this.#down) {
      this.#down = true;
      this.#since = Date.now();
      this.#o.log.warn(
        { database: this.#o.target, err },
        `the database ${this.#o.target} is unreachable; retrying with backoff (analytics_exporter_database_up 0)`,
      );
    }
    if (this.#retrying === undefined) {
      this.#retrying = this.#retry().finally(() => {
        this.#retrying = undefined;
      });
    }
  }

  /**
   * The database could not be opened at all (the embedded database's folder is read-only, not
   * ours, locked): it is down for good in this process, with nothing to probe. Never throws.
   */
  cannotOpen(err: unknown): void {
    if (this.#stopped) return;
    this.#down = true;
    this.#stopped = true;
    this.#up.set(0);
    this.#o.log.debug({ database: this.#o.target, err }, 'analytics_exporter_database_up 0: the database cannot be opened');
  }

  /** A database operation succeeded: the database is up; a backoff wait in progress ends now. */
  reachable(): void {
    if (!this.#down) {
      this.#up.set(1);
      return;
    }
    // The retry loop confirms with its own probe (which also migrates) and reports the recovery.
    this.#wake?.();
  }

  /** Stops probing; a probe in flight is not waited for (it may take a connect timeout) and its outcome is ignored. Idempotent. */
  stop(): void {
    this.#stopped = true;
    this.#wake?.();
  }

  async #retry(): Promise<void> {
    const { log, target } = this.#o;
    let delayMs = this.#o.initialDelayMs ?? DATABASE_RETRY_INITIAL_DELAY_MS;
    const maxDelayMs = this.#o.maxDelayMs ?? DATABASE_RETRY_MAX_DELAY_MS;
    for (let attempt = 1; !this.#stopped; attempt++) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, delayMs);
        timer.unref();
        this.#wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.#wake = undefined;
      if (this.#stopped) return;
      try {
        await this.#o.probe();
      } catch (err) {
        if (this.#stopped) return;
        delayMs = Math.min(delayMs * 2, maxDelayMs);
        log.warn({ database: target, attempt, nextDelayMs: delayMs, err }, `the database ${target} is still unreachable`);
        continue;
      }
      if (this.#stopped) return;
      this.#down = false;
      this.#up.set(1);
      const owed = this.#syncOwed;
      this.#syncOwed = false;
      log.info({ database: target, downSeconds: Math.round((Date.now() - this.#since) / 1000), syncOwed: owed }, `the database ${target} is reachable again`);
      if (owed) this.#o.onRecovered();
      return;
    }
  }
}
