/**
 * Isolating the rows a database refuses out of a batch it refused whole, by loading it again in
 * smaller and smaller pieces; the database is the caller's. Design: docs/design/sync-run.md.
 */
import { dataRefusal, type DataRefusal } from '../../../db/refusal.js';

export interface Isolation<R> {
  /** Loads `rows` in one statement under its own savepoint; throws the database's error after rolling back to it. */
  attempt(rows: readonly R[]): Promise<void>;
  /** The row (from 0) a refused attempt names (COPY names the line); a wrong answer costs attempts, never rows. */
  position?(err: unknown, rows: number): number | undefined;
}

export interface Isolated<R> {
  stored: number;
  /** Refused alone, in order. */
  refused: { row: R; refusal: DataRefusal }[];
  /** Statements sent, the first failure not counted. */
  attempts: number;
}

/**
 * Loads `rows`, refused whole with `failure`, splitting a refused piece at the row the database
 * named, else in halves, down to single rows.
 * @throws `failure` or an attempt's error when it is no data refusal.
 */
export async function isolateRefused<R>(rows: readonly R[], failure: unknown, how: Isolation<R>): Promise<Isolated<R>> {
  const result: Isolated<R> = { stored: 0, refused: [], attempts: 0 };
  // Batches still to load, the next one last: loaded in the rows' order.
  const batches: [number, number, unknown][] = [[0, rows.length, failure]];
  while (batches.length > 0) {
    const [lo, hi, known] = batches.pop()!;
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
      batches.push([lo + at + 1, hi, undefined], [lo + at, lo + at + 1, undefined], [lo, lo + at, undefined]);
    } else {
      const mid = lo + Math.floor((hi - lo) / 2);
      batches.push([mid, hi, undefined], [lo, mid, undefined]);
    }
  }
  return result;
}
