/**
 * Splitting: how a window is cut by time into slices that E6 answers each in one page, so that no
 * record's membership depends on the order E6 returns records in (the reference promises none).
 *
 * Glossary
 * - slice: a half-open range [start, end) inside a window, read with one E6 request at
 *   pageNumber 1. A response whose `totalRecords` fits in the page holds every record of the slice
 *   whatever the order: a *leaf*. One that does not fit is an *overflow*: its records are not
 *   used, its `totalRecords` and the event times it sampled choose how to split the slice.
 * - cut: a split point. Cuts lie on multiples of SYNC_MIN_SPLIT since the epoch (UTC), since the
 *   API's time resolution is not published; the default, whole seconds, matches the reference's
 *   date-time examples.
 * - instant: a slice with no cut strictly inside it (at most SYNC_MIN_SPLIT long). When it holds
 *   more than a page it cannot be split; see reader.ts for how it is read (twice, compared).
 *
 * Nothing here is needed for exactness, only for the request count: any cuts give an exact
 * result, good cuts give one close to the minimum, ceil(records ÷ pageSize) per window.
 */
import type { Window } from '../windows.js';

/**
 * Share of a page a planned slice is sized to hold. Slices are sized from a count or an estimate,
 * assuming records spread evenly over time; the slack absorbs unevenness and estimation error
 * (an overflow costs one request more, and a split).
 */
export const SLICE_FILL = 0.9;

/**
 * A cell holding at least this share of an overflow's sampled records is cut out as a slice of
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

/** Slices needed for `records`, each sized to {@link SLICE_FILL} of a page; at least 1. */
export function slicesFor(records: number, pageSize: number): number {
  return Math.max(1, Math.ceil(records / (pageSize * SLICE_FILL)));
}

/**
 * Cuts `range` into about `slices` slices of equal length, plus cuts around hot cells, every cut on
 * a multiple of `minSplitMs` strictly inside the range.
 *
 * @param range the slice or window to split (ms since the epoch, half-open).
 * @param slices wanted number of equal slices, ≥ 1; fewer come back when the range has fewer cells.
 * @param minSplitMs SYNC_MIN_SPLIT in milliseconds, > 0.
 * @param hot start instants of cells (multiples of `minSplitMs`) to isolate as slices of their own.
 * @returns disjoint slices in time order covering `range` exactly; `[range]` when it cannot be split.
 */
export function splitRange(range: Window, slices: number, minSplitMs: number, hot: readonly number[] = []): Window[] {
  const cuts = new Set<number>();
  const length = range.end - range.start;
  for (let i = 1; i < slices; i++) {
    const ideal = range.start + (length * i) / slices;
    const cut = Math.round(ideal / minSplitMs) * minSplitMs;
    if (cut > range.start && cut < range.end) cuts.add(cut);
  }
  for (const cell of hot) {
    for (const cut of [cell, cell + minSplitMs]) if (cut > range.start && cut < range.end) cuts.add(cut);
    if (cell >= range.end) {
      // Records at the end itself (an inclusive toDate) belong to the next slice but still fill this
      // one's answers: cut the last cell off, so only it has to be read with them.
      const last = Math.floor((range.end - 1) / minSplitMs) * minSplitMs;
      if (last > range.start) cuts.add(last);
    }
  }
  if (cuts.size === 0 && slices > 1) {
    // Rounding put every cut on an edge: take the first cut inside, if there is one.
    const cut = nextCut(range.start, minSplitMs);
    if (cut < range.end) cuts.add(cut);
  }
  return slicesBetween(range, cuts);
}

/** The slices of `range` between `cuts` (each strictly inside it; any order, repeats allowed). */
function slicesBetween(range: Window, cuts: Iterable<number>): Window[] {
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
 * Chooses how to split a slice that overflowed: into slices of equal length, as many as
 * `totalRecords` needs at {@link SLICE_FILL} of a page less one *lump* (the records the sample shows
 * per occupied cell: timestamps on whole minutes come in lumps, and an equal cut can put one more
 * whole lump in a slice than its share), with every cell that holds at least
 * {@link HOT_CELL_SHARE} of the sample cut out on its own. The sample is whatever page 1 happened
 * to return; it only steers the cuts.
 *
 * @param overflow.totalRecords what E6 said the slice holds; `sampleTimes`: event times (ms) of the
 *   records the overflow response carried, may be empty.
 * @param paging E6 pageSize and SYNC_MIN_SPLIT in milliseconds.
 * @returns slices as {@link splitRange}; `[slice]` when the slice is an instant.
 */
export function splitOverflow(
  slice: Window,
  overflow: { totalRecords: number; sampleTimes: readonly number[] },
  paging: { pageSize: number; minSplitMs: number },
): Window[] {
  const { totalRecords, sampleTimes } = overflow;
  const { pageSize, minSplitMs } = paging;
  if (!isSplittable(slice, minSplitMs)) return [slice];
  const hot: number[] = [];
  let lump = 0;
  if (sampleTimes.length > 0) {
    const counts = new Map<number, number>();
    for (const ms of sampleTimes) {
      const cell = Math.floor(ms / minSplitMs) * minSplitMs;
      counts.set(cell, (counts.get(cell) ?? 0) + 1);
    }
    const threshold = Math.max(2, sampleTimes.length * HOT_CELL_SHARE);
    for (const [cell, count] of counts) if (count >= threshold) hot.push(cell);
    lump = sampleTimes.length / counts.size;
  }
  const perSlice = Math.max(pageSize * SLICE_FILL - lump, pageSize * MIN_SLICE_SHARE);
  return splitRange(slice, Math.max(1, Math.ceil(totalRecords / perSlice)), minSplitMs, hot);
}

/** Smallest share of a page a slice is sized for, however lumpy the sample (bigger lumps are hot cells). */
export const MIN_SLICE_SHARE = 0.25;

/** Most cells a profile has; a longer window gets wider cells (multiples of SYNC_MIN_SPLIT). */
export const MAX_PROFILE_CELLS = 100_000;

/**
 * Where in a window records fell: a count per cell of equal width from the window start. Filled
 * while the window is read ({@link ProfileCells.add}), then handed to {@link RecordEstimate.observe}.
 */
export class ProfileCells {
  /** Cell width, ms: SYNC_MIN_SPLIT, or a multiple of it for a window of more than {@link MAX_PROFILE_CELLS} of them. */
  readonly cellMs: number;
  readonly counts: Uint32Array;

  constructor(
    readonly window: Window,
    minSplitMs: number,
  ) {
    const length = window.end - window.start;
    this.cellMs = minSplitMs * Math.max(1, Math.ceil(length / minSplitMs / MAX_PROFILE_CELLS));
    this.counts = new Uint32Array(Math.max(1, Math.ceil(length / this.cellMs)));
  }

  /** Counts a record at `ms`; one outside the window is left out. */
  add(ms: number): void {
    const cell = Math.floor((ms - this.window.start) / this.cellMs);
    if (cell >= 0 && cell < this.counts.length) this.counts[cell]!++;
  }
}

/** How a window's records were spread over it (see {@link ProfileCells}). */
interface Profile {
  /** Window length, ms. */
  length: number;
  cellMs: number;
  counts: Uint32Array;
  records: number;
}

/**
 * Plans a window's first slices before reading it, from what is known: its count in the ledger (an
 * earlier run read it), else the latest rate seen (records per millisecond of a window read in this
 * run, or of the last window of an earlier run); and where in the window records fall, from the
 * event times of the last window of the same length read in this run (a daily or hourly rhythm
 * repeats, and so do timestamps bunched on whole minutes), else evenly.
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
   * Notes that `window` held `records` (after it was read), and, when given, where they fell.
   *
   * @param cells the window's records per cell, as they were read.
   */
  observe(window: Window, records: number, cells?: ProfileCells): void {
    const length = window.end - window.start;
    if (length <= 0) return;
    this.#rate = records / length;
    if (cells === undefined) return;
    let total = 0;
    for (const count of cells.counts) total += count;
    if (total > 0) this.#profile = { length, cellMs: cells.cellMs, counts: cells.counts, records: total };
  }

  /**
   * Whether {@link plan} has what it needs for `window`: an expected count, and where in the window
   * records fall when more than one slice is needed. A reader that can wait for a window being read
   * (it will tell) plans better than one that cuts blind.
   */
  ready(window: Window, pageSize: number): boolean {
    const expected = this.estimate(window);
    if (expected === undefined) return false;
    if (expected <= pageSize * SLICE_FILL) return true;
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
   * The slices to read `window` in first: one when it is expected to fit in a page (or nothing is
   * known); else, with a profile of a window of the same length, cells packed into slices in time
   * order while the expected count stays within {@link SLICE_FILL} of a page (a slice's count
   * includes the cell right after it: an inclusive toDate returns its first records too); else
   * {@link slicesFor} slices of equal length.
   *
   * @returns disjoint slices in time order covering `window`, cut on multiples of `minSplitMs`.
   */
  plan(window: Window, pageSize: number, minSplitMs: number): Window[] {
    const expected = this.estimate(window);
    if (expected === undefined || expected <= pageSize * SLICE_FILL) return [window];
    const profile = this.#profile;
    if (profile === undefined || profile.length !== window.end - window.start || profile.records === 0) {
      return splitRange(window, slicesFor(expected, pageSize), minSplitMs);
    }
    const scale = expected / profile.records;
    const target = pageSize * SLICE_FILL;
    const { counts, cellMs } = profile;
    const cuts: number[] = [];
    // The next window's first instant, which the last slice's inclusive toDate returns too: as full
    // as this window's first cell was.
    const atEnd = counts[0]! * scale;
    let lastOccupied = counts.length - 1;
    while (lastOccupied > 0 && counts[lastOccupied] === 0) lastOccupied--;
    let held = 0;
    let last = -1; // the last occupied cell taken into the current slice
    for (let i = 0; i <= lastOccupied; i++) {
      if (counts[i] === 0) continue;
      const count = counts[i]! * scale;
      // Records at the instant a slice would end on after this cell (the window's end, for the
      // last one): returned by it too.
      const next = i === lastOccupied ? atEnd : counts[i + 1]! * scale;
      if (held > 0 && held + count + next > target) {
        cuts.push(Math.round((window.start + (last + 1) * cellMs) / minSplitMs) * minSplitMs);
        held = 0;
      }
      held += count;
      last = i;
    }
    const inside = cuts.filter((c) => c > window.start && c < window.end);
    return inside.length === 0 ? splitRange(window, slicesFor(expected, pageSize), minSplitMs) : slicesBetween(window, inside);
  }
}
