/**
 * Reads a run's windows from E6 ahead of the writer, exactly whatever order E6 returns records in:
 * every record comes from a leaf (a slice whose page 1 holds all its `totalRecords`, at the page
 * size E6 really serves) or from an instant paged twice with the same result. Overflows are split
 * in time (slices.ts), answers over UPSTREAM_MAX_BODY too (oversize.ts); a leaf drops the boundary
 * set of its start cut (boundary.ts). Requests go through request-queue.ts, whose budgets bound
 * memory by `2 × concurrency` leaf pages, and a window's requests by SYNC_WINDOW_MAX_REQUESTS; a
 * count that lies is taken short, a paging limit fails the window. See docs/design/reader-budgets.md,
 * docs/design/membership-at-cuts.md, docs/design/oversize-split.md.
 */
import { AbortedError, InconsistentWindowError, WindowBudgetError } from '../../errors.js';
import type { AnalyticsPage, AnalyticsRecord } from '../../upstream/analytics.js';
import { Boundaries, countRange, sameBag, SplitProof, type SliceRead, WindowBounds } from '../membership/boundary.js';
import { readAtSmallerPages, whenTooLarge } from './oversize.js';
import { isPageRefusal, pagedTwice, type PagedRead, type RangeRequests, type ReadPage } from './paging.js';
import type { E6Pages } from '../store/ports.js';
import { bagOf, dropIndexes, PageKeys, SliceKeys, type TextBag } from '../membership/record-keys.js';
import type { Leaf, WindowReaderOptions, WindowReadStats } from './reader-types.js';
import { RequestQueue } from './request-queue.js';
import { ProfileCells, splitOverflow, splitRange } from './slices.js';
import { iso, type Window } from '../windows.js';

export type { Leaf, LeafPlace, WindowReadStats, WindowReaderOptions } from './reader-types.js';

interface WindowState<T> {
  window: Window;
  index: number;
  held: Leaf<T>[];
  started: boolean;
  /** Every request answered (its slices may still wait for their boundary sets). */
  read: boolean;
  done: boolean;
  bounds: WindowBounds;
  error: Error | undefined;
  dropped: boolean;
  waiter: (() => void) | undefined;
  stats: WindowReadStats;
  /** Records kept, and per cell, for the estimate of later windows. */
  records: number;
  cells: ProfileCells | undefined;
  /** Requests asked for (the bound counts them before they are sent), and the largest totalRecords answered. */
  asked: number;
  largest: number;
}

/** Reads the windows of one run, ahead of the writer. */
export class WindowReader<T> {
  readonly #o: WindowReaderOptions<T>;
  readonly #states: WindowState<T>[];
  readonly #queue: RequestQueue;
  /** The page size E6 really serves: SYNC_PAGE_SIZE until a page shows less. */
  #pageSize: number;
  readonly #boundaries: Boundaries;
  /** E6 counted records it did not serve somewhere in this run. */
  #countsLie = false;

  /** @param windows disjoint, in time order; nothing is requested before {@link leaves} is called. */
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
      stats: { requests: 0, leaves: 0, splits: 0, instants: 0, boundaryRequests: 0, unserved: 0 },
      records: 0,
      cells: undefined,
      asked: 0,
      largest: 0,
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
          // Not cut blind while an earlier window can still teach the estimate.
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
    this.#queue.signal.addEventListener(
      'abort',
      () => {
        for (const state of states) this.#fail(state, this.#queue.abortError, true);
      },
      { once: true },
    );
  }

  /**
   * The leaves of window `index` as they arrive; the writer reads windows in order.
   * @throws what {@link E6Pages.fetchPage} throws; {@link InconsistentWindowError};
   *   ResponseTooLargeError (oversize.ts); AbortedError.
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
        state.cells = undefined; // 338 KB for a day at 1 s, per window: the estimate has it
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

  /** Settles the window's open cuts, after the window before it. */
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
      // A count that lied once proves nothing at a cut: the cuts are asked instead.
      count: (range) =>
        this.#countsLie
          ? Promise.resolve(undefined)
          : countRange(() => this.#request(state, range, 1, 1, true), this.#o.instantAttempts, `${iso(range.start)}..${iso(range.end)}`),
      ask: (cut) => this.#askBoundary(state, cut),
    });
    this.#boundaries.firsts.discard(state.window.start);
    bounds.forget();
  }

  #fail(state: WindowState<T>, err: unknown, wake: boolean): void {
    if (state.error === undefined) state.error = err instanceof Error ? err : new Error(String(err));
    this.#queue.fail(state.index, err);
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

  #request(state: WindowState<T>, range: Window, pageNumber: number, pageSize = this.#pageSize, count = false): Promise<AnalyticsPage> {
    if (state.error !== undefined) return Promise.reject(state.error);
    const bound = this.#bound(state);
    if (++state.asked > bound) {
      const err = new WindowBudgetError(
        `window ${iso(state.window.start)}..${iso(state.window.end)} spent ${bound} E6 requests in this run without being read ` +
          `(SYNC_WINDOW_MAX_REQUESTS${(this.#o.maxRequests ?? 0) > 0 ? '' : `, auto: E6 counts up to ${state.largest} records in it`}); nothing of it was committed`,
      );
      this.#fail(state, err, true);
      return Promise.reject(err);
    }
    return this.#queue.request(state.index, { range, pageNumber, pageSize, count }).then((page) => {
      if (page.totalRecords > state.largest) state.largest = page.totalRecords;
      return page;
    });
  }

  /** SYNC_WINDOW_MAX_REQUESTS, or with 0 (auto) a bound from the window's largest count: see docs/design/reader-budgets.md. */
  #bound(state: WindowState<T>): number {
    if ((this.#o.maxRequests ?? 0) > 0) return this.#o.maxRequests!;
    const records = Math.max(state.largest, this.#o.estimate.estimate(state.window) ?? 0);
    return AUTO_BOUND_BASE + AUTO_BOUND_PER_PAGE * this.#o.instantAttempts * Math.ceil(records / this.#pageSize);
  }

  /** Records E6 counted in a range but never served (a count that lies): the window is short. */
  #unserved(state: WindowState<T>, page: ReadPage | PagedRead): void {
    const claimed = 'claimedRecords' in page ? page.claimedRecords : 'claimed' in page ? page.claimed : undefined;
    const served = 'pages' in page ? page.total : page.totalRecords;
    if (claimed === undefined) return;
    state.stats.unserved += claimed - served;
    this.#countsLie = true;
  }

  /** @param proofs the split that made the slice's start cut, and the split it is one of. */
  async #readSlice(state: WindowState<T>, slice: Window, proofs: { start?: SplitProof | undefined; sibling?: SplitProof }): Promise<void> {
    const { minSplitMs } = this.#o;
    // Over the cap: no totalRecords, so the split proves nothing (told first: nothing waits on it).
    const tooLarge = (err: unknown): Promise<void> => {
      proofs.sibling?.fail();
      return this.#readOversized(state, slice, err, proofs.start);
    };
    const page = await whenTooLarge(this.#firstPage(state, slice), tooLarge).catch((err: unknown) => {
      proofs.sibling?.fail();
      throw err;
    });
    if (page === undefined) return;
    this.#o.estimate.answered(slice, page.totalRecords, this.#pageSize);
    proofs.sibling?.report(page.totalRecords);
    if (page.data.length === page.totalRecords) {
      this.#unserved(state, page);
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
    // A whole window's count is its rate: later windows need not wait for it to be read.
    if (slice.start === state.window.start && slice.end === state.window.end) this.#o.estimate.observe(slice, total);
    const slices = splitOverflow(slice, { totalRecords: total, sampleTimes: times }, { pageSize, minSplitMs });
    if (slices.length === 1) {
      state.stats.instants++;
      const read = await whenTooLarge(this.#pagedTwice(state, slice), (err) => this.#readOversized(state, slice, err, proofs.start));
      if (read !== undefined) this.#unserved(state, read);
      if (read !== undefined) await this.#leaf(state, slice, read.pages, proofs.start);
      return;
    }
    state.stats.splits++;
    const split = new SplitProof(total, slices.length);
    const start = (i: number) => (i === 0 ? proofs.start : split);
    await Promise.all(slices.map((p, i) => this.#readSlice(state, p, { start: start(i), sibling: split })));
  }

  /** A slice read whole: handed to its neighbours, held for the writer once its drop is known. */
  async #leaf(state: WindowState<T>, slice: Window, pages: readonly AnalyticsPage[], startProof: SplitProof | undefined): Promise<void> {
    let keys: SliceKeys | undefined;
    // Once made, the keys hold only bytes: the neighbours keeping this read keep no parsed records.
    let keyed: readonly AnalyticsPage[] | undefined = pages;
    const keysOf = (): SliceKeys => {
      if (keys === undefined) {
        keys = new SliceKeys(keyed!.map((page) => PageKeys.of(page)));
        keyed = undefined;
      }
      return keys;
    };
    const read: SliceRead = { slice, total: pages[0]!.totalRecords, keys: keysOf };
    let counted = false;
    // No closure here names `pages`: what they share would keep the parsed records.
    const prepared = (drop: TextBag | undefined, from: readonly AnalyticsPage[]): Leaf<T>[] =>
      from.map((page, p) => {
        const dropped = drop === undefined ? EMPTY : dropIndexes(keysOf().pages[p]!, drop);
        if (!counted) for (const i of dropped) this.#count1(state, this.#o.eventTime(page.data[i]!));
        return { slice, page: this.#o.prepare(page, { slice, window: state.window, drop: dropped }), records: page.data.length };
      });
    let unhanded: readonly AnalyticsPage[] | undefined = pages;
    const hand = (drop: TextBag | undefined): void => {
      const from = unhanded!;
      unhanded = undefined;
      for (const leaf of prepared(drop, from)) this.#hold(state, leaf, counted);
    };
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
      // Held until its window settles, but counted now: the next window is planned from it.
      for (const page of pages) for (const record of page.data) this.#count1(state, this.#o.eventTime(record));
      counted = true;
      unhanded = undefined;
      state.bounds.open.push({ cut, ...known.open, settle: this.#settleLater(state, known.open.guess, prepared, pages) });
    }
  }

  /**
   * What an open cut's leaf does once its drop is known. It is prepared now, as if the guess were
   * dropped (what a count proves on an upstream that agrees with itself), so that only bodies wait
   * for the window to settle, not their parsed records; another drop prepares it again from the
   * bodies, parsed again (a page without its text is kept whole for that).
   */
  #settleLater(
    state: WindowState<T>,
    guess: TextBag,
    prepared: (drop: TextBag | undefined, from: readonly AnalyticsPage[]) => Leaf<T>[],
    pages: readonly AnalyticsPage[],
  ): (drop: TextBag | undefined) => void {
    const asGuessed = prepared(new Map(guess), pages);
    const guessed = new Map(guess);
    const bodies = pages.map((page) => (page.text === undefined ? page : { ...page, data: [] as AnalyticsRecord[], text: page.text }));
    return (drop) => {
      const leaves =
        drop !== undefined && sameBag(drop, guessed)
          ? asGuessed
          : prepared(
              drop,
              bodies.map((page) => (page.text === undefined ? page : { ...page, data: (JSON.parse(page.text) as { data: AnalyticsRecord[] }).data })),
            );
      for (const leaf of leaves) this.#hold(state, leaf, true);
    };
  }

  /** E6's records for `startDate = toDate = cut`. */
  async #askBoundary(state: WindowState<T>, cut: number): Promise<TextBag> {
    const range = { start: cut, end: cut };
    const first = await this.#firstPage(state, range);
    return first.data.length === first.totalRecords ? bagOf(PageKeys.of(first).allTexts()) : (await this.#pagedTwice(state, range)).keys;
  }

  /** A slice over UPSTREAM_MAX_BODY: its halves, the cut between them proven by nothing; an instant at smaller pages. */
  async #readOversized(state: WindowState<T>, slice: Window, cause: unknown, startProof: SplitProof | undefined): Promise<void> {
    const halves = splitRange(slice, 2, this.#o.minSplitMs);
    if (halves.length > 1) {
      state.stats.splits++;
      await Promise.all(halves.map((half, i) => this.#readSlice(state, half, { start: i === 0 ? startProof : undefined })));
      return;
    }
    const read = async (size: number): Promise<void> => {
      state.stats.instants++;
      const paged = await this.#pagedTwice(state, slice, size);
      this.#unserved(state, paged);
      await this.#leaf(state, slice, paged.pages, startProof);
    };
    await readAtSmallerPages(this.#pageSize, read, { instant: slice, window: state.window, cause });
  }

  /**
   * Page 1 of a slice, asked again while it contradicts its envelope. A page shorter than asked and
   * than its count is a size E6 clamps to (learned) or a count that lies (`claimedRecords`).
   */
  async #firstPage(state: WindowState<T>, slice: Window, pageSize = Infinity): Promise<ReadPage> {
    let served = 0;
    let total = 0;
    let asked = this.#pageSize;
    let empties = 0;
    for (let attempt = 1; attempt <= this.#o.instantAttempts; attempt++) {
      asked = Math.min(this.#pageSize, pageSize);
      const page = await this.#request(state, slice, 1, asked);
      served = page.data.length;
      total = page.totalRecords;
      const expected = Math.min(asked, total);
      if (served > expected || !Number.isInteger(total) || total < 0) continue;
      if (served === expected) return page;
      if (served === 0) {
        // Empty at every attempt: E6 serves nothing of what it counts here.
        if (++empties === this.#o.instantAttempts) return shortPage(page);
        continue;
      }
      const judged = await this.#clampOrShort(state, slice, page, asked);
      if (judged !== undefined) return judged;
    }
    throw new InconsistentWindowError(
      `E6 answered ${iso(slice.start)}..${iso(slice.end)} with pages that contradict their own envelope (${served} records on page 1 of ` +
        `totalRecords ${total}, pageSize ${asked} asked) ${this.#o.instantAttempts} times (SYNC_WINDOW_ATTEMPTS); ` +
        `nothing of window ${iso(state.window.start)}..${iso(state.window.end)} was committed`,
    );
  }

  /**
   * A short page 1: page 2 at the size served holds records when E6 clamps the size (learned, the
   * page taken), none when its count lies: then page 1 again, taken short when it holds the same
   * records; undefined when it does not (asked again).
   */
  async #clampOrShort(state: WindowState<T>, slice: Window, page: AnalyticsPage, asked: number): Promise<ReadPage | undefined> {
    const served = page.data.length;
    const next = await this.#request(state, slice, 2, served).catch((err: unknown) => {
      if (isPageRefusal(err)) return undefined;
      throw err;
    });
    if (next !== undefined && next.data.length > 0) {
      this.#learnPageSize(asked, served, page.pageSize);
      return page;
    }
    const again = await this.#request(state, slice, 1, asked);
    const texts = (p: AnalyticsPage) => bagOf(PageKeys.of(p).allTexts());
    return again.totalRecords === page.totalRecords && sameBag(texts(page), texts(again)) ? shortPage(again) : undefined;
  }

  #learnPageSize(asked: number, served: number, echoed: number): void {
    if (served >= this.#pageSize) return;
    this.#pageSize = served;
    this.#o.onPageSizeClamped?.({ asked, served, echoed });
  }

  #pagedTwice(state: WindowState<T>, range: Window, pageSize?: number): Promise<PagedRead> {
    const io: RangeRequests = { firstPage: (r, size) => this.#firstPage(state, r, size), request: (r, n, size) => this.#request(state, r, n, size) };
    const { instantAttempts: attempts, pageSize: configured, onUnstableInstant: onUnstable, onRepeatedPages: onRepeated } = this.#o;
    const o = { attempts, configured, served: this.#pageSize, window: state.window, onUnstable, onRepeated };
    return pagedTwice(io, range, pageSize === undefined ? o : { ...o, pageSize });
  }

  /** @param counted the leaf's records are in the window's estimate already. */
  #hold(state: WindowState<T>, leaf: Leaf<T>, counted = false): void {
    state.stats.leaves++;
    const cells = state.cells;
    if (!counted && this.#o.timesOf && cells !== undefined) {
      // What the slice keeps: its dropped boundary set is counted with the slice before.
      for (const ms of this.#o.timesOf(leaf.page)) this.#count1(state, ms ?? undefined);
    } else if (!counted) state.records += leaf.records;
    if (state.dropped) return;
    state.held.push(leaf);
    this.#wake(state);
  }

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

/** The auto bound of a window's requests: this many, plus this many per page of its count and SYNC_WINDOW_ATTEMPTS. */
const AUTO_BOUND_BASE = 100;
const AUTO_BOUND_PER_PAGE = 4;

/** `page` taken as all E6 serves of its range: `totalRecords` what it serves, the count it claimed kept apart. */
function shortPage(page: AnalyticsPage): ReadPage {
  return { ...page, totalRecords: page.data.length, claimedRecords: page.totalRecords };
}
