/**
 * The store in PostgreSQL: {@link PgStore} for one schema hands out the run's port for a source
 * and sessions for the app's own work (`state`, serve's gauges, the derived tables' upkeep). A
 * session is one pooled connection; a window is one transaction on it. Design: docs/design/sync-run.md.
 */
import type { PartitionInterval, RollupConfig } from '../../../config.js';
import { LockWatcher, setLockTimeout } from '../../../db/lock-wait.js';
import { withAdvisoryLock, withClient, withTransaction, type Pool, type PoolClient } from '../../../db/pool.js';
import type { Logger } from '../../../log.js';
import { Derived } from '../../derived/index.js';
import type { Window } from '../../windows.js';
import type { LockOptions, Locked, LockWaitEvent, StoreSession, SyncStore, WindowWriter } from '../ports.js';
import { PgLedger } from './ledger.js';
import { PgMaintenance } from './maintenance.js';
import { supportsCopyFromStdin } from './records.js';
import { Tables } from './tables.js';
import { CopyWindowWriter, InsertWindowWriter } from './writer.js';

export interface PgStoreOptions {
  pool: Pool;
  schema: string;
  tables: { partitionInterval: PartitionInterval; rollup: RollupConfig };
  log: Logger;
  /**
   * A run's session: its lock waits `watch`ed from another connection of the pool (not for the
   * embedded database: one backend), its lock_timeout `timeoutMs` (DATABASE_LOCK_TIMEOUT).
   */
  lockWaits?: { watch: boolean; timeoutMs: number | undefined };
}

type SessionOptions = { partitionInterval: PartitionInterval; log: Logger; pool: Pool; lockWaits: PgStoreOptions['lockWaits'] };

export class PgStore {
  readonly #t: Tables;
  readonly #derived: Derived;

  constructor(private readonly o: PgStoreOptions) {
    this.#t = new Tables(o.schema);
    this.#derived = new Derived(this.#t, o.tables.rollup);
  }

  /** @throws the database's error, or what `fn` throws. */
  session<T>(fn: (session: PgSession) => Promise<T>, log: Logger = this.o.log): Promise<T> {
    const options: SessionOptions = { partitionInterval: this.o.tables.partitionInterval, log, pool: this.o.pool, lockWaits: this.o.lockWaits };
    return withClient(this.o.pool, (db) => fn(new PgSession(db, this.#t, this.#derived, options)));
  }

  /** A run's port; `onLockWait`: a statement of its session waited on a lock over 10 s (logged here too). */
  forSource(source: string, log: Logger, onLockWait?: (wait: LockWaitEvent) => void): SyncStore {
    return { session: (fn) => this.session((s) => s.watchingLocks(() => fn(s.forSource(source)), onLockWait), log) };
  }
}

export class PgSession {
  /** Asked once, at the session's first window. */
  #copy: Promise<boolean> | undefined;
  /** While {@link watchingLocks} runs. */
  #watcher: LockWatcher | undefined;

  constructor(
    private readonly db: PoolClient,
    private readonly t: Tables,
    private readonly derived: Derived,
    private readonly o: SessionOptions,
  ) {}

  lock<T>(name: string, options: LockOptions, fn: () => Promise<T>): Promise<Locked<T>> {
    return withAdvisoryLock(this.db, name, options, fn);
  }

  transaction<T>(fn: () => Promise<T>): Promise<T> {
    return withTransaction(this.db, fn);
  }

  ledger(source: string): PgLedger {
    return new PgLedger(this.db, this.t, source);
  }

  /** The schema's upkeep; `source` for what is the source's own (its catalogue). */
  maintenance(source?: string): PgMaintenance {
    const explain = (err: unknown) => this.#watcher?.explain(err) ?? err;
    return new PgMaintenance(this.db, this.t, this.derived, { source, partitionInterval: this.o.partitionInterval, log: this.o.log, explain });
  }

  /**
   * `fn` with DATABASE_LOCK_TIMEOUT as the session's lock_timeout (reset after) and its lock waits
   * watched (docs/design/lock-waits.md). @throws what `fn` throws.
   */
  async watchingLocks<T>(fn: () => Promise<T>, onLockWait?: (wait: LockWaitEvent) => void): Promise<T> {
    const { watch = false, timeoutMs } = this.o.lockWaits ?? {};
    const pid = watch ? Number((await this.db.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0]!.pid) : undefined;
    const onWait = (wait: LockWaitEvent) => {
      this.o.log.warn(wait, 'a statement waits on a lock another process holds');
      onLockWait?.(wait);
    };
    const watcher = new LockWatcher({ backend: pid === undefined ? undefined : { pool: this.o.pool, pid }, onWait, timeoutMs });
    if (timeoutMs !== undefined) await setLockTimeout(this.db, timeoutMs);
    this.#watcher = watcher;
    watcher.start();
    try {
      return await fn();
    } finally {
      watcher.stop();
      this.#watcher = undefined;
      if (timeoutMs !== undefined) await setLockTimeout(this.db, undefined).catch(() => undefined);
    }
  }

  forSource(source: string): StoreSession {
    const ledger = this.ledger(source);
    return {
      lock: (name, options, fn) => this.lock(name, options, fn),
      ledger,
      maintenance: this.maintenance(source),
      inWindow: (of, fn) => this.#inWindow(ledger, of, fn),
    };
  }

  async #inWindow<T>(ledger: PgLedger, of: { window: Window; runId: number }, fn: (writer: WindowWriter) => Promise<T>): Promise<T> {
    this.#copy ??= supportsCopyFromStdin(this.db);
    const copy = await this.#copy;
    const target = { t: this.t, source: ledger.source, ...of };
    const options = { derived: this.derived, ledger, log: this.o.log };
    try {
      return await withTransaction(this.db, () => fn(copy ? new CopyWindowWriter(this.db, target, options) : new InsertWindowWriter(this.db, target, options)));
    } catch (err) {
      throw this.#watcher?.explain(err) ?? err;
    }
  }
}
