/**
 * One window's records streamed into `records` with `COPY … FROM STDIN`, the rows built by
 * {@link CopyRows} (a PostgreSQL server only: store.ts, supportsCopyFromStdin), under savepoints
 * so that the records the database refuses for a data reason are isolated and handed back to be
 * quarantined while the rest of the window loads.
 */
import { once } from 'node:events';
import { finished } from 'node:stream/promises';
import { from as copyFrom, type CopyStreamQuery } from 'pg-copy-streams';
import type { PoolClient } from '../../../db/pool.js';
import { dataRefusal, type DataRefusal } from '../../../db/refusal.js';
import { CopyRows, copyLines, copyRowRecord } from '../../rows/copy-rows.js';
import { isolateRefused } from './isolate.js';
import type { PageRows } from '../../rows/page-rows.js';
import type { WindowTarget } from './tables.js';

/**
 * Bytes of COPY rows sent under one savepoint before it is released and the next one taken: the
 * rows of a chunk are held until it is stored, so that a refused chunk can be loaded again in
 * parts. A day of the benchmark's records (about 8 MB) is one chunk. 4 MiB chunks (half such a
 * day held, not all of it) lowered a 1,000,000-record sync's peak RSS by 5–7 MiB (medians 155.6
 * against 160.8 MiB in 9 interleaved pairs, 156.7 against 164.1 in 4 more) but its CPU time rose by
 * 0.19 s on average (pairs −0.72 to +1.17 s, 9 of 13 higher), so the chunk stays at 16 MiB.
 */
export const COPY_CHUNK_BYTES = 16 * 1024 * 1024;

/** A record the database refused, with its refusal: the record's text as E6 sent it and its event time (ms, or null). */
export interface RefusedRecord extends DataRefusal {
  text: string;
  eventTime: number | null;
}

/** What a window's COPY stored: the records stored and those refused (see {@link RecordsCopy.end}). */
export interface CopyStored {
  stored: number;
  refused: RefusedRecord[];
}

/**
 * One window's records streamed into `records` with `COPY … FROM STDIN` (text format) in the
 * caller's transaction: each page's rows are written as the page comes, and PostgreSQL parses and
 * inserts them meanwhile (COPY batches its heap inserts, which an insert … select does row by row).
 * Each payload is the record's exact JSON text from the E6 body (its span, upstream/page-text.ts pageByteSpans),
 * which jsonb parses exactly as it parses the record inside the whole body: stored rows are those
 * store.ts prepareInsertRecords stores. The connection serves nothing else until {@link end} or
 * {@link abort}. A PostgreSQL server only (store.ts supportsCopyFromStdin).
 *
 * The rows go in chunks of at most about {@link COPY_CHUNK_BYTES}, one COPY and one savepoint
 * each: the fast path costs a savepoint and its release per chunk. A chunk the database refuses
 * for a data reason (src/db/refusal.ts) is rolled back to its savepoint and loaded again in parts
 * ({@link isolateRefused}): the records refused alone are kept with the SQLSTATE and message.
 */
export class RecordsCopy {
  private stream: CopyStreamQuery | undefined;
  private failure: Error | undefined;
  private readonly rows: CopyRows;
  /** The rows of the chunk being copied, held until it is stored. */
  private chunk: Buffer[] = [];
  private chunkBytes = 0;
  private stored = 0;
  private readonly refused: RefusedRecord[] = [];

  constructor(
    private readonly db: PoolClient,
    private readonly target: WindowTarget,
  ) {
    this.rows = new CopyRows(target.source, target.window, target.runId);
  }

  /**
   * Writes the page's kept records; resolves when the connection takes more (at most about a page
   * waits in memory besides the chunk held).
   *
   * @throws {InvalidArgumentError} when the page's text holds no `data` array covering its kept
   *   positions; the COPY's error when it is no data refusal (a missing partition, the connection lost).
   */
  async write(page: PageRows): Promise<void> {
    if (page.keep.length === 0) return;
    const rows = this.rows.of(page);
    if (this.failure !== undefined || this.chunkBytes >= COPY_CHUNK_BYTES) await this.finishChunk();
    if (this.stream === undefined) {
      await this.db.query('savepoint records_copy');
      this.stream = this.open(true);
    }
    this.chunk.push(rows);
    this.chunkBytes += rows.length;
    if (!this.stream.write(rows)) {
      // A failure meanwhile is this.failure: the next write or end handles it.
      await once(this.stream, 'drain').catch(() => undefined);
    }
  }

  /**
   * Ends the COPY and waits for PostgreSQL to have stored every row it takes.
   *
   * @returns the rows stored and the records refused for a data reason.
   * @throws the COPY's error when it is no data refusal.
   */
  async end(): Promise<CopyStored> {
    await this.finishChunk();
    return { stored: this.stored, refused: this.refused };
  }

  /**
   * Cancels an unfinished COPY (CopyFail: PostgreSQL discards its rows, and the transaction can
   * roll back), and waits until the connection is free. Never throws.
   *
   * @returns the COPY's own error when it failed before for another reason than the data (it is
   *   the earlier failure), else undefined.
   */
  async abort(reason: Error): Promise<Error | undefined> {
    const failed = this.failure;
    const stream = this.stream;
    // A COPY that already failed has no connection left to send CopyFail on (pg-copy-streams drops
    // it with the error), and would never report the cancel done: waiting for it would hang.
    if (stream !== undefined && failed === undefined && !stream.destroyed && !stream.writableFinished) {
      stream.destroy(reason);
      await finished(stream).catch(() => undefined);
    }
    return failed !== undefined && dataRefusal(failed) === undefined ? failed : undefined;
  }

  /** Ends the chunk's COPY; a data refusal is isolated, the savepoint released. */
  private async finishChunk(): Promise<void> {
    const stream = this.stream;
    if (stream === undefined) return;
    const rows = this.chunk;
    this.stream = undefined;
    this.chunk = [];
    this.chunkBytes = 0;
    let failure = this.failure;
    if (failure === undefined) {
      // Never ended while the socket is full (write waited for 'drain'): CopyDone goes out at once.
      stream.end();
      await finished(stream).catch((err: Error) => (failure = this.failure ?? err));
    }
    this.failure = undefined;
    if (failure === undefined) {
      this.stored += stream.rowCount;
    } else {
      if (dataRefusal(failure) === undefined) throw failure;
      await this.db.query('rollback to savepoint records_copy');
      const isolated = await isolateRefused(copyLines(rows), failure, {
        attempt: (part) => this.copyPart(part),
        position: copyLinePosition,
      });
      this.stored += isolated.stored;
      for (const { row, refusal } of isolated.refused) this.refused.push({ ...copyRowRecord(row), ...refusal });
    }
    await this.db.query('release savepoint records_copy');
  }

  /** One COPY of `lines` under a savepoint of its own, rolled back to it when the COPY fails. */
  private async copyPart(lines: readonly Buffer[]): Promise<void> {
    await this.db.query('savepoint records_part');
    const stream = this.open(false);
    let failure: Error | undefined;
    stream.on('error', (err: Error) => (failure ??= err));
    const bytes = Buffer.concat(lines.flatMap((line) => [line, NEWLINE]));
    if (!stream.write(bytes)) await once(stream, 'drain').catch(() => undefined);
    if (failure === undefined) {
      stream.end();
      await finished(stream).catch((err: Error) => (failure ??= err));
    }
    if (failure !== undefined) {
      await this.db.query('rollback to savepoint records_part');
      throw failure;
    }
    await this.db.query('release savepoint records_part');
  }

  /** A COPY into records; `main`: the chunk's, whose failure {@link failure} keeps. */
  private open(main: boolean): CopyStreamQuery {
    const stream = this.db.query(copyFrom(`copy ${this.target.t.records} (source, payload, event_time, window_start, run_id) from stdin`));
    // Listening also keeps a failure from being an unhandled 'error' event.
    stream.on('error', (err: Error) => {
      if (main) this.failure ??= err;
      // pg-copy-streams drops the connection with the error; rows it still held for the socket
      // would be flushed to that null connection on the socket's next 'drain' and throw there.
      (stream as unknown as { chunks: unknown[] }).chunks = [];
    });
    return stream;
  }
}

const NEWLINE = Buffer.from('\n');

/** The row (from 0) a COPY error names: `COPY records, line N…` in its context (pg's `where`). */
function copyLinePosition(err: unknown, rows: number): number | undefined {
  const where = (err as { where?: unknown }).where;
  const line = typeof where === 'string' ? /\bline (\d+)/.exec(where) : null;
  const at = line === null ? undefined : Number(line[1]) - 1;
  return at !== undefined && at < rows ? at : undefined;
}
