/**
 * A schedule inside `serve` (node-cron, UTC): each tick runs one sync or audit; a tick while a run
 * is going is skipped, never queued or overlapped, and one whose run finds the lock held elsewhere
 * is said to be skipped. Ticks never throw.
 */
import cron, { type ScheduledTask } from 'node-cron';
import { settledWithin } from '../settle.js';
import type { Logger } from '../log.js';
import type { SyncResult } from '../sync/run/summary.js';
import type { SkipReason } from '../metrics/sync.js';

export type { SkipReason } from '../metrics/sync.js';

export interface SchedulerOptions<R = SyncResult> {
  /** Cron (optional seconds first), UTC. */
  schedule: string;
  /** The signal aborts it at shutdown. */
  run: (signal: AbortSignal) => Promise<R>;
  /** `sync` (default) or `audit`, for the logs and the task's name. */
  job?: string;
  log: Logger;
  source?: string;
  onSkipped?: (reason: SkipReason) => void;
}

export class SyncScheduler<R = SyncResult> {
  readonly #options: SchedulerOptions<R>;
  #task: ScheduledTask | undefined;
  #current: Promise<R | undefined> | undefined;
  #stop = new AbortController();
  #stopped = false;

  constructor(options: SchedulerOptions<R>) {
    this.#options = options;
  }

  get running(): boolean {
    return this.#current !== undefined;
  }

  /** Idempotent. */
  start(): void {
    if (this.#task !== undefined || this.#stopped) return;
    this.#task = cron.schedule(this.#options.schedule, () => void this.trigger('schedule'), {
      timezone: 'Etc/UTC',
      name: `analytics-exporter-${this.#options.job ?? 'sync'}`,
    });
  }

  /** Runs now unless a run is going (then undefined at once). `reason` is logged. Never rejects. */
  trigger(reason: string): Promise<R | undefined> {
    const job = this.#options.job ?? 'sync';
    if (this.#stopped) return Promise.resolve(undefined);
    if (this.#current !== undefined) {
      this.#options.log.warn({ reason }, `${job} still running; this tick is skipped`);
      this.#options.onSkipped?.('running');
      return Promise.resolve(undefined);
    }
    this.#options.log.debug({ reason }, `${job} triggered`);
    const run = this.#options
      .run(this.#stop.signal)
      .then((result) => {
        // Another replica on the same schedule is the normal case: info, not warn.
        if ((result as { status?: unknown } | undefined)?.status === 'locked') {
          const source = this.#options.source === undefined ? 'this source' : `source ${this.#options.source}`;
          this.#options.log.info(
            { reason },
            `sync tick skipped: another process holds the sync lock of ${source} (or the schema's); the next tick tries again`,
          );
          this.#options.onSkipped?.('locked');
        }
        return result;
      })
      .catch((err: unknown) => {
        // runSync reports upstream faults as a failed result; what reaches here is the database being unreachable.
        this.#options.log.error({ err }, `${job} could not run`);
        return undefined;
      })
      .finally(() => {
        this.#current = undefined;
      });
    this.#current = run;
    return run;
  }

  /**
   * Stops the schedule and aborts the run in progress, waiting up to `drainTimeoutMs` (default: no
   * bound) for it: a run can outlast its abort. Idempotent. @returns false when it was still going.
   */
  async stop(drainTimeoutMs?: number): Promise<boolean> {
    this.#stopped = true;
    await this.#task?.destroy();
    this.#task = undefined;
    this.#stop.abort();
    const current = this.#current;
    if (current === undefined) return true;
    if (drainTimeoutMs === undefined) {
      await current;
      return true;
    }
    return settledWithin(current, drainTimeoutMs);
  }
}
