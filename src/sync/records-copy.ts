/**
 * One window's records streamed into `records` with `COPY … FROM STDIN`, the rows built by
 * {@link CopyRows} (a PostgreSQL server only: store.ts, supportsCopyFromStdin).
 */
import { once } from 'node:events';
import { finished } from 'node:stream/promises';
import { from as copyFrom, type CopyStreamQuery } from 'pg-copy-streams';
import type { PoolClient } from '../db/pool.js';
import { CopyRows } from './copy-rows.js';
import type { PageRows } from './page-rows.js';
import type { WindowTarget } from './store.js';

/**
 * One window's records streamed into `records` with `COPY … FROM STDIN` (text format) in the
 * caller's transaction: each page's rows are written as the page comes, and PostgreSQL parses and
 * inserts them meanwhile (COPY batches its heap inserts, which an insert … select does row by row).
 * Each payload is the record's exact JSON text from the E6 body (its span, upstream/page-text.ts dataElementByteSpans),
 * which jsonb parses exactly as it parses the record inside the whole body: stored rows are those
 * store.ts prepareInsertRecords stores. The connection serves nothing else until {@link end} or
 * {@link abort}. A PostgreSQL server only (store.ts supportsCopyFromStdin).
 */
export class RecordsCopy {
  private stream: CopyStreamQuery | undefined;
  private failure: Error | undefined;
  private readonly rows: CopyRows;

  constructor(
    private readonly db: PoolClient,
    private readonly target: WindowTarget,
  ) {
    this.rows = new CopyRows(target.source, target.window, target.runId);
  }

  /**
   * Writes the page's kept records; resolves when the connection takes more (at most about a page
   * waits in memory).
   *
   * @throws {InvalidArgumentError} when the page's text holds no `data` array covering its kept
   *   positions; the COPY's error (a missing partition, a payload jsonb refuses).
   */
  async write(page: PageRows): Promise<void> {
    if (this.failure !== undefined) throw this.failure;
    if (page.keep.length === 0) return;
    const rows = this.rows.of(page);
    this.stream ??= this.open();
    if (!this.stream.write(rows)) await once(this.stream, 'drain');
  }

  /**
   * Ends the COPY and waits for PostgreSQL to have stored every row.
   *
   * @returns the rows it stored.
   * @throws the COPY's error.
   */
  async end(): Promise<number> {
    if (this.failure !== undefined) throw this.failure;
    if (this.stream === undefined) return 0;
    this.stream.end();
    await finished(this.stream);
    return this.stream.rowCount;
  }

  /**
   * Cancels an unfinished COPY (CopyFail: PostgreSQL discards its rows, and the transaction can
   * roll back), and waits until the connection is free. Never throws.
   *
   * @returns the COPY's own error when it failed before (it is the earlier failure), else undefined.
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
    return failed;
  }

  private open(): CopyStreamQuery {
    const stream = this.db.query(copyFrom(`copy ${this.target.t.records} (source, payload, event_time, window_start, window_end, run_id) from stdin`));
    // Kept for write/end; listening also keeps a failure from being an unhandled 'error' event.
    stream.on('error', (err: Error) => {
      this.failure ??= err;
    });
    return stream;
  }
}
