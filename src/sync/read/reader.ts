/**
 * Reads windows from E6 so that the result never depends on the order of records within a
 * response (the reference promises none, and offset paging over an unstable order can return
 * one record twice and miss another, with the right `totalRecords`).
 *
 * Every record is taken from a response that is complete by itself: a *leaf*, one request at
 * pageNumber 1 that holds all of its `totalRecords`. The envelope is not trusted for that: a page
 * that holds fewer records than it should (an upstream that clamps `pageSize`, whatever it
 * echoes) is never taken as complete; the size it really serves is learned, and slices are cut
 * and requested at that size from then on. A slice that does not fit is split by time
 * (split.ts) and its slices read in turn, recursively. A slice that cannot be split, an *instant*
 * holding more than a page, is paged twice and taken only when both reads hold the same multiset
 * of records; otherwise it is read again, and after SYNC_WINDOW_ATTEMPTS pairs the window fails.
 * A slice whose answer is over UPSTREAM_MAX_BODY is split in time too, and an instant read at
 * smaller pages (oversize.ts).
 * A record E6 returns with two slices (an inclusive toDate, at the cut between them) is kept by the
 * earlier one; boundary.ts finds it without reading any field of the record (a leaf waits for the
 * texts of the slice before it, or for E6's answer for the cut).
 *
 * Requests run through one queue (request-queue.ts), earliest window first, whose budgets bound
 * memory by `2 × concurrency` leaf pages (plus the pages of an instant being compared), never by
 * the size of a window or a run.
 */
import { AbortedError, InconsistentWindowError } from '../../errors.js';
import type { AnalyticsPage } from '../../upstream/analytics.js';
import { Boundaries, countRange, SplitProof, type SliceRead, WindowBounds } from '../membership/boundary.js';
import { readAtSmallerPages, whenTooLarge } from './oversize.js';
import { pagedTwice, type PagedRead, type RangeRequests } from './paging.js';
import type { E6Pages } from '../store/ports.js';
import { bagOf, dropIndexes, PageKeys, SliceKeys, type TextBag } from '../membership/record-keys.js';
import type { Leaf, WindowReaderOptions, WindowReadStats } from './reader-types.js';
import { RequestQueue } from './request-queue.js';
import { ProfileCells, splitOverflow, splitRange } from './slices.js';
import { iso, type Window } from '../windows.js';

export type { Leaf, LeafPlace, WindowReadStats, WindowReaderOptions } from './reader-types.js';

interface WindowState<T> {
  window: Window;
  /** Position in the run's windows (the queue's index). */
  index: number;
  held: Leaf<T>[];
  started: boolean;
  /** Every request of the window answered (its slices may still wait for their boundary sets). */
  read: boolean;
  /** Every leaf handed out. */
  done: boolean;
  /** What it keeps for its boundary sets (boundary.ts). */
  bounds: WindowBounds;
  /** What failed the window (reads of its slices throw Errors; anything else is wrapped). */
  error: Error | undefined;
  dropped: boolean;
  waiter: (() => void) | undefined;
  stats: WindowReadStats;
  /** Records of the window's leaves, and how many fell in each cell of SYNC_MIN_SPLIT, for the plans of later windows. */
  records: number;
  cells: ProfileCells | undefined;
}

/** Reads the windows of one run, ahead of the writer (see the module comment). */
export class WindowReader<T> {
  readonly #o: WindowReaderOptions<T>;
  readonly #states: WindowState<T>[];
  readonly #queue: RequestQueue;
  /** The page size E6 really serves: SYNC_PAGE_SIZE until a page shows less (see onPageSizeClamped). */
  #pageSize: number;
  /** What each slice drops of the slice before it (boundary.ts). */
  readonly #boundaries: Boundaries;

  /**
   * @param windows the run's windows, disjoint, in time order; nothing is requested before
   *   {@link leaves} is first called.
   */
  constructor(client: E6Pages, windows: readonly Window[], options: WindowReaderOptions<T>) {
    this.#o = options;
    this.#pageSize = options.pageSize;
    this.#boundaries = new Boundaries(options.toDate ?? 'auto', options.committedEnds, options.heldBefore);
    this.#states = windows.map((window, index) => ({
      window,
      index,
      held: [],
      started: false,
      read: false,
      done: false,
      bounds: new WindowBounds(),
      error: undefined,
      dropped: false,
      waiter: undefined,
      stats: { requests: 0, leaves: 0, splits: 0, instants: 0, boundaryRequests: 0 },
      records: 0,
      cells: undefined,
    }));
    const states = this.#states;
    this.#queue = new RequestQueue(
      client,
      {
        length: states.length,
        held: (i) => states[i]!.held.length,
        started: (i) => states[i]!.started,
        start: (i, writing) => {
          const state = states[i]!;
          // Plan a later window only once the estimate can place its cuts, or when nothing earlier
          // is left to teach it (the first windows of a run would otherwise be cut blind).
          if (!state.started && !options.estimate.ready(state.window, this.#pageSize) && earlierOpen(states, writing, i)) return false;
          this.#start(state);
          return true;
        },
        awaitingNext: (i) => states[i]!.bounds.awaitingNext,
        launched: (i, request) => {
          const stats = states[i]!.stats;
          stats.requests++;
          if (request.count === true || request.range.start === request.range.end) stats.boundaryRequests++;
        },
      },
      { concurrency: options.concurrency, signal: options.signal },
    );
    // Nothing more is sent once stopped: end every window, whatever it waits for (a signal's stop reads as run.ts's).
    this.#queue.signal.addEventListener(
      'abort',
      () => {
        for (const state of states) this.#fail(state, this.#queue.abortError, true);
      },
      { once: true },
    );
  }

  /**
   * The leaves of window `index`, in the order they arrive (leaves are disjoint, so any order
   * gives the same records). The writer reads windows in order.
   *
   * @throws what {@link E6Pages.fetchPage} throws for a request of the window;
   *   {@link InconsistentWindowError} when an instant's reads kept disagreeing.
   */
  async *leaves(index: number): AsyncGenerator<Leaf<T>, void, undefined> {
    const state = this.#states[index];
    if (state === undefined) throw new RangeError(`no window ${index}`);
    this.#queue.writing = index;
    this.#start(state);
    this.#queue.pump();
    for (;;) {
      const leaf = state.held.shift();
      if (leaf !== undefined) {
        this.#queue.pump();
        yield leaf;
        continue;
      }
      if (state.error !== undefined) throw state.error;
      if (state.done) return;
      await new Promise<void>((resolve) => {
        state.waiter = resolve;
      });
    }
  }

  /** What reading window `index` took so far. */
  stats(index: number): WindowReadStats {
    const state = this.#states[index];
    if (state === undefined) throw new RangeError(`no window ${index}`);
    return { ...state.stats };
  }

  /** Forgets window `index`: its held pages are dropped and its queued requests never sent. */
  drop(index: number): void {
    const state = this.#states[index];
    if (state === undefined || state.dropped) return;
    state.dropped = true;
    state.held = [];
    this.#queue.drop(index);
    this.#fail(state, new AbortedError('window dropped by the writer'), false);
    this.#queue.pump();
  }

  /** Aborts every request in flight and sends no more. Idempotent. */
  close(): void {
    this.#queue.close();
  }

  /** Starts reading a window: its first slices, sized from the estimate. */
  #start(state: WindowState<T>): void {
    if (state.started) return;
    state.started = true;
    const { minSplitMs, estimate } = this.#o;
    const slices = estimate.plan(state.window, this.#pageSize, minSplitMs);
    if (this.#o.timesOf) state.cells = new ProfileCells(state.window, minSplitMs);
    Promise.all(slices.map((slice) => this.#readSlice(state, slice, {})))
      .then(() => {
        state.read = true;
        estimate.observe(state.window, state.records, state.cells);
        // The estimate kept what it needs; the window's state lives for the whole run, and one
        // cell per SYNC_MIN_SPLIT (338 KB for a day at 1 s) kept per window grew with the windows read.
        state.cells = undefined;
        this.#queue.pump();
        return this.#settle(state);
      })
      .then(
        () => {
          state.done = true;
          this.#wake(state);
          this.#queue.pump();
        },
        (err: unknown) => this.#fail(state, err, true),
      )
      .finally(() => state.bounds.endSettle());
  }

  /** Settles the window's open cuts (boundary.ts), after the window before it. */
  async #settle(state: WindowState<T>): Promise<void> {
    const { index } = state;
    const before = this.#states[index - 1];
    if (before?.window.end === state.window.start) await before.bounds.settled;
    const next = this.#states[index + 1]?.window.start === state.window.end ? this.#states[index + 1] : undefined;
    const { bounds } = state;
    await this.#boundaries.settle({
      window: state.window,
      slices: bounds.slices,
      last: bounds.last,
      open: bounds.open,
      next:
        next &&
        (() => {
          bounds.awaitingNext = true;
          this.#queue.pump();
          return this.#boundaries.firsts.take(state.window.end).finally(() => (bounds.awaitingNext = false));
        }),
      count: (range) => countRange(() => this.#request(state, range, 1, 1, true), this.#o.instantAttempts, `${iso(range.start)}..${iso(range.end)}`),
      ask: (cut) => this.#askBoundary(state, cut),
    });
    this.#boundaries.firsts.discard(state.window.start);
    bounds.forget();
  }

  #fail(state: WindowState<T>, err: unknown, wake: boolean): void {
    if (state.error === undefined) state.error = err instanceof Error ? err : new Error(String(err));
    this.#queue.fail(state.index, err);
    // Slices of this window still to be read never will be: whatever waits for them stops.
    this.#boundaries.ends.abandon(state.window);
    this.#boundaries.firsts.abandon(state.window);
    state.bounds.forget();
    if (wake) this.#wake(state);
  }

  #wake(state: WindowState<T>): void {
    const waiter = state.waiter;
    state.waiter = undefined;
    waiter?.();
  }

  /** One E6 request, queued until the budgets allow it. */
  #request(state: WindowState<T>, range: Window, pageNumber: number, pageSize = this.#pageSize, count = false): Promise<AnalyticsPage> {
    if (state.error !== undefined) return Promise.reject(state.error);
    return this.#queue.request(state.index, { range, pageNumber, pageSize, count });
  }

  /**
   * Reads a slice: a leaf, or split by time and its slices read in turn.
   *
   * @param proofs `start`: the split that made the cut at the slice's start, if any; `sibling`:
   *   the split this slice is one of, told the slice's totalRecords.
   */
  async #readSlice(state: WindowState<T>, slice: Window, proofs: { start?: SplitProof | undefined; sibling?: SplitProof }): Promise<void> {
    const { minSplitMs } = this.#o;
    // An answer over UPSTREAM_MAX_BODY has no totalRecords: the split this slice is one of proves
    // nothing (told first, so the slices waiting on it are not held), and the slice is read split instead.
    const tooLarge = (err: unknown): Promise<void> => {
      proofs.sibling?.fail();
      return this.#readOversized(state, slice, err, proofs.start);
    };
    const page = await whenTooLarge(this.#firstPage(state, slice), tooLarge).catch((err: unknown) => {
      proofs.sibling?.fail();
      throw err;
    });
    if (page === undefined) return;
    proofs.sibling?.report(page.totalRecords);
    if (page.data.length === page.totalRecords) {
      await this.#leaf(state, slice, [page], proofs.start);
      return;
    }
    const pageSize = this.#pageSize;
    const times: number[] = [];
    for (const record of page.data) {
      const ms = this.#o.eventTime(record);
      if (ms !== undefined) times.push(ms);
    }
    const total = page.totalRecords;
    // A whole window's count is its rate: later windows need not wait for all of it to be read.
    if (slice.start === state.window.start && slice.end === state.window.end) this.#o.estimate.observe(slice, total);
    const slices = splitOverflow(slice, { totalRecords: total, sampleTimes: times }, { pageSize, minSplitMs });
    if (slices.length === 1) {
      // An instant: paged twice, the second read taken when both agree.
      state.stats.instants++;
      const read = await whenTooLarge(this.#pagedTwice(state, slice), (err) => this.#readOversized(state, slice, err, proofs.start));
      if (read !== undefined) await this.#leaf(state, slice, read.pages, proofs.start);
      return;
    }
    state.stats.splits++;
    const split = new SplitProof(total, slices.length);
    // The first slice starts where this one does; the others at the split's own cuts.
    const start = (i: number) => (i === 0 ? proofs.start : split);
    await Promise.all(slices.map((p, i) => this.#readSlice(state, p, { start: start(i), sibling: split })));
  }

  /**
   * A slice read whole (one page, or an instant's pages): hands itself to the slice after it (and to
   * the window before, when it starts the window), and holds its pages for the writer once it is
   * known what it drops of the slice before it (boundary.ts).
   */
  async #leaf(state: WindowState<T>, slice: Window, pages: readonly AnalyticsPage[], startProof: SplitProof | undefined): Promise<void> {
    let keys: SliceKeys | undefined;
    const keysOf = (): SliceKeys => (keys ??= new SliceKeys(pages.map((page) => PageKeys.of(page))));
    const read: SliceRead = { slice, total: pages[0]!.totalRecords, keys: keysOf };
    let counted = false; // (the estimate learns where records fall, those at the window's start too)
    const hand = (drop: TextBag | undefined): void =>
      pages.forEach((page, p) => {
        const dropped = drop === undefined ? EMPTY : dropIndexes(keysOf().pages[p]!, drop);
        if (!counted) for (const i of dropped) this.#count1(state, this.#o.eventTime(page.data[i]!));
        this.#hold(state, { slice, page: this.#o.prepare(page, { slice, window: state.window, drop: dropped }), records: page.data.length }, counted);
      });
    const boundaries = this.#boundaries;
    if (boundaries.rule === 'exclusive') return hand(undefined);
    state.bounds.slices.push({ slice, total: read.total });
    if (slice.end === state.window.end) state.bounds.last = read;
    boundaries.ends.put(slice.end, read);
    const cut = slice.start;
    const atWindowStart = cut === state.window.start;
    if (atWindowStart) boundaries.firsts.put(cut, read);
    const earlierInRun = this.#states[state.index - 1]?.window.end === cut;
    const known = await boundaries.quick({ cut, atWindowStart, earlierInRun, startProof }, read, () => this.#askBoundary(state, cut));
    if ('drop' in known) hand(known.drop);
    else {
      // Held back until its window settles: counted now, so that the window's estimate is ready
      // when its reads are (the next window is planned from it).
      for (const page of pages) for (const record of page.data) this.#count1(state, this.#o.eventTime(record));
      counted = true;
      state.bounds.open.push({ cut, ...known.open, settle: hand });
    }
  }

  /** E6's records for `startDate = toDate = cut`: one request, or paged twice and compared when more than a page. */
  async #askBoundary(state: WindowState<T>, cut: number): Promise<TextBag> {
    const range = { start: cut, end: cut };
    const first = await this.#firstPage(state, range);
    return first.data.length === first.totalRecords ? bagOf(PageKeys.of(first).allTexts()) : (await this.#pagedTwice(state, range)).keys;
  }

  /**
   * A slice whose answer was over UPSTREAM_MAX_BODY: its halves in time (the cut between them proven
   * by nothing: boundary.ts asks when it must), or, an instant, read at smaller pages (oversize.ts).
   */
  async #readOversized(state: WindowState<T>, slice: Window, cause: unknown, startProof: SplitProof | undefined): Promise<void> {
    const halves = splitRange(slice, 2, this.#o.minSplitMs);
    if (halves.length > 1) {
      state.stats.splits++;
      await Promise.all(halves.map((half, i) => this.#readSlice(state, half, { start: i === 0 ? startProof : undefined })));
      return;
    }
    const read = async (size: number): Promise<void> => {
      state.stats.instants++;
      await this.#leaf(state, slice, (await this.#pagedTwice(state, slice, size)).pages, startProof);
    };
    await readAtSmallerPages(this.#pageSize, read, { instant: slice, window: state.window, cause });
  }

  /**
   * Page 1 of a slice, checked against its own envelope: it holds `min(pageSize asked,
   * totalRecords)` records, or fewer when E6 clamps the page size (learned here, see
   * onPageSizeClamped). A page that holds more than that, or none of a non-zero total, contradicts
   * itself: it is asked again, and after SYNC_WINDOW_ATTEMPTS the window fails.
   *
   * @throws {InconsistentWindowError} when every attempt contradicted itself.
   */
  async #firstPage(state: WindowState<T>, slice: Window, pageSize = Infinity): Promise<AnalyticsPage> {
    let served = 0;
    let total = 0;
    let asked = this.#pageSize;
    for (let attempt = 1; attempt <= this.#o.instantAttempts; attempt++) {
      asked = Math.min(this.#pageSize, pageSize);
      const page = await this.#request(state, slice, 1, asked);
      served = page.data.length;
      total = page.totalRecords;
      const expected = Math.min(asked, total);
      if (served > expected || (served === 0 && total > 0) || !Number.isInteger(total) || total < 0) continue;
      if (served < expected) this.#learnPageSize(asked, served, page.pageSize);
      return page;
    }
    throw new InconsistentWindowError(
      `E6 answered ${iso(slice.start)}..${iso(slice.end)} with pages that contradict their own envelope (${served} records on page 1 of ` +
        `totalRecords ${total}, pageSize ${asked} asked) ${this.#o.instantAttempts} times (SYNC_WINDOW_ATTEMPTS); ` +
        `nothing of window ${iso(state.window.start)}..${iso(state.window.end)} was committed`,
    );
  }

  #learnPageSize(asked: number, served: number, echoed: number): void {
    if (served >= this.#pageSize) return;
    this.#pageSize = served;
    this.#o.onPageSizeClamped?.({ asked, served, echoed });
  }

  /** {@link pagedTwice} of `range` within the window of `state`. */
  #pagedTwice(state: WindowState<T>, range: Window, pageSize?: number): Promise<PagedRead> {
    const io: RangeRequests = { firstPage: (r, size) => this.#firstPage(state, r, size), request: (r, n, size) => this.#request(state, r, n, size) };
    const { instantAttempts: attempts, pageSize: configured, onUnstableInstant: onUnstable } = this.#o;
    const o = { attempts, configured, served: this.#pageSize, window: state.window, onUnstable };
    return pagedTwice(io, range, pageSize === undefined ? o : { ...o, pageSize });
  }

  /** @param counted the leaf's records are in the window's estimate already (see {@link #leaf}). */
  #hold(state: WindowState<T>, leaf: Leaf<T>, counted = false): void {
    state.stats.leaves++;
    const cells = state.cells;
    if (!counted && this.#o.timesOf && cells !== undefined) {
      // Count what the slice keeps: the boundary set it drops is the slice before it's, and counted
      // here too it would inflate the estimate of later windows.
      for (const ms of this.#o.timesOf(leaf.page)) this.#count1(state, ms ?? undefined);
    } else if (!counted) state.records += leaf.records;
    if (state.dropped) return;
    state.held.push(leaf);
    this.#wake(state);
  }

  /** One record of the window, at `ms`, for the estimate. */
  #count1(state: WindowState<T>, ms: number | undefined): void {
    state.records++;
    if (ms !== undefined) state.cells?.add(ms);
  }
}

/** Whether a window in [from, to) is still being read. */
function earlierOpen(states: readonly { read: boolean }[], from: number, to: number): boolean {
  for (let i = from; i < to; i++) if (!states[i]!.read) return true;
  return false;
}

const EMPTY: ReadonlySet<number> = new Set();
