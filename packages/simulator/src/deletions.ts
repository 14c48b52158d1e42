/**
 * Records deleted upstream (`POST /admin/delete`, `Simulator.deleteRecords`): the generated data
 * cannot forget a record, so a deletion is kept beside it and subtracted from every E6 and E7
 * answer.
 *
 * A record is named by its instant and its tie index, its place among the records of that
 * instant in merged order. The tie index never changes: records inserted later at the same
 * instant go after the ones already there.
 */
import type { AnalyticsRecord } from './records.js';

/** One record of the data, as the record view handles it. */
export interface RecordEntry {
  /** The record's JSON text, as E6 serves it without out-of-range numbers. */
  json: string;
  /** Its `timestamp` in milliseconds since the epoch. */
  ms: number;
  /** Its index among the records of instant `ms`, in merged order (0-based). */
  tie: number;
}

/** A range of instants: `fromMs` inclusive, `toMs` inclusive or not; ±Infinity = unbounded. */
export interface MsRange {
  fromMs: number;
  toMs: number;
  toInclusive: boolean;
}

/**
 * What to delete: the given records (each removes one record equal to it, fields compared
 * whatever their order), or `count` records spread evenly over those whose `timestamp` lies in
 * `[from, to]` (fewer when the range holds fewer).
 */
export type DeleteSelection = { records: readonly AnalyticsRecord[] } | { from: Date; to: Date; count: number };

/** The deleted records, sorted by (ms, tie). */
export class Deletions {
  #list: RecordEntry[] = [];

  get size(): number {
    return this.#list.length;
  }

  /** First index whose (ms, tie) is at least the given one (`strict`: greater than it). */
  #bound(ms: number, tie: number, strict: boolean): number {
    let lo = 0;
    let hi = this.#list.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      const e = this.#list[mid]!;
      const cmp = e.ms - ms || e.tie - tie;
      if (strict ? cmp > 0 : cmp >= 0) hi = mid;
      else lo = mid + 1;
    }
    return lo;
  }

  has(ms: number, tie: number): boolean {
    const e = this.#list[this.#bound(ms, tie, false)];
    return e !== undefined && e.ms === ms && e.tie === tie;
  }

  /** Adds deleted records; one already deleted is ignored. */
  add(entries: readonly RecordEntry[]): void {
    for (const entry of entries) {
      if (!this.has(entry.ms, entry.tie)) this.#list.splice(this.#bound(entry.ms, entry.tie, false), 0, entry);
    }
  }

  /** The deleted records whose instant lies in a range, in (ms, tie) order. O(log D) plus the answer. */
  inRange(range: MsRange): RecordEntry[] {
    const a = this.#bound(range.fromMs, -Infinity, false);
    const b = this.#bound(range.toMs, range.toInclusive ? Infinity : -Infinity, false);
    return b > a ? this.#list.slice(a, b) : [];
  }
}
