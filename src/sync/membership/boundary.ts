/**
 * Window membership at cuts, without reading any field of a record: the earlier slice keeps the
 * boundary set B(c) of a cut c (what E6 returns for `startDate = toDate = c`), the later one drops
 * it as a multiset of exact texts; a window start with no earlier window keeps it. B(c) is proven,
 * cheapest first, by split sums, an empty guess (the texts both slices share), one count of a chain
 * of slices, else asked of E6: never assumed. See docs/design/membership-at-cuts.md.
 */
import { InconsistentWindowError } from '../../errors.js';
import type { AnalyticsPage } from '../../upstream/analytics.js';
import { sharedTexts, type SliceKeys, type TextBag } from './record-keys.js';
export type { TextBag } from './record-keys.js';
import type { Window } from '../windows.js';

/** UPSTREAM_TO_DATE: `auto` proves boundary sets, `inclusive` takes the guess, `exclusive` drops nothing. */
export type ToDateRule = 'auto' | 'inclusive' | 'exclusive';

/** A slice read whole: E6's `totalRecords` for it, its records as keys (made when first needed). */
export interface SliceRead {
  slice: Window;
  total: number;
  keys: () => SliceKeys;
}

export function sameBag(a: TextBag, b: TextBag): boolean {
  if (a.size !== b.size) return false;
  for (const [key, count] of a) if (b.get(key) !== count) return false;
  return true;
}

/**
 * E6's `totalRecords` from `fetch` (page 1 at pageSize 1), asked again while it contradicts itself.
 * @throws {InconsistentWindowError} after `attempts` such pages.
 */
export async function countRange(fetch: () => Promise<AnalyticsPage>, attempts: number, range: string): Promise<number> {
  let page: AnalyticsPage | undefined;
  for (let attempt = 1; attempt <= attempts; attempt++) {
    page = await fetch();
    const total = page.totalRecords;
    if (Number.isInteger(total) && total >= 0 && page.data.length === Math.min(1, total)) return total;
  }
  throw new InconsistentWindowError(
    `E6 answered a count of ${range} (pageSize 1) with pages that contradict their own envelope (${page?.data.length} records of totalRecords ${page?.totalRecords}) ` +
      `${attempts} times (SYNC_WINDOW_ATTEMPTS); nothing of its window was committed`,
  );
}

function bagSize(bag: TextBag | undefined): number {
  let n = 0;
  for (const count of bag?.values() ?? []) n += count;
  return n;
}

/** Σ children = parent: a split of a slice of known `total` into `slices` slices. */
export class SplitProof {
  #remaining: number;
  #sum = 0;
  #holds: boolean | undefined;
  #resolve!: (holds: boolean) => void;
  /** Settles once every slice reported (or one failed: false). */
  readonly settled: Promise<boolean>;

  constructor(
    readonly total: number,
    slices: number,
  ) {
    this.#remaining = slices;
    this.settled = new Promise<boolean>((resolve) => (this.#resolve = resolve));
  }

  /** Undefined while slices are still to report. */
  get holds(): boolean | undefined {
    return this.#holds;
  }

  report(total: number): void {
    if (this.#holds !== undefined) return;
    this.#sum += total;
    if (--this.#remaining === 0) this.#settle(this.#sum === this.total);
  }

  /** A slice failed to report: nothing is proven. */
  fail(): void {
    if (this.#holds === undefined) this.#settle(false);
  }

  #settle(holds: boolean): void {
    this.#holds = holds;
    this.#resolve(holds);
  }
}

/** Slices by the instant they end (or start) at, each taken once; undefined for one never read. */
class SlicesAt {
  readonly #at = new Map<number, { read: Promise<SliceRead | undefined>; resolve: (read: SliceRead | undefined) => void }>();
  readonly #discarded = new Set<number>();
  /** Windows whose slices will not be read: (start, end] for ends, [start, end) for starts. */
  readonly #abandoned: Window[] = [];

  constructor(readonly ends: boolean) {}

  #entry(at: number) {
    let entry = this.#at.get(at);
    if (entry === undefined) {
      let resolve!: (read: SliceRead | undefined) => void;
      const read = new Promise<SliceRead | undefined>((r) => (resolve = r));
      entry = { read, resolve };
      this.#at.set(at, entry);
    }
    return entry;
  }

  #inAbandoned(at: number): boolean {
    return this.#abandoned.some((r) => (this.ends ? at > r.start && at <= r.end : at >= r.start && at < r.end));
  }

  put(at: number, read: SliceRead): void {
    if (this.#discarded.delete(at)) return; // nobody will take it: its pages can go
    this.#entry(at).resolve(read);
  }

  async take(at: number): Promise<SliceRead | undefined> {
    if (!this.#at.has(at) && this.#inAbandoned(at)) return undefined;
    const read = await this.#entry(at).read;
    this.#at.delete(at);
    return read;
  }

  /** Forgets an instant nobody will take, now or when its slice is put. */
  discard(at: number): void {
    if (!this.#at.delete(at)) this.#discarded.add(at);
  }

  /** Ends the waits for `window`'s slices not read yet with undefined. */
  abandon(window: Window): void {
    this.#abandoned.push(window);
    for (const [at, entry] of this.#at) if (this.#inAbandoned(at)) entry.resolve(undefined);
  }
}

/** Where a slice starts, for {@link Boundaries.quick}. */
export interface SliceStart {
  cut: number;
  atWindowStart: boolean;
  /** The window before it in the run ends at the cut. */
  earlierInRun: boolean;
  /** The split that made the cut, if any. */
  startProof: SplitProof | undefined;
}

/** A cut whose boundary set is not settled yet. */
export interface OpenCut {
  cut: number;
  guess: TextBag;
  left: SliceRead;
  settle: (drop: TextBag | undefined) => void;
}

/** What a window keeps for its boundary sets while it is read. */
export class WindowBounds {
  slices: Pick<SliceRead, 'slice' | 'total'>[] = [];
  last: SliceRead | undefined;
  open: OpenCut[] = [];
  /** Its settle waits for the next window's first slice. */
  awaitingNext = false;
  /** Its cuts settled, or it failed: the next window settles after it. */
  readonly settled: Promise<void>;
  endSettle!: () => void;

  constructor() {
    this.settled = new Promise<void>((resolve) => (this.endSettle = resolve));
  }

  /** Lets go of its pages. */
  forget(): void {
    this.slices = [];
    this.last = undefined;
    this.open = [];
  }
}

/** What a window settles its open cuts with. */
export interface WindowSettle {
  window: Window;
  slices: readonly Pick<SliceRead, 'slice' | 'total'>[];
  /** Its slice ending at the window's end. */
  last: SliceRead | undefined;
  open: readonly OpenCut[];
  /** The next window's first slice, when that window starts at this one's end in the run. */
  next: (() => Promise<SliceRead | undefined>) | undefined;
  /** E6's `totalRecords` for a range; undefined when E6's counts are known to lie (each cut is then asked). */
  count: (range: Window) => Promise<number | undefined>;
  /** E6's records for `startDate = toDate = cut`. */
  ask: (cut: number) => Promise<TextBag>;
}

/** The boundary rule of one reader. */
export class Boundaries {
  /** Slices by their end, for the slice starting there. */
  readonly ends = new SlicesAt(true);
  /** Windows' first slices by their start, for the window before them. */
  readonly firsts = new SlicesAt(false);
  /** Boundary sets of window starts the window before settled. */
  readonly #settled = new Map<number, TextBag | undefined>();

  /**
   * @param committedEnds ends of the ledger's windows: a window starting at one drops its start's
   *   boundary set, or only what `heldBefore` says the ledger window stores (default: all).
   */
  constructor(
    readonly rule: ToDateRule,
    readonly committedEnds: ReadonlySet<number> = new Set(),
    readonly heldBefore?: (cut: number, boundarySet: TextBag) => Promise<TextBag>,
  ) {}

  /**
   * What the slice `mine` drops at its start: `{ drop }` when told at once (undefined: nothing),
   * else `{ open }` for its window's {@link settle}. `ask` requests E6's boundary set of the cut.
   */
  async quick(
    at: SliceStart,
    mine: SliceRead,
    ask: () => Promise<TextBag>,
  ): Promise<{ drop: TextBag | undefined } | { open: { guess: TextBag; left: SliceRead } }> {
    const { cut, atWindowStart, earlierInRun, startProof } = at;
    if (this.rule === 'exclusive') return { drop: undefined };
    if (atWindowStart && !earlierInRun && !this.committedEnds.has(cut)) return { drop: undefined };
    if (startProof?.holds === true) {
      this.ends.discard(cut);
      return { drop: undefined };
    }
    const left = !atWindowStart || earlierInRun ? await this.ends.take(cut) : undefined;
    if (left === undefined) {
      const asked = await ask();
      // The window before is in the ledger only: drop what it stores, keep what came later.
      const fromLedger = atWindowStart && !earlierInRun && this.heldBefore !== undefined && asked.size > 0;
      return { drop: fromLedger ? await this.heldBefore(cut, asked) : asked };
    }
    const guess = sharedTexts(left.keys(), mine.keys());
    if (guess.size === 0) return { drop: undefined };
    if (startProof !== undefined && (await startProof.settled)) return { drop: undefined };
    if (this.rule === 'inclusive') return { drop: guess };
    return { open: { guess, left } };
  }

  /**
   * Settles a window's open cuts by one count of its chain, else by asking (what they throw).
   * Call for every window in order, once read and the window before settled.
   */
  async settle(w: WindowSettle): Promise<void> {
    const open = w.open.filter((c) => !this.#settled.has(c.cut));
    for (const c of w.open) if (this.#settled.has(c.cut)) c.settle(this.#take(c.cut));
    if (open.length === 0) return;
    const slices = [...w.slices].sort((a, b) => a.slice.start - b.slice.start);
    const first = open.find((c) => c.cut === w.window.start);
    const chain: Pick<SliceRead, 'slice' | 'total'>[] = first === undefined ? slices : [first.left, ...slices];
    const guesses = new Map(open.map((c) => [c.cut, c.guess]));
    const next = await w.next?.();
    const last = w.last;
    if (next !== undefined && last !== undefined) {
      // The next window's start goes into this count when it is open too.
      const guess = sharedTexts(last.keys(), next.keys());
      if (guess.size > 0 && this.rule === 'auto') {
        chain.push(next);
        guesses.set(next.slice.start, guess);
      }
    }
    const range = { start: chain[0]!.slice.start, end: chain[chain.length - 1]!.slice.end };
    const count = await w.count(range);
    const doubled = count === undefined ? undefined : chain.reduce((sum, p) => sum + p.total, 0) - count;
    let guessed = 0;
    for (const g of guesses.values()) guessed += bagSize(g);
    const found = new Map<number, TextBag | undefined>();
    for (const [cut, guess] of guesses) found.set(cut, doubled === guessed ? guess : doubled === 0 ? undefined : await w.ask(cut));
    for (const c of open) c.settle(found.get(c.cut));
    if (next !== undefined && found.has(next.slice.start)) this.#settled.set(next.slice.start, found.get(next.slice.start));
  }

  #take(cut: number): TextBag | undefined {
    const drop = this.#settled.get(cut);
    this.#settled.delete(cut);
    return drop;
  }
}
