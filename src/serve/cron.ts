/**
 * The sync schedule inside `serve`: node-cron fires SYNC_SCHEDULE, each tick runs one sync,
 * and a tick that comes while a run is still going is skipped, never queued or overlapped; a tick
 * whose run finds the source's lock held elsewhere (another replica's run) is skipped too, and said so.
 * Ticks never throw: a failed run is logged and counted by the run's own observer.
 */
import cron, { type ScheduledTask } from 'node-cron';
import { settledWithin } from '../settle.js';
import type { Logger } from '../log.js';
import type { SyncResult } from '../sync/run/summary.js';
import type { SkipReason } from '../metrics/sync.js';

export type { SkipReason } from '../metrics/sync.js';

export interface SchedulerOptions<R = SyncResult> {
  /** Cron expression (minute hour day month weekday, optional seconds first), in UTC. */
  schedule: string;
  /** One sync run (or audit); the signal aborts it at shutdown. */
  run: (signal: AbortSignal) => Promise<R>;
  /** What a tick runs, for the log lines and the cron task's name: `sync` (default) or `audit`. */
  job?: string;
  log: Logger;
  /** The source the runs sync, named in the line a locked tick logs. */
  source?: string;
  /** Told of every tick skipped, and why. */
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

  /** Whether a run is in progress. */
  get running(): boolean {
    return this.#current !== undefined;
  }

  /** Starts firing on the schedule. Idempotent. */
  start(): void {
    if (this.#task !== undefined || this.#stopped) return;
    this.#task = cron.schedule(this.#options.schedule, () => void this.trigger('schedule'), {
      timezone: 'Etc/UTC',
      name: `analytics-exporter-${this.#options.job ?? 'sync'}`,
    });
  }

  /**
   * Runs a sync now unless one is running (then resolves undefined at once). Never rejects.
   *
   * @param reason for the log line: `schedule`, `startup`.
   */
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
        // Another replica running the source on the same schedule is the normal case, so info, not warn.
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
   * Stops the schedule and aborts the run in progress (its open window rolls back), waiting
   * for it to finish. Idempotent.
   *
   * @param drainTimeoutMs how long to wait for the aborted run; default: as long as it takes. A
   *   run can outlast its abort while it waits on something that takes no signal (a token request
   *   in flight, a database statement blocked on a lock).
   * @returns true when no run is left going; false when the run was still going at the timeout.
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
