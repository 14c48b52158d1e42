/**
 * Window membership at cuts, without reading any field of a record (E6: the reference does not say
 * which time `startDate`/`toDate` filter on, nor whether `toDate` is inclusive).
 *
 * Glossary
 * - cut: an instant c where one slice ends and the next begins: the earlier slice is asked with
 *   `toDate = c`, the later one with `startDate = c`. Window ends are cuts too.
 * - boundary set of c, B(c): the records E6 returns for `startDate = toDate = c`: those whose
 *   (unknown) filter time is exactly c. An inclusive toDate returns them with both slices next to
 *   c; an exclusive one only with the later slice, and then B(c) is empty.
 * - owner: the EARLIER slice keeps B(c); the later slice drops it, as a multiset of exact record
 *   texts. A window whose start has no earlier window loaded (in this run or in the ledger)
 *   keeps it instead: no other window would. A window whose earlier window is in the ledger but
 *   not in the run drops only the texts of B(c) that window stores: a record that came to the cut
 *   after it was loaded (E6 delivers late) is kept by the later window, else no window would hold
 *   it until the earlier one is loaded again. The same holds inside a run: a record that comes to
 *   c between the reads of the two slices is in the later slice only (no guess sees it), and stays
 *   there. Either way the record is stored once, in the later window; a run that loads both
 *   windows again puts it back in the earlier one (under SYNC_SHRINK=keep the later window's
 *   union counts what it drops at its start as returned: PreparedPage.owned, WindowWriter.end).
 *   A run that loads the earlier window alone (`state reset` of it) keeps B(c) whole and stores
 *   such a record twice until the later window is loaded again; the audit sees that one (the
 *   later window's count is over E6's).
 * - guess of c, G(c): the texts the two slices next to c share. B(c) ⊆ G(c); they differ only when
 *   two records with the same text lie on either side of c.
 *
 * What proves B(c), cheapest first:
 * 1. a split whose slices' `totalRecords` add up to the slice's own (Σ children = parent): no
 *    boundary record at any of its cuts (an inclusive toDate counts each one twice);
 * 2. G(c) empty: no boundary record;
 * 3. a count (one request, pageSize 1) of a chain of slices read back to back, the cuts between
 *    them with a non-empty guess among them: Σ slices − count = Σ |B(c)| over its cuts, so when it
 *    equals Σ |G(c)| every guess is the boundary set, and when it is 0 every boundary set is
 *    empty. A window's chain runs from the slice before its start to the first slice of the next
 *    window, so one count settles two window boundaries;
 * 4. else E6 is asked for `startDate = toDate = c`, cut by cut.
 * Records that arrive or go between the requests make the sums disagree: the cuts are then asked,
 * never assumed.
 *
 * A guess is found without a string per record (record-keys.ts): the two slices' records are
 * matched by a hash of their bytes, and only records whose hashes match are compared, by their
 * exact texts; a guess is always a multiset of exact texts.
 *
 * Cost in memory: a slice with an open cut is held until its window's count answers (a window's
 * pages at most), and while the count waits for the next window's first slice, that window reads
 * past the reader's budget.
 */
import { InconsistentWindowError } from '../../errors.js';
import type { AnalyticsPage } from '../../upstream/analytics.js';
import { sharedTexts, type SliceKeys, type TextBag } from './record-keys.js';
export type { TextBag } from './record-keys.js';
import type { Window } from '../windows.js';

/**
 * UPSTREAM_TO_DATE: how boundary sets are found. `auto` proves them (exact whatever E6 does);
 * `inclusive` takes each guess as the boundary set without a request (exact unless two records
 * with the same text lie on either side of a cut); `exclusive` drops nothing (E6 never returns a
 * record with both slices).
 */
export type ToDateRule = 'auto' | 'inclusive' | 'exclusive';

/** A slice read whole: its range, E6's `totalRecords` for it, and its records as keys (made when first needed). */
export interface SliceRead {
  slice: Window;
  total: number;
  keys: () => SliceKeys;
}

/** Whether two multisets are equal. */
export function sameBag(a: TextBag, b: TextBag): boolean {
  if (a.size !== b.size) return false;
  for (const [key, count] of a) if (b.get(key) !== count) return false;
  return true;
}

/**
 * E6's `totalRecords` for a range, from page 1 at pageSize 1, asked again while the page
 * contradicts its envelope (E6).
 *
 * @param fetch requests the page.
 * @param attempts SYNC_WINDOW_ATTEMPTS.
 * @param range the range counted, for the error text.
 * @throws {InconsistentWindowError} after `attempts` pages that contradicted their envelope.
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

/** Records in a multiset. */
export function bagSize(bag: TextBag | undefined): number {
  let n = 0;
  for (const count of bag?.values() ?? []) n += count;
  return n;
}

/**
 * Σ children = parent (see the module comment): a split of a slice of known `totalRecords` into
 * `slices` slices, settled once every slice told its own.
 */
export class SplitProof {
  #remaining: number;
  #sum = 0;
  #holds: boolean | undefined;
  #resolve!: (holds: boolean) => void;
  /** Settles once every slice reported its total (or one failed: false). */
  readonly settled: Promise<boolean>;

  constructor(
    readonly total: number,
    slices: number,
  ) {
    this.#remaining = slices;
    this.settled = new Promise<boolean>((resolve) => (this.#resolve = resolve));
  }

  /** True once proven, false once disproven, undefined while slices are still to report. */
  get holds(): boolean | undefined {
    return this.#holds;
  }

  /** One slice's `totalRecords`. */
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

/**
 * Slices by the instant they end (or start) at, handed once to whoever waits for them. An instant
 * whose slice will never be read (its window failed or was dropped) gets undefined.
 */
export class SlicesAt {
  readonly #at = new Map<number, { read: Promise<SliceRead | undefined>; resolve: (read: SliceRead | undefined) => void }>();
  readonly #discarded = new Set<number>();
  /** Windows whose slices will not be read (ends: (start, end]; starts: [start, end)). */
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

  /** The slice at `at` was read. */
  put(at: number, read: SliceRead): void {
    // Nobody will take it (see discard): not kept, so its pages can go.
    if (this.#discarded.delete(at)) return;
    this.#entry(at).resolve(read);
  }

  /** Waits for the slice at `at`, and forgets it. */
  async take(at: number): Promise<SliceRead | undefined> {
    if (!this.#at.has(at) && this.#inAbandoned(at)) return undefined;
    const read = await this.#entry(at).read;
    this.#at.delete(at);
    return read;
  }

  /** Forgets an instant nobody will take, or will forget its slice when it is put. */
  discard(at: number): void {
    if (!this.#at.delete(at)) this.#discarded.add(at);
  }

  /** A window's slices not read yet never will be: their waits end with undefined. */
  abandon(window: Window): void {
    this.#abandoned.push(window);
    for (const [at, entry] of this.#at) if (this.#inAbandoned(at)) entry.resolve(undefined);
  }
}

/** Where a slice starts, for {@link Boundaries.quick}. */
export interface SliceStart {
  cut: number;
  /** The cut is its window's start. */
  atWindowStart: boolean;
  /** The window before it in the run ends at the cut (its last slice is handed over). */
  earlierInRun: boolean;
  /** The split that made the cut, if the slice's start is one. */
  startProof: SplitProof | undefined;
}

/** A cut whose boundary set is not settled yet: its guess, the slice before it, and what to do once settled. */
export interface OpenCut {
  cut: number;
  guess: TextBag;
  left: SliceRead;
  settle: (drop: TextBag | undefined) => void;
}

/** What a window keeps for its boundary sets while it is read. */
export class WindowBounds {
  /** Its slices read whole (ranges and totals), the last one (ending at the window's end) whole. */
  slices: Pick<SliceRead, 'slice' | 'total'>[] = [];
  last: SliceRead | undefined;
  /** Its cuts not settled yet. */
  open: OpenCut[] = [];
  /** Its settle waits for the next window's first slice (which may then read past its budget). */
  awaitingNext = false;
  /** Settles when its cuts are settled or it failed: the next window settles after it. */
  readonly settled: Promise<void>;
  endSettle!: () => void;

  constructor() {
    this.settled = new Promise<void>((resolve) => (this.endSettle = resolve));
  }

  /** Lets go of every page it holds. */
  forget(): void {
    this.slices = [];
    this.last = undefined;
    this.open = [];
  }
}

/** What a window settles its open cuts with (see {@link Boundaries.settle}). */
export interface WindowSettle {
  window: Window;
  /** Every slice of the window, read (ranges and totals). */
  slices: readonly Pick<SliceRead, 'slice' | 'total'>[];
  /** Its last slice (ending at the window's end), keys included. */
  last: SliceRead | undefined;
  open: readonly OpenCut[];
  /** The first slice of the next window when it starts at this one's end in the run (undefined when it will not be read). */
  next: (() => Promise<SliceRead | undefined>) | undefined;
  /** E6's `totalRecords` for a range (one request, pageSize 1). */
  count: (range: Window) => Promise<number>;
  /** E6's records for `startDate = toDate = cut`. */
  ask: (cut: number) => Promise<TextBag>;
}

/** The boundary rule of one reader (see the module comment). */
export class Boundaries {
  /** Slices by their end, for the slice starting there. */
  readonly ends = new SlicesAt(true);
  /** Windows' first slices by their start, for the window before them. */
  readonly firsts = new SlicesAt(false);
  /** Boundary sets of window starts settled by the window before (its chain reached the next window's first slice). */
  readonly #settled = new Map<number, TextBag | undefined>();

  /**
   * @param rule UPSTREAM_TO_DATE.
   * @param committedEnds ends of windows in the ledger: a window starting at one drops its start's
   *   boundary set (the window before keeps it); a window with no window before it keeps it.
   * @param heldBefore of a boundary set at a committed end, what the window ending there stores
   *   (the window starting there drops only that); default: all of it.
   */
  constructor(
    readonly rule: ToDateRule,
    readonly committedEnds: ReadonlySet<number> = new Set(),
    readonly heldBefore?: (cut: number, boundarySet: TextBag) => Promise<TextBag>,
  ) {}

  /**
   * What the slice starting at `at.cut` drops, when it can be told at once: `{ drop }` (undefined:
   * nothing), proven by 1 or 2 of the module comment, asked (the slice before it is not in this
   * run), or the guess under `inclusive`; else `{ open }`, for its window's {@link settle}.
   *
   * @param mine the slice itself.
   * @param ask requests E6's records for `startDate = toDate = at.cut`.
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
      // The window before is in the ledger, not in the run: drop what it stores, keep what came later.
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
   * Settles a window's open cuts (3 and 4 of the module comment) and, when its chain reaches the
   * next window's first slice, that window's start too. Call for every window in order, once its
   * slices are read and the window before it settled.
   *
   * @throws what `count` or `ask` throw.
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
      // The next window's start goes into this count when it is open too (its first slice sees the same guess).
      const guess = sharedTexts(last.keys(), next.keys());
      if (guess.size > 0 && this.rule === 'auto') {
        chain.push(next);
        guesses.set(next.slice.start, guess);
      }
    }
    const range = { start: chain[0]!.slice.start, end: chain[chain.length - 1]!.slice.end };
    const doubled = chain.reduce((sum, p) => sum + p.total, 0) - (await w.count(range));
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
