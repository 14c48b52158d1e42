/**
 * The store in PostgreSQL: {@link PgStore} for one schema hands out the run's port for a source
 * and sessions for the app's own work (`state`, serve's gauges, the derived tables' upkeep). A
 * session is one pooled connection; a window is one transaction on it. Design: docs/design/sync-run.md.
 */
import type { PartitionInterval, RollupConfig } from '../../../config.js';
import { withAdvisoryLock, withClient, withTransaction, type Pool, type PoolClient } from '../../../db/pool.js';
import type { Logger } from '../../../log.js';
import { Derived } from '../../derived/index.js';
import type { Window } from '../../windows.js';
import type { LockOptions, Locked, StoreSession, SyncStore, WindowWriter } from '../ports.js';
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
}

export class PgStore {
  readonly #t: Tables;
  readonly #derived: Derived;

  constructor(private readonly o: PgStoreOptions) {
    this.#t = new Tables(o.schema);
    this.#derived = new Derived(this.#t, o.tables.rollup);
  }

  /** @throws the database's error, or what `fn` throws. */
  session<T>(fn: (session: PgSession) => Promise<T>, log: Logger = this.o.log): Promise<T> {
    return withClient(this.o.pool, (db) => fn(new PgSession(db, this.#t, this.#derived, { partitionInterval: this.o.tables.partitionInterval, log })));
  }

  forSource(source: string, log: Logger): SyncStore {
    return { session: (fn) => this.session((s) => fn(s.forSource(source)), log) };
  }
}

export class PgSession {
  /** Asked once, at the session's first window. */
  #copy: Promise<boolean> | undefined;

  constructor(
    private readonly db: PoolClient,
    private readonly t: Tables,
    private readonly derived: Derived,
    private readonly o: { partitionInterval: PartitionInterval; log: Logger },
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
    return new PgMaintenance(this.db, this.t, this.derived, { source, ...this.o });
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
    return withTransaction(this.db, () => fn(copy ? new CopyWindowWriter(this.db, target, options) : new InsertWindowWriter(this.db, target, options)));
  }
}
