/**
 * Isolating the rows a database refuses out of a batch it refused whole: the batch is loaded
 * again in parts, each part under its own savepoint (the caller's `attempt`), a part refused for
 * a data reason (src/db/refusal.ts) is split further, and a single row refused is handed back to
 * be quarantined; the rows of every part accepted stay loaded. Pure: the database is the
 * caller's (records-copy.ts).
 */
import { dataRefusal, type DataRefusal } from '../../../db/refusal.js';

/** How {@link isolateRefused} loads a part and reads a refusal. */
export interface Isolation<R> {
  /**
   * Loads `rows` (a part of the batch, in order) in one statement under a savepoint of its own:
   * resolves once they are stored; throws the database's error after rolling back to the
   * savepoint, so the transaction goes on without them.
   */
  attempt(rows: readonly R[]): Promise<void>;
  /**
   * Where in the rows of a refused attempt the database says it stopped, from 0, when it says so
   * (COPY names the line): the rows before it are then loaded as one part and that row tried
   * alone, instead of halving. A wrong answer costs attempts, never rows.
   */
  position?(err: unknown, rows: number): number | undefined;
}

/** What {@link isolateRefused} did. */
export interface Isolated<R> {
  /** Rows stored. */
  stored: number;
  /** Rows the database refused alone, each with its refusal, in order. */
  refused: { row: R; refusal: DataRefusal }[];
  /** Statements sent (attempts, the batch's first failure not counted). */
  attempts: number;
}

/**
 * Loads `rows`, which the database refused whole with `failure`, part by part: a part refused for
 * a data reason is split (at the row the database named, else in halves) until single rows are
 * refused; any other error of an attempt is thrown as it is (the window fails).
 *
 * @param failure the error of loading `rows` whole; must be a data refusal ({@link dataRefusal}).
 * @throws `failure` when it is no data refusal; an attempt's error that is none.
 */
export async function isolateRefused<R>(rows: readonly R[], failure: unknown, how: Isolation<R>): Promise<Isolated<R>> {
  const result: Isolated<R> = { stored: 0, refused: [], attempts: 0 };
  // Parts still to load, the next one last: loaded in the rows' order.
  const parts: [number, number, unknown][] = [[0, rows.length, failure]];
  while (parts.length > 0) {
    const [lo, hi, known] = parts.pop()!;
    if (lo >= hi) continue;
    let err = known;
    if (err === undefined) {
      result.attempts++;
      try {
        await how.attempt(rows.slice(lo, hi));
        result.stored += hi - lo;
        continue;
      } catch (e) {
        err = e;
      }
    }
    const refusal = dataRefusal(err);
    if (refusal === undefined) throw err;
    if (hi - lo === 1) {
      result.refused.push({ row: rows[lo]!, refusal });
      continue;
    }
    const at = how.position?.(err, hi - lo);
    if (at !== undefined && at >= 0 && at < hi - lo) {
      // The rows before the one named were taken; that one is tried alone, the rest after it.
      parts.push([lo + at + 1, hi, undefined], [lo + at, lo + at + 1, undefined], [lo, lo + at, undefined]);
    } else {
      const mid = lo + Math.floor((hi - lo) / 2);
      parts.push([mid, hi, undefined], [lo, mid, undefined]);
    }
  }
  return result;
}
