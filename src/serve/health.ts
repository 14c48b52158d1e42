/**
 * Whether `serve`'s database is reachable (`database_up`), and getting back to it after an outage
 * without a restart: probes with exponential backoff, then, when a sync could not run meanwhile,
 * asks for one at once. One warning per outage, naming the database, never its credentials. See
 * docs/design/serve-lifecycle.md, The database.
 */
import type { Gauge } from 'prom-client';
import type { Logger } from '../log.js';

/** First wait before a probe; it doubles each time, up to the max. */
const DATABASE_RETRY_INITIAL_DELAY_MS = 500;
const DATABASE_RETRY_MAX_DELAY_MS = 30_000;

export interface DatabaseHealthOptions {
  /** `database_up`. */
  up: Gauge;
  log: Logger;
  /** For messages: `host:port/name`. */
  target: string;
  /** Resolves when the database is reachable and migrated. Must not hang for long. */
  probe: () => Promise<void>;
  /** Back after an outage during which a sync could not run. Must not throw. */
  onRecovered: () => void;
  initialDelayMs?: number;
  maxDelayMs?: number;
}

/** Tracks and restores the database connection of `serve`. */
export class DatabaseHealth {
  readonly #o: DatabaseHealthOptions;
  readonly #up: Gauge;
  #down = false;
  #since = 0;
  #syncOwed = false;
  #retrying: Promise<void> | undefined;
  /** Ends the wait between probes early. */
  #wake: (() => void) | undefined;
  #stopped = false;

  constructor(options: DatabaseHealthOptions) {
    this.#o = options;
    this.#up = options.up;
    this.#up.set(1);
  }

  /** False from an unreachable failure until a probe succeeds. */
  get up(): boolean {
    return !this.#down;
  }

  /** An operation found the database unreachable: down, probing with backoff. `syncOwed`: a sync on recovery. Never throws. */
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

  /** The database could not be opened at all: down for good in this process, nothing to probe. Never throws. */
  cannotOpen(err: unknown): void {
    if (this.#stopped) return;
    this.#down = true;
    this.#stopped = true;
    this.#up.set(0);
    this.#o.log.debug({ database: this.#o.target, err }, 'analytics_exporter_database_up 0: the database cannot be opened');
  }

  /** An operation succeeded: up; a backoff wait in progress ends now. */
  reachable(): void {
    if (!this.#down) {
      this.#up.set(1);
      return;
    }
    // The retry loop confirms with its own probe (which also migrates) and reports the recovery.
    this.#wake?.();
  }

  /** Stops probing; a probe in flight is not waited for, its outcome ignored. Idempotent. */
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
