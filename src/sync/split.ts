/**
 * Splitting: how a window is cut by time into parts that E6 answers each in one page, so that no
 * record's membership depends on the order E6 returns records in (the reference promises none).
 *
 * Glossary
 * - part: a half-open range [start, end) inside a window, read with one E6 request at
 *   pageNumber 1. A response whose `totalRecords` fits in the page holds every record of the part
 *   whatever the order: a *leaf*. One that does not fit is an *overflow*: its records are not
 *   used, its `totalRecords` and the event times it sampled choose how to split the part.
 * - cut: a split point. Cuts lie on multiples of SYNC_MIN_SPLIT since the epoch (UTC), since the
 *   API's time resolution is not published; the default, whole seconds, matches the reference's
 *   date-time examples.
 * - instant: a part with no cut strictly inside it (at most SYNC_MIN_SPLIT long). When it holds
 *   more than a page it cannot be split; see reader.ts for how it is read (twice, compared).
 *
 * Nothing here is needed for exactness, only for the request count: any cuts give an exact
 * result, good cuts give one close to the minimum, ceil(records ÷ pageSize) per window.
 */
import type { Window } from './windows.js';

/**
 * Share of a page a planned part is sized to hold. Parts are sized from a count or an estimate,
 * assuming records spread evenly over time; the slack absorbs unevenness and estimation error
 * (an overflow costs one request more, and a split).
 */
export const PART_FILL = 0.9;

/**
 * A cell holding at least this share of an overflow's sampled records is cut out as a part of
 * its own: records bunched at one instant are isolated in one step instead of by repeated
 * splitting around them.
 */
export const HOT_CELL_SHARE = 0.5;

/** First multiple of `step` strictly after `ms`. */
function nextCut(ms: number, step: number): number {
  return (Math.floor(ms / step) + 1) * step;
}

/** Whether `range` has a cut strictly inside it, i.e. can be split at all. */
export function isSplittable(range: Window, minSplitMs: number): boolean {
  return nextCut(range.start, minSplitMs) < range.end;
}

/** Parts needed for `records`, each sized to {@link PART_FILL} of a page; at least 1. */
export function partsFor(records: number, pageSize: number): number {
  return Math.max(1, Math.ceil(records / (pageSize * PART_FILL)));
}

/**
 * Cuts `range` into about `parts` parts of equal length, plus cuts around hot cells, every cut on
 * a multiple of `minSplitMs` strictly inside the range.
 *
 * @param range the part or window to split (ms since the epoch, half-open).
 * @param parts wanted number of equal parts, ≥ 1; fewer come back when the range has fewer cells.
 * @param minSplitMs SYNC_MIN_SPLIT in milliseconds, > 0.
 * @param hot start instants of cells (multiples of `minSplitMs`) to isolate as parts of their own.
 * @returns disjoint parts in time order covering `range` exactly; `[range]` when it cannot be split.
 */
export function splitRange(range: Window, parts: number, minSplitMs: number, hot: readonly number[] = []): Window[] {
  const cuts = new Set<number>();
  const length = range.end - range.start;
  for (let i = 1; i < parts; i++) {
    const ideal = range.start + (length * i) / parts;
    const cut = Math.round(ideal / minSplitMs) * minSplitMs;
    if (cut > range.start && cut < range.end) cuts.add(cut);
  }
  for (const cell of hot) {
    for (const cut of [cell, cell + minSplitMs]) if (cut > range.start && cut < range.end) cuts.add(cut);
    if (cell >= range.end) {
      // Records at the end itself (an inclusive toDate) belong to the next part but still fill this
      // one's answers: cut the last cell off, so only it has to be read with them.
      const last = Math.floor((range.end - 1) / minSplitMs) * minSplitMs;
      if (last > range.start) cuts.add(last);
    }
  }
  if (cuts.size === 0 && parts > 1) {
    // Rounding put every cut on an edge: take the first cut inside, if there is one.
    const cut = nextCut(range.start, minSplitMs);
    if (cut < range.end) cuts.add(cut);
  }
  return partsBetween(range, cuts);
}

/** The parts of `range` between `cuts` (each strictly inside it; any order, repeats allowed). */
function partsBetween(range: Window, cuts: Iterable<number>): Window[] {
  const sorted = [...new Set(cuts)].sort((a, b) => a - b);
  const out: Window[] = [];
  let start = range.start;
  for (const cut of sorted) {
    out.push({ start, end: cut });
    start = cut;
  }
  out.push({ start, end: range.end });
  return out;
}

/**
 * Chooses how to split a part that overflowed: into {@link partsFor} `totalRecords` parts of equal
 * length, with every cell that holds at least {@link HOT_CELL_SHARE} of the sampled event times
 * cut out on its own. The sample is whatever page 1 happened to return; it only steers the cuts.
 *
 * @param sampleTimes event times (ms) of the records the overflow response carried; may be empty.
 * @returns parts as {@link splitRange}; `[part]` when the part is an instant.
 */
export function splitOverflow(part: Window, totalRecords: number, pageSize: number, minSplitMs: number, sampleTimes: readonly number[]): Window[] {
  if (!isSplittable(part, minSplitMs)) return [part];
  const hot: number[] = [];
  if (sampleTimes.length > 0) {
    const counts = new Map<number, number>();
    for (const ms of sampleTimes) {
      const cell = Math.floor(ms / minSplitMs) * minSplitMs;
      counts.set(cell, (counts.get(cell) ?? 0) + 1);
    }
    const threshold = Math.max(2, sampleTimes.length * HOT_CELL_SHARE);
    for (const [cell, count] of counts) if (count >= threshold) hot.push(cell);
  }
  return splitRange(part, partsFor(totalRecords, pageSize), minSplitMs, hot);
}

/** How a window's records were spread over it: each leaf's range (relative to the window start) and count. */
interface Profile {
  /** Window length, ms. */
  length: number;
  /** Disjoint, in time order; offsets in ms from the window start. */
  cells: { start: number; end: number; records: number }[];
  records: number;
}

/**
 * Plans a window's first parts before reading it, from what is known: its count in the ledger (an
 * earlier run read it), else the latest rate seen (records per millisecond of a window read in this
 * run, or of the last window of an earlier run); and where in the window records fall, from how the
 * last window of the same length spread its records over its leaves (a daily or hourly rhythm
 * repeats), else evenly.
 */
export class RecordEstimate {
  readonly #known = new Map<string, number>();
  #rate: number | undefined;
  #profile: Profile | undefined;

  /**
   * @param ledger committed windows with their `totalRecords`, as earlier runs stored them; the
   *   latest one seeds the rate.
   */
  constructor(ledger: readonly (Window & { totalRecords: number })[] = []) {
    let latest: (Window & { totalRecords: number }) | undefined;
    for (const w of ledger) {
      this.#known.set(`${w.start}:${w.end}`, w.totalRecords);
      if (latest === undefined || w.end > latest.end) latest = w;
    }
    if (latest !== undefined) this.observe(latest, latest.totalRecords);
  }

  /**
   * Notes that `window` held `records` (after it was read), and, when given, how its leaves held them.
   *
   * @param leaves the window's leaf parts (absolute ms) and the records E6 returned for each.
   */
  observe(window: Window, records: number, leaves: readonly { part: Window; records: number }[] = []): void {
    const length = window.end - window.start;
    if (length <= 0) return;
    this.#rate = records / length;
    if (leaves.length > 1 && records > 0) {
      const byStart = new Map<number, { start: number; end: number; records: number }>();
      for (const leaf of leaves) {
        const start = leaf.part.start - window.start;
        const cell = byStart.get(start) ?? { start, end: leaf.part.end - window.start, records: 0 };
        cell.records += leaf.records;
        byStart.set(start, cell);
      }
      this.#profile = { length, cells: [...byStart.values()].sort((a, b) => a.start - b.start), records };
    }
  }

  /**
   * Whether {@link plan} has what it needs for `window`: an expected count, and where in the window
   * records fall when more than one part is needed. A reader that can wait for a window being read
   * (it will tell) plans better than one that cuts blind.
   */
  ready(window: Window, pageSize: number): boolean {
    const expected = this.estimate(window);
    if (expected === undefined) return false;
    if (expected <= pageSize * PART_FILL) return true;
    return this.#profile !== undefined && this.#profile.length === window.end - window.start;
  }

  /**
   * @returns the expected record count of `window`, or undefined when nothing is known yet.
   */
  estimate(window: Window): number | undefined {
    const known = this.#known.get(`${window.start}:${window.end}`);
    if (known !== undefined) return known;
    return this.#rate === undefined ? undefined : this.#rate * (window.end - window.start);
  }

  /**
   * The parts to read `window` in first: one when it is expected to fit in a page (or nothing is
   * known), else {@link partsFor} parts holding about as many records each, by the profile of the
   * last window of the same length, or of equal length when there is none.
   *
   * @returns disjoint parts in time order covering `window`, cut on multiples of `minSplitMs`.
   */
  plan(window: Window, pageSize: number, minSplitMs: number): Window[] {
    const expected = this.estimate(window);
    if (expected === undefined || expected <= pageSize * PART_FILL) return [window];
    const parts = partsFor(expected, pageSize);
    const profile = this.#profile;
    if (profile === undefined || profile.length !== window.end - window.start) return splitRange(window, parts, minSplitMs);
    // Cuts where the profile's cumulative count crosses each k/parts of its records, assuming
    // records spread evenly inside each of its cells.
    const cuts: number[] = [];
    const share = profile.records / parts;
    let before = 0;
    let next = share;
    for (const cell of profile.cells) {
      while (next < before + cell.records && cuts.length < parts - 1) {
        const offset = cell.start + ((next - before) / cell.records) * (cell.end - cell.start);
        cuts.push(Math.round((window.start + offset) / minSplitMs) * minSplitMs);
        next += share;
      }
      before += cell.records;
    }
    const inside = cuts.filter((c) => c > window.start && c < window.end);
    return inside.length === 0 ? splitRange(window, parts, minSplitMs) : partsBetween(window, inside);
  }
}
