/**
 * The soak's maintenance session: once, at {@link MAINTENANCE_SHARE} of the run, a connection of
 * its own (application_name `soak-maintenance`, the cluster's superuser) takes ACCESS EXCLUSIVE on
 * `records` (every partition with it) and holds it {@link MAINTENANCE_HOLD_MS} before committing,
 * as a `VACUUM FULL` or an `ALTER TABLE` would. The runs that write meanwhile wait; serve must log
 * the wait (docs/design/lock-waits.md), lose nothing, and keep answering scrapes.
 */
import pg from 'pg';

export const MAINTENANCE_SHARE = 0.27;
export const MAINTENANCE_HOLD_MS = 20_000;
export const MAINTENANCE_APPLICATION = 'soak-maintenance';

/** When the lock was held, in seconds since the soak's start, and what went wrong. */
export interface MaintenanceRecord {
  /** When the session asked for the lock, got it, and committed. */
  askedAt: number | undefined;
  heldFrom: number | undefined;
  heldTo: number | undefined;
  error: string | undefined;
}

/** The maintenance session; `tick(t)` is called every second with the seconds since the soak's start. */
export class Maintenance {
  readonly record: MaintenanceRecord = { askedAt: undefined, heldFrom: undefined, heldTo: undefined, error: undefined };
  #done: Promise<void> | undefined;

  /** `clock` gives the seconds since the soak's start. */
  constructor(
    readonly url: string,
    readonly schema: string,
    readonly runSeconds: number,
    readonly clock: () => number,
  ) {}

  /** Whether the lock is held (or asked for) now: the harness leaves `records` alone meanwhile. */
  get holding(): boolean {
    return this.record.askedAt !== undefined && this.record.heldTo === undefined && this.record.error === undefined;
  }

  /** Starts the session once its time (`t`, seconds since the soak's start) has come. */
  tick(t: number): void {
    if (this.#done !== undefined || t < MAINTENANCE_SHARE * this.runSeconds) return;
    this.#done = this.#hold().catch((err: unknown) => {
      this.record.error = err instanceof Error ? err.message : String(err);
    });
  }

  async #hold(): Promise<void> {
    const client = new pg.Client({ connectionString: this.url, application_name: MAINTENANCE_APPLICATION });
    await client.connect();
    try {
      this.record.askedAt = this.clock();
      await client.query('begin');
      await client.query(`lock table ${client.escapeIdentifier(this.schema)}.records in access exclusive mode`);
      this.record.heldFrom = this.clock();
      await new Promise((resolve) => setTimeout(resolve, MAINTENANCE_HOLD_MS));
      await client.query('commit');
      this.record.heldTo = this.clock();
    } finally {
      await client.end().catch(() => undefined);
    }
  }

  /** Waits for the session to end, if it started. */
  async settle(): Promise<void> {
    await this.#done;
  }
}
