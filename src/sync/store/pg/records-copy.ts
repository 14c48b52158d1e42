/**
 * One window's records streamed into `records` with `COPY … FROM STDIN` (a PostgreSQL server only),
 * in chunks under savepoints, so the records the database refuses for a data reason are isolated
 * and handed back to be quarantined while the rest loads. Design: docs/design/sync-run.md.
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

/** Bytes of COPY rows under one savepoint, held until stored (why 16 MiB: docs/design/sync-run.md). */
const COPY_CHUNK_BYTES = 16 * 1024 * 1024;

/** The record's text as E6 sent it; `eventTime` in ms. */
export interface RefusedRecord extends DataRefusal {
  text: string;
  eventTime: number | null;
}

export interface CopyStored {
  stored: number;
  refused: RefusedRecord[];
}

/**
 * In the caller's transaction, text format, each payload the record's exact text from the E6 body.
 * The connection serves nothing else until {@link end} or {@link abort}.
 */
export class RecordsCopy {
  private stream: CopyStreamQuery | undefined;
  private failure: Error | undefined;
  private readonly rows: CopyRows;
  private chunk: Buffer[] = [];
  private chunkBytes = 0;
  private stored = 0;
  private readonly refused: RefusedRecord[] = [];

  constructor(
    private readonly db: PoolClient,
    private readonly target: WindowTarget,
  ) {
    this.rows = new CopyRows(target.source, target.window);
  }

  /**
   * Resolves when the connection takes more (about a page waits besides the chunk held).
   * @throws {InvalidArgumentError} when the page's text holds no `data` array covering its kept
   *   positions; the COPY's error when it is no data refusal.
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
      // A failure meanwhile lands in this.failure, for the next write or end.
      await once(this.stream, 'drain').catch(() => undefined);
    }
  }

  /** Ends the COPY once PostgreSQL stored every row it takes. @throws the COPY's error when it is no data refusal. */
  async end(): Promise<CopyStored> {
    await this.finishChunk();
    return { stored: this.stored, refused: this.refused };
  }

  /** Cancels an unfinished COPY (CopyFail) and waits for the connection. Never throws. @returns the COPY's own earlier non-data failure. */
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

  private async finishChunk(): Promise<void> {
    const stream = this.stream;
    if (stream === undefined) return;
    const rows = this.chunk;
    this.stream = undefined;
    this.chunk = [];
    this.chunkBytes = 0;
    let failure = this.failure;
    if (failure === undefined) {
      // write() waited for 'drain', so CopyDone goes out at once.
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
        attempt: (batch) => this.copyBatch(batch),
        position: copyLinePosition,
      });
      this.stored += isolated.stored;
      for (const { row, refusal } of isolated.refused) this.refused.push({ ...copyRowRecord(row), ...refusal });
    }
    await this.db.query('release savepoint records_copy');
  }

  private async copyBatch(lines: readonly Buffer[]): Promise<void> {
    await this.db.query('savepoint records_batch');
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
      await this.db.query('rollback to savepoint records_batch');
      throw failure;
    }
    await this.db.query('release savepoint records_batch');
  }

  /** A COPY into records; `main`: the chunk's, whose failure {@link failure} keeps. */
  private open(main: boolean): CopyStreamQuery {
    const stream = this.db.query(copyFrom(`copy ${this.target.t.records} (source, payload, event_time, window_start) from stdin`));
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
