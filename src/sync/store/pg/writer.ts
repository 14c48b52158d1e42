/**
 * A window's writes in PostgreSQL, inside its transaction: cleared (SYNC_SHRINK=keep sets the old
 * rows aside: keep.ts), pages streamed by COPY (a server) or inserted page by page (the embedded
 * database), the keep union, the derived tables, the ledger. Data refusals are isolated
 * (isolate.ts) and quarantined. Design: docs/design/sync-run.md.
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

interface WriterOptions {
  derived: Derived;
  ledger: PgLedger;
  log: Logger;
}

/** What both writers share: the clearing, the keep union, the derived tables, the ledger. */
abstract class PgWindowWriter implements WindowWriter {
  #keep: KeepUnion | undefined;

  constructor(
    protected readonly db: PoolClient,
    protected readonly target: WindowTarget,
    protected readonly o: WriterOptions,
  ) {}

  async clear(keep = false): Promise<number> {
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

  protected abstract store(): Promise<Omit<WindowStored, 'kept'>>;

  async addDerived(rollup: RollupCounts, fields: WindowFields, changes?: readonly FieldChange[]): Promise<void> {
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
 * Each page one insert, pipelined, at most one outstanding (a failure surfaces before anything after
 * it); each under a savepoint, a data refusal isolated in batches.
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

  /** @returns the records stored. */
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
