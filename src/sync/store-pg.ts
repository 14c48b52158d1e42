/**
 * The run's store in PostgreSQL ({@link SyncStore}): a session is a pooled connection, a window is
 * a transaction on it, and the SQL is store.ts's (the ledger, records, quarantine), records-copy.ts's
 * (COPY), partitions.ts's and the derived tables' (derived.ts). Integration tests prove it; the run's
 * unit tests use an in-memory store instead.
 */
import type { PartitionInterval } from '../config.js';
import { withAdvisoryLock, withClient, withTransaction, type Pool, type PoolClient } from '../db/pool.js';
import { DatabaseError } from '../errors.js';
import type { Logger } from '../log.js';
import type { Derived, RollupCounts, WindowFields } from './derived.js';
import type { PageRows, QuarantineRow } from './page-rows.js';
import { dropExpiredPartitions, ensurePartitions, type DroppedPartition, type Partition } from './partitions.js';
import { parkedWindows, parkWindow, type ParkedWindow } from './parked.js';
import type { LockOptions, Locked, RunEnding, StoreSession, StoredWindow, SyncStore, WindowCounts, WindowWriter } from './ports.js';
import { RecordsCopy } from './records-copy.js';
import {
  abandonStaleRuns,
  auditWindows,
  clearWindowRest,
  committedWindows,
  expiredWindows,
  finishRun,
  insertQuarantined,
  ledgerCounts,
  prepareInsertQuarantined,
  prepareInsertRecords,
  readWatermark,
  recordWindow,
  startRun,
  supportsCopyFromStdin,
  type Tables,
  type WindowTarget,
} from './store.js';
import type { Window } from './windows.js';

/** What a PostgreSQL store of one source's runs is made of. */
export interface PgStoreOptions {
  pool: Pool;
  tables: Tables;
  source: string;
  /** The run's derived tables (built once per run), whose SQL the windows' transactions run. */
  derived: Derived;
  /** PARTITION_INTERVAL of `records`. */
  partitionInterval: PartitionInterval;
  /** The source's logger, for what the derived tables log. */
  log: Logger;
}

/** One source's runs in PostgreSQL (see the module comment). */
export class PgSyncStore implements SyncStore {
  constructor(readonly options: PgStoreOptions) {}

  async session<T>(fn: (session: StoreSession) => Promise<T>): Promise<T> {
    return withClient(this.options.pool, (db) => fn(new PgSession(db, this.options)));
  }
}

/** One connection of a {@link PgSyncStore}. */
export class PgSession implements StoreSession {
  /** Whether the server takes COPY FROM STDIN: asked once, at the session's first window. */
  #copy: Promise<boolean> | undefined;

  constructor(
    private readonly db: PoolClient,
    private readonly o: PgStoreOptions,
  ) {}

  lock<T>(name: string, options: LockOptions, fn: () => Promise<T>): Promise<Locked<T>> {
    return withAdvisoryLock(this.db, name, options, fn);
  }

  isRollupCurrent(): Promise<boolean> {
    return this.o.derived.isRollupCurrent(this.db);
  }

  async ensureRollup(): Promise<void> {
    await withTransaction(this.db, () => this.o.derived.ensureRollup(this.db, this.o.log));
  }

  ensureTypedViewCurrent(): Promise<void> {
    return withTransaction(this.db, () => this.o.derived.ensureTypedViewCurrent(this.db, this.o.log));
  }

  pruneRollup(before: number): Promise<number> {
    // In a transaction: records_daily_distinct's days are recomputed under locks held until its commit.
    return withTransaction(this.db, () => this.o.derived.pruneRollup(this.db, before));
  }

  abandonStaleRuns(): Promise<number> {
    return abandonStaleRuns(this.db, this.o.tables, this.o.source);
  }

  readWatermark(): Promise<number | undefined> {
    return readWatermark(this.db, this.o.tables, this.o.source);
  }

  committedWindows(range: Window): Promise<Window[]> {
    return committedWindows(this.db, this.o.tables, this.o.source, range);
  }

  expiredWindows(range: Window): Promise<Window[]> {
    return expiredWindows(this.db, this.o.tables, this.o.source, range);
  }

  auditWindows(range: Window): Promise<StoredWindow[]> {
    return auditWindows(this.db, this.o.tables, this.o.source, range);
  }

  parkedWindows(range?: Window): Promise<ParkedWindow[]> {
    return parkedWindows(this.db, this.o.tables, this.o.source, range);
  }

  parkWindow(of: { window: Window; runId: number }, reason: string): Promise<number | undefined> {
    return withTransaction(this.db, () => parkWindow(this.db, { t: this.o.tables, source: this.o.source, ...of }, reason));
  }

  ledgerCounts(range: Window): Promise<(Window & { totalRecords: number })[]> {
    return ledgerCounts(this.db, this.o.tables, this.o.source, range);
  }

  startRun(range: Window): Promise<number> {
    return startRun(this.db, this.o.tables, this.o.source, range);
  }

  finishRun(runId: number, ending: RunEnding): Promise<void> {
    return finishRun(this.db, this.o.tables, runId, ending);
  }

  ensurePartitions(starts: readonly number[]): Promise<Partition[]> {
    return ensurePartitions(this.db, this.o.tables, starts, this.o.partitionInterval);
  }

  dropExpiredPartitions(cutoff: number, runIds: readonly number[]): Promise<DroppedPartition[]> {
    return dropExpiredPartitions(this.db, this.o.tables, cutoff, runIds);
  }

  async inWindow<T>(of: { window: Window; runId: number }, fn: (writer: WindowWriter) => Promise<T>): Promise<T> {
    // COPY where the server takes it (PostgreSQL); the embedded database inserts page by page.
    this.#copy ??= supportsCopyFromStdin(this.db);
    const copy = await this.#copy;
    const target: WindowTarget = { t: this.o.tables, source: this.o.source, ...of };
    return withTransaction(this.db, () => fn(copy ? new CopyWindowWriter(this.db, target, this.o) : new InsertWindowWriter(this.db, target, this.o)));
  }
}

/** The writes of a window both writers share: clearing it first, the derived tables and the ledger last. */
abstract class PgWindowWriter implements WindowWriter {
  constructor(
    protected readonly db: PoolClient,
    protected readonly target: WindowTarget,
    protected readonly o: PgStoreOptions,
  ) {}

  async clear(): Promise<number> {
    // The derived tables delete the records in the same statement as their own rows of the windows.
    const { t, source, window } = this.target;
    const deleted = await this.o.derived.deleteWindowRecords(this.db, source, window);
    await clearWindowRest(this.db, t, source, window);
    return deleted;
  }

  abstract write(rows: PageRows, quarantine: readonly QuarantineRow[], onStored: (records: number) => void): Promise<void>;
  abstract abort(reason: Error): Promise<Error | undefined>;
  abstract end(): Promise<number>;

  async addDerived(rollup: RollupCounts, fields: WindowFields): Promise<void> {
    // Once the window's records are all in: one statement per window, not one per page.
    const { source, window } = this.target;
    await this.o.derived.addWindowRollup(this.db, source, window, rollup);
    await this.o.derived.addWindowRecords(this.db, source, window, fields, this.o.log);
  }

  record(counts: WindowCounts): Promise<number | undefined> {
    return recordWindow(this.db, this.target, counts);
  }
}

/**
 * The window's records stream into one COPY as their pages come ({@link RecordsCopy}); its
 * quarantined records are inserted after it.
 */
class CopyWindowWriter extends PgWindowWriter {
  readonly #copying = new RecordsCopy(this.db, this.target);
  readonly #isolated: QuarantineRow[] = [];
  #sent = 0;

  async write(rows: PageRows, quarantine: readonly QuarantineRow[], onStored: (records: number) => void): Promise<void> {
    await this.#copying.write(rows);
    this.#isolated.push(...quarantine);
    this.#sent += rows.keep.length;
    onStored(rows.keep.length);
  }

  abort(reason: Error): Promise<Error | undefined> {
    // The COPY's failure (earlier in order) wins over a read failure; either way it is cancelled,
    // so the connection can roll the window back.
    return this.#copying.abort(reason);
  }

  async end(): Promise<number> {
    const copied = await this.#copying.end();
    if (copied !== this.#sent) throw new DatabaseError(`COPY into records stored ${copied} rows of the ${this.#sent} sent for the window`);
    await insertQuarantined(this.db, this.target, this.#isolated);
    return this.#sent;
  }
}

/**
 * Each page is one insert, pipelined: one page's insert runs in the database while the next pages
 * are fetched and prepared here. At most one insert is outstanding: it is awaited before the next
 * one is sent, so a failure surfaces before anything after it, and memory grows by one page.
 */
class InsertWindowWriter extends PgWindowWriter {
  #inserting: { done: Promise<void>; records: number; onStored: (records: number) => void } | undefined;
  #stored = 0;

  async write(rows: PageRows, quarantine: readonly QuarantineRow[], onStored: (records: number) => void): Promise<void> {
    const query = prepareInsertRecords(this.target, rows);
    const isolating = prepareInsertQuarantined(this.target, quarantine);
    await this.#settle();
    const done = Promise.all([query, isolating].filter((q) => q !== undefined).map((q) => this.db.query(q.text, q.values))).then(() => undefined);
    done.catch(() => undefined); // awaited by #settle(); never an unhandled rejection meanwhile
    this.#inserting = { done, records: rows.keep.length, onStored };
  }

  async abort(): Promise<Error | undefined> {
    // An outstanding insert's failure (earlier in order) wins over a read failure.
    try {
      await this.#settle();
      return undefined;
    } catch (err) {
      return err as Error;
    }
  }

  async end(): Promise<number> {
    await this.#settle();
    return this.#stored;
  }

  async #settle(): Promise<void> {
    if (this.#inserting === undefined) return;
    const { done, records, onStored } = this.#inserting;
    this.#inserting = undefined;
    await done;
    this.#stored += records;
    onStored(records);
  }
}

/** What retention needs of a connection (retention.ts), for the schema's tables: no source, no run. */
export function pgRetentionSession(db: PoolClient, tables: Tables): Pick<StoreSession, 'lock' | 'dropExpiredPartitions'> {
  return {
    lock: (name, options, fn) => withAdvisoryLock(db, name, options, fn),
    dropExpiredPartitions: (cutoff, runIds) => dropExpiredPartitions(db, tables, cutoff, runIds),
  };
}
