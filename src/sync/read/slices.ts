/**
 * Cutting a window by time into slices that E6 answers each in one page: cuts on multiples of
 * SYNC_MIN_SPLIT, sized from counts, estimates and samples. Only the request count depends on the
 * cuts, never the result. See docs/design/reader-budgets.md.
 */
import type { Window } from '../windows.js';

/** Share of a page a slice is sized to hold: the slack absorbs uneven records. */
const SLICE_FILL = 0.9;

/** Most a slice planned from a profile is filled to, once the profile's slices proved accurate. */
const MAX_FILL = 0.97;

/** Planned slices answered before the fill may rise above SLICE_FILL. */
const MIN_SAMPLES = 8;

/** Most expected counts a run keeps for the planned slices not yet answered. */
const MAX_PLANNED = 10_000;

/** Share of an overflow's sample a cell holds to be cut out as a slice of its own. */
const HOT_CELL_SHARE = 0.5;

/** First multiple of `step` strictly after `ms`. */
function nextCut(ms: number, step: number): number {
  return (Math.floor(ms / step) + 1) * step;
}

/** Whether `range` has a cut strictly inside it. */
export function isSplittable(range: Window, minSplitMs: number): boolean {
  return nextCut(range.start, minSplitMs) < range.end;
}

/** Slices needed for `records`, each sized to {@link SLICE_FILL} of a page; at least 1. */
function slicesFor(records: number, pageSize: number): number {
  return Math.max(1, Math.ceil(records / (pageSize * SLICE_FILL)));
}

/**
 * Cuts `range` into about `slices` equal slices plus cuts around the `hot` cells, on multiples of
 * `minSplitMs`: disjoint, in time order; `[range]` when it cannot be split.
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
      // Records at the end (an inclusive toDate) fill this slice's answers too: cut its last cell off.
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

/** How to split an overflow, from its count and the event times (ms) on its page 1: as {@link splitRange}, `[slice]` for an instant. */
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

/** Smallest share of a page a slice is sized for, however lumpy the sample. */
const MIN_SLICE_SHARE = 0.25;

/** Most cells a profile has; a longer window gets wider cells. */
const MAX_PROFILE_CELLS = 100_000;

/** Records of a window per cell of equal width, as it is read, for {@link RecordEstimate.observe}. */
export class ProfileCells {
  /** ms: a multiple of SYNC_MIN_SPLIT. */
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

  /** Counts a record at `ms`, unless outside the window. */
  add(ms: number): void {
    const cell = Math.floor((ms - this.window.start) / this.cellMs);
    if (cell >= 0 && cell < this.counts.length) this.counts[cell]!++;
  }
}

interface Profile {
  /** Window length, ms. */
  length: number;
  cellMs: number;
  counts: Uint32Array;
  records: number;
}

/**
 * Plans a window's first slices from its ledger count or the latest rate, and the last profile; the
 * fill rises from SLICE_FILL towards MAX_FILL as planned slices are answered close to their counts.
 */
export class RecordEstimate {
  readonly #known = new Map<string, number>();
  #rate: number | undefined;
  #profile: Profile | undefined;
  /** The expected count of each planned slice not yet answered, by `start:end`. */
  readonly #planned = new Map<string, number>();
  /** Widest gap between a planned slice's count and its expected count, as a share of a page, over {@link #samples} slices. */
  #deviation = 0;
  #samples = 0;

  /** @param ledger committed windows and their `totalRecords`; the latest seeds the rate. */
  constructor(ledger: readonly (Window & { totalRecords: number })[] = []) {
    let latest: (Window & { totalRecords: number }) | undefined;
    for (const w of ledger) {
      this.#known.set(`${w.start}:${w.end}`, w.totalRecords);
      if (latest === undefined || w.end > latest.end) latest = w;
    }
    if (latest !== undefined) this.observe(latest, latest.totalRecords);
  }

  /** Notes that `window` held `records`, and where they fell when `cells` is given. */
  observe(window: Window, records: number, cells?: ProfileCells): void {
    const length = window.end - window.start;
    if (length <= 0) return;
    this.#rate = records / length;
    if (cells === undefined) return;
    let total = 0;
    for (const count of cells.counts) total += count;
    if (total > 0) this.#profile = { length, cellMs: cells.cellMs, counts: cells.counts, records: total };
  }

  /** Whether {@link plan} knows `window`'s count, and its profile when it needs more than a slice. */
  ready(window: Window, pageSize: number): boolean {
    const expected = this.estimate(window);
    if (expected === undefined) return false;
    if (expected <= pageSize * SLICE_FILL) return true;
    return this.#profile !== undefined && this.#profile.length === window.end - window.start;
  }

  /** The expected record count of `window`; undefined when nothing is known yet. */
  estimate(window: Window): number | undefined {
    const known = this.#known.get(`${window.start}:${window.end}`);
    if (known !== undefined) return known;
    return this.#rate === undefined ? undefined : this.#rate * (window.end - window.start);
  }

  /**
   * Notes the count E6 answered for `slice` (`totalRecords`), if it was planned from a profile:
   * how far the counts stray from what was expected sets the fill of later plans.
   */
  answered(slice: Window, totalRecords: number, pageSize: number): void {
    const key = `${slice.start}:${slice.end}`;
    const expected = this.#planned.get(key);
    if (expected === undefined) return;
    this.#planned.delete(key);
    this.#deviation = Math.max(this.#deviation, Math.abs(totalRecords - expected) / pageSize);
    this.#samples++;
  }

  /** Share of a page a slice planned from a profile is sized to: MAX_FILL less twice the widest deviation, never under SLICE_FILL. */
  #fill(): number {
    if (this.#samples < MIN_SAMPLES) return SLICE_FILL;
    return Math.max(SLICE_FILL, MAX_FILL - 2 * this.#deviation);
  }

  /** The slices to read `window` in first: disjoint, in time order, cut on multiples of `minSplitMs`. */
  plan(window: Window, pageSize: number, minSplitMs: number): Window[] {
    const expected = this.estimate(window);
    if (expected === undefined || expected <= pageSize * SLICE_FILL) return [window];
    const profile = this.#profile;
    if (profile === undefined || profile.length !== window.end - window.start || profile.records === 0) {
      return splitRange(window, slicesFor(expected, pageSize), minSplitMs);
    }
    const scale = expected / profile.records;
    const target = pageSize * this.#fill();
    const { counts, cellMs } = profile;
    const cuts: number[] = [];
    // The next window's first instant, which an inclusive toDate returns with the last slice.
    const atEnd = counts[0]! * scale;
    let lastOccupied = counts.length - 1;
    while (lastOccupied > 0 && counts[lastOccupied] === 0) lastOccupied--;
    let held = 0;
    let last = -1; // the last occupied cell taken into the current slice
    for (let i = 0; i <= lastOccupied; i++) {
      if (counts[i] === 0) continue;
      const count = counts[i]! * scale;
      // The cell a slice would end on after this one is returned with it too.
      const next = i === lastOccupied ? atEnd : counts[i + 1]! * scale;
      if (held > 0 && held + count + next > target) {
        cuts.push(Math.round((window.start + (last + 1) * cellMs) / minSplitMs) * minSplitMs);
        held = 0;
      }
      held += count;
      last = i;
    }
    const inside = cuts.filter((c) => c > window.start && c < window.end);
    if (inside.length === 0) return splitRange(window, slicesFor(expected, pageSize), minSplitMs);
    const slices = slicesBetween(window, inside);
    this.#expect(slices, { window, profile, scale, atEnd });
    return slices;
  }

  /** Keeps each slice's expected count: its cells' and the cell at its end's (an inclusive toDate returns it too). */
  #expect(slices: readonly Window[], plan: { window: Window; profile: Profile; scale: number; atEnd: number }): void {
    const { window, profile, scale, atEnd } = plan;
    if (this.#planned.size > MAX_PLANNED) this.#planned.clear();
    const cellOf = (ms: number): number => Math.floor((ms - window.start) / profile.cellMs);
    for (const slice of slices) {
      let sum = 0;
      const last = cellOf(slice.end);
      for (let c = cellOf(slice.start); c <= last && c < profile.counts.length; c++) sum += profile.counts[c]!;
      this.#planned.set(`${slice.start}:${slice.end}`, sum * scale + (last >= profile.counts.length ? atEnd : 0));
    }
  }
}
