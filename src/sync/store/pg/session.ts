/**
 * The run's store in PostgreSQL ({@link SyncStore}): a session is a pooled connection, a window is
 * a transaction on it, and the SQL is store.ts's (the ledger, records, quarantine), records-copy.ts's
 * (COPY), partitions.ts's and the derived tables' (derived.ts). Integration tests prove it; the run's
 * unit tests use an in-memory store instead.
 */
import type { PartitionInterval } from '../../../config.js';
import { withAdvisoryLock, withClient, withTransaction, type Pool, type PoolClient } from '../../../db/pool.js';
import { dataRefusal } from '../../../db/refusal.js';
import { DatabaseError } from '../../../errors.js';
import { dataElementSpans } from '../../../upstream/page-text.js';
import type { Logger } from '../../../log.js';
import type { Derived, RollupCounts, WindowFields } from '../../derived/index.js';
import type { FieldChange, KnownFields } from '../../derived/fields/schema-changes.js';
import { isolateRefused } from './isolate.js';
import type { PageRows, QuarantineRow } from '../../rows/page-rows.js';
import type { TextBag } from '../../membership/record-keys.js';
import { dropExpiredPartitions, ensurePartitions, type DroppedPartition, type Partition } from './partitions.js';
import { parkedWindows, parkWindow, type ParkedWindow } from './parked.js';
import type { LockOptions, Locked, RunEnding, StoreSession, StoredWindow, SyncStore, WindowCounts, WindowStored, WindowWriter } from '../ports.js';
import { RecordsCopy } from './records-copy.js';
import { recordVerified, reloadWindows } from './ledger-state.js';
import {
  abandonStaleRuns,
  auditWindows,
  clearWindowRest,
  committedWindows,
  createKeptTables,
  expiredWindows,
  finishRun,
  insertQuarantined,
  ledgerCounts,
  heldAtEnd,
  prepareInsertQuarantined,
  prepareInsertRecords,
  readWatermark,
  recordWindow,
  restoreKeptQuarantine,
  saveOwned,
  startRun,
  supportsCopyFromStdin,
  type PreparedQuery,
  type Tables,
  type WindowTarget,
} from './sql.js';
import type { Window } from '../../windows.js';

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

  reloadWindows(): Promise<Window[]> {
    return reloadWindows(this.db, this.o.tables, this.o.source);
  }

  recordVerified(through: number | undefined): Promise<void> {
    return recordVerified(this.db, this.o.tables, this.o.source, through);
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

  heldAtEnd(end: number, boundarySet: TextBag): Promise<TextBag> {
    return heldAtEnd(this.db, this.o.tables, this.o.source, end, boundarySet);
  }

  catalogueTypes(): Promise<KnownFields> {
    return this.o.derived.readFieldTypes(this.db, this.o.source);
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

/** The writes of a window both writers share: clearing it first, keeping what keep keeps, the derived tables and the ledger last. */
abstract class PgWindowWriter implements WindowWriter {
  #keep = false;

  constructor(
    protected readonly db: PoolClient,
    protected readonly target: WindowTarget,
    protected readonly o: PgStoreOptions,
  ) {}

  async clear(keep = false): Promise<number> {
    // The derived tables delete the records in the same statement as their own rows of the windows.
    const { t, source, window } = this.target;
    if (keep) await createKeptTables(this.db);
    const deleted = await this.o.derived.deleteWindowRecords(this.db, source, window, keep);
    const quarantined = await clearWindowRest(this.db, t, source, window, keep);
    // A window loaded for the first time has nothing to keep: no union to compute at its end.
    this.#keep = keep && deleted + quarantined > 0;
    return deleted;
  }

  abstract write(rows: PageRows, quarantine: readonly QuarantineRow[], onStored: (records: number) => void): Promise<void>;
  abstract abort(reason: Error): Promise<Error | undefined>;

  async end(owned: readonly string[] = []): Promise<WindowStored> {
    const stored = await this.store();
    if (!this.#keep) return { ...stored, kept: { records: 0, quarantined: 0 } };
    await saveOwned(this.db, this.target.t, owned);
    const restored = await this.#restoreKeptRecords();
    // Records refused on their way back (a constraint added since) are kept in the quarantine.
    await insertQuarantined(this.db, this.target, restored.refused);
    const quarantined = await restoreKeptQuarantine(this.db, this.target);
    return { ...stored, kept: { records: restored.records, quarantined: quarantined + restored.refused.length } };
  }

  /**
   * {@link Derived.restoreKeptRecords} in one statement under a savepoint; when the database
   * refuses it for a data reason, the records are inserted again in parts and those refused alone
   * handed back for the quarantine.
   */
  async #restoreKeptRecords(): Promise<{ records: number; refused: QuarantineRow[] }> {
    const { source, window } = this.target;
    const derived = this.o.derived;
    await this.db.query('savepoint records_kept');
    try {
      return { records: await derived.restoreKeptRecords(this.db, source, window), refused: [] };
    } catch (err) {
      if (dataRefusal(err) === undefined) throw err;
      await this.db.query('rollback to savepoint records_kept');
      const isolated = await isolateRefused(await derived.keptRecordsBeyond(this.db, source, window), err, {
        attempt: async (part) => {
          await this.db.query('savepoint records_part');
          try {
            await derived.restoreKeptRecords(this.db, source, window, part);
          } catch (e) {
            await this.db.query('rollback to savepoint records_part');
            throw e;
          }
          await this.db.query('release savepoint records_part');
        },
      });
      const { rows } = await this.db.query<{ text: string; event_time: Date | null }>(
        'select payload::text as text, event_time from pg_temp.sync_kept_records where n = any($1::bigint[]) order by n',
        [isolated.refused.map((r) => r.row)],
      );
      const refused = rows.map((r, i) => ({ text: r.text, eventTime: r.event_time?.getTime() ?? null, ...isolated.refused[i]!.refusal }));
      return { records: isolated.stored, refused };
    } finally {
      await this.db.query('release savepoint records_kept').catch(() => undefined);
    }
  }

  /** Waits until every page written is stored, the records refused quarantined. */
  protected abstract store(): Promise<Omit<WindowStored, 'kept'>>;

  async addDerived(rollup: RollupCounts, fields: WindowFields, changes?: readonly FieldChange[]): Promise<void> {
    // Once the window's records are all in: one statement per window, not one per page.
    const { source, window, runId } = this.target;
    await this.o.derived.addWindowRollup(this.db, source, window, rollup);
    await this.o.derived.addWindowRecords(this.db, source, window, fields, this.o.log, changes && { runId, list: changes });
  }

  record(counts: WindowCounts): Promise<number | undefined> {
    return recordWindow(this.db, this.target, counts);
  }
}

/**
 * The window's records stream into COPYs as their pages come ({@link RecordsCopy}); its
 * quarantined records, and the records the database refused, are inserted after them.
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

  protected async store(): Promise<Omit<WindowStored, 'kept'>> {
    const copied = await this.#copying.end();
    if (copied.stored + copied.refused.length !== this.#sent) {
      throw new DatabaseError(`COPY into records stored ${copied.stored} rows and refused ${copied.refused.length} of the ${this.#sent} sent for the window`);
    }
    await insertQuarantined(this.db, this.target, [...this.#isolated, ...copied.refused]);
    return { records: copied.stored, refused: copied.refused };
  }
}

/**
 * Each page is one insert, pipelined: one page's insert runs in the database while the next pages
 * are fetched and prepared here. At most one insert is outstanding: it is awaited before the next
 * one is sent, so a failure surfaces before anything after it, and memory grows by one page. Each
 * insert runs under a savepoint: a page the database refuses for a data reason is rolled back to
 * it and inserted again in parts ({@link isolateRefused}), its refused records quarantined.
 */
class InsertWindowWriter extends PgWindowWriter {
  #inserting: { done: Promise<number>; onStored: (records: number) => void } | undefined;
  #stored = 0;
  readonly #refused: QuarantineRow[] = [];

  async write(rows: PageRows, quarantine: readonly QuarantineRow[], onStored: (records: number) => void): Promise<void> {
    const query = prepareInsertRecords(this.target, rows);
    const isolating = prepareInsertQuarantined(this.target, quarantine);
    await this.#settle();
    const done = (async () => {
      const stored = query === undefined ? 0 : await this.#insertPage(rows, query);
      if (isolating !== undefined) await this.db.query(isolating.text, isolating.values);
      return stored;
    })();
    done.catch(() => undefined); // awaited by #settle(); never an unhandled rejection meanwhile
    this.#inserting = { done, onStored };
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

  protected async store(): Promise<Omit<WindowStored, 'kept'>> {
    await this.#settle();
    await insertQuarantined(this.db, this.target, this.#refused);
    return { records: this.#stored, refused: this.#refused };
  }

  async #settle(): Promise<void> {
    if (this.#inserting === undefined) return;
    const { done, onStored } = this.#inserting;
    this.#inserting = undefined;
    const records = await done;
    this.#stored += records;
    onStored(records);
  }

  /** The page's insert under a savepoint; a data refusal isolated record by record. @returns the records stored. */
  async #insertPage(rows: PageRows, query: PreparedQuery): Promise<number> {
    await this.db.query('savepoint records_page');
    try {
      await this.db.query(query.text, query.values);
      return rows.keep.length;
    } catch (err) {
      if (dataRefusal(err) === undefined) throw err;
      await this.db.query('rollback to savepoint records_page');
      // The page's text as one jsonb may be what is refused: each part carries only its records' texts.
      const spans = 'text' in rows ? dataElementSpans(rows.text) : undefined;
      const recordText = (position: number): string =>
        'text' in rows ? rows.text.slice(spans![position]!.start, spans![position]!.end) : JSON.stringify(rows.records[position]);
      const kept = rows.keep.map((position, k) => ({ text: recordText(position), eventTime: rows.eventTimes[k] ?? null }));
      const isolated = await isolateRefused(kept, err, {
        attempt: async (part) => {
          const partRows: PageRows = {
            text: `{"data":[${part.map((r) => r.text).join(',')}]}`,
            keep: part.map((_, i) => i),
            eventTimes: part.map((r) => r.eventTime),
          };
          const insert = prepareInsertRecords(this.target, partRows)!;
          await this.db.query('savepoint records_part');
          try {
            await this.db.query(insert.text, insert.values);
          } catch (e) {
            await this.db.query('rollback to savepoint records_part');
            throw e;
          }
          await this.db.query('release savepoint records_part');
        },
      });
      for (const { row, refusal } of isolated.refused) this.#refused.push({ ...row, ...refusal });
      return isolated.stored;
    } finally {
      await this.db.query('release savepoint records_page').catch(() => undefined);
    }
  }
}

/** What retention needs of a connection (retention.ts), for the schema's tables: no source, no run. */
export function pgRetentionSession(db: PoolClient, tables: Tables): Pick<StoreSession, 'lock' | 'dropExpiredPartitions'> {
  return {
    lock: (name, options, fn) => withAdvisoryLock(db, name, options, fn),
    dropExpiredPartitions: (cutoff, runIds) => dropExpiredPartitions(db, tables, cutoff, runIds),
  };
}
