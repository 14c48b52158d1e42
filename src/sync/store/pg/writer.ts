/**
 * A window's writes in PostgreSQL, inside its transaction: cleared first (SYNC_SHRINK=keep sets
 * the old rows aside: keep.ts), then pages streamed by COPY (a server) or inserted page by page
 * (the embedded database), then the keep union, the derived tables and the ledger. Records the
 * database refuses for a data reason are isolated in batches (isolate.ts) and quarantined.
 */
import type { PoolClient } from '../../../db/pool.js';
import { dataRefusal } from '../../../db/refusal.js';
import { DatabaseError } from '../../../errors.js';
import type { Logger } from '../../../log.js';
import { dataElementSpans } from '../../../upstream/page-text.js';
import type { Derived } from '../../derived/index.js';
import type { WindowFields } from '../../derived/fields/catalogue.js';
import type { FieldChange } from '../../derived/fields/schema-changes.js';
import type { RollupCounts } from '../../derived/rollup/counts.js';
import type { PageRows, QuarantineRow } from '../../rows/page-rows.js';
import type { WindowCounts, WindowStored, WindowWriter } from '../ports.js';
import { isolateRefused } from './isolate.js';
import { KeepUnion } from './keep.js';
import type { PgLedger } from './ledger.js';
import { deleteQuarantined, insertQuarantined, prepareInsertQuarantined, prepareInsertRecords, type PreparedQuery } from './records.js';
import { RecordsCopy } from './records-copy.js';
import type { WindowTarget } from './tables.js';

/** What a window's writer works with besides its connection and target. */
export interface WriterOptions {
  derived: Derived;
  ledger: PgLedger;
  /** The source's logger, for what the derived tables log. */
  log: Logger;
}

/** The writes of a window both writers share: clearing it first, the keep union, the derived tables and the ledger last. */
abstract class PgWindowWriter implements WindowWriter {
  #keep: KeepUnion | undefined;

  constructor(
    protected readonly db: PoolClient,
    protected readonly target: WindowTarget,
    protected readonly o: WriterOptions,
  ) {}

  async clear(keep = false): Promise<number> {
    // The derived tables delete the records in the same statement as their own rows of the windows.
    const union = keep ? new KeepUnion(this.db, this.target, () => this.o.derived.restoreWindowSql()) : undefined;
    await union?.prepare();
    const { source, window } = this.target;
    const deleted = await this.o.derived.deleteWindowRecords(this.db, source, window, union && KeepUnion.saveRecordsSql());
    const quarantined = union ? await union.setQuarantineAside() : await deleteQuarantined(this.db, this.target);
    await this.o.ledger.clearWindows(window);
    // A window loaded for the first time has nothing to keep: no union to compute at its end.
    this.#keep = deleted + quarantined > 0 ? union : undefined;
    return deleted;
  }

  abstract write(rows: PageRows, quarantine: readonly QuarantineRow[], onStored: (records: number) => void): Promise<void>;
  abstract abort(reason: Error): Promise<Error | undefined>;

  async end(owned: readonly string[] = []): Promise<WindowStored> {
    const stored = await this.store();
    const kept = this.#keep ? await this.#keep.restore(owned) : { records: 0, quarantined: 0 };
    return { ...stored, kept };
  }

  /** Waits until every page written is stored, the records refused quarantined. */
  protected abstract store(): Promise<Omit<WindowStored, 'kept'>>;

  async addDerived(rollup: RollupCounts, fields: WindowFields, changes?: readonly FieldChange[]): Promise<void> {
    // Once the window's records are all in: one statement per window, not one per page.
    const { source, window, runId } = this.target;
    await this.o.derived.commitWindow(this.db, { source, window, runId, rollup, fields, changes, log: this.o.log });
  }

  record(counts: WindowCounts): Promise<number | undefined> {
    return this.o.ledger.recordWindow(this.target.window, this.target.runId, counts);
  }
}

/**
 * The window's records stream into COPYs as their pages come ({@link RecordsCopy}); its
 * quarantined records, and the records the database refused, are inserted after them.
 */
export class CopyWindowWriter extends PgWindowWriter {
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
 * it and inserted again in batches ({@link isolateRefused}), its refused records quarantined.
 */
export class InsertWindowWriter extends PgWindowWriter {
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
      // The page's text as one jsonb may be what is refused: each batch carries only its records' texts.
      const spans = 'text' in rows ? dataElementSpans(rows.text) : undefined;
      const recordText = (position: number): string =>
        'text' in rows ? rows.text.slice(spans![position]!.start, spans![position]!.end) : JSON.stringify(rows.records[position]);
      const kept = rows.keep.map((position, k) => ({ text: recordText(position), eventTime: rows.eventTimes[k] ?? null }));
      const isolated = await isolateRefused(kept, err, {
        attempt: async (batch) => {
          const batchRows: PageRows = {
            text: `{"data":[${batch.map((r) => r.text).join(',')}]}`,
            keep: batch.map((_, i) => i),
            eventTimes: batch.map((r) => r.eventTime),
          };
          const insert = prepareInsertRecords(this.target, batchRows)!;
          await this.db.query('savepoint records_batch');
          try {
            await this.db.query(insert.text, insert.values);
          } catch (e) {
            await this.db.query('rollback to savepoint records_batch');
            throw e;
          }
          await this.db.query('release savepoint records_batch');
        },
      });
      for (const { row, refusal } of isolated.refused) this.#refused.push({ ...row, ...refusal });
      return isolated.stored;
    } finally {
      await this.db.query('release savepoint records_page').catch(() => undefined);
    }
  }
}
