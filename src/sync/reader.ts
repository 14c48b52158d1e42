/**
 * Reads windows from E6 so that the result never depends on the order of records within a
 * response (the reference promises none, and offset paging over an unstable order can return
 * one record twice and miss another, with the right `totalRecords`).
 *
 * Every record is taken from a response that is complete by itself: a *leaf*, one request at
 * pageNumber 1 that holds all of its `totalRecords`. The envelope is not trusted for that: a page
 * that holds fewer records than it should (an upstream that clamps `pageSize`, whatever it
 * echoes) is never taken as complete; the size it really serves is learned, and parts are cut
 * and requested at that size from then on. A part that does not fit is split by time
 * (split.ts) and its parts read in turn, recursively. A part that cannot be split, an *instant*
 * holding more than a page, is paged twice and taken only when both reads hold the same multiset
 * of records; otherwise it is read again, and after SYNC_WINDOW_ATTEMPTS pairs the window fails.
 * A part whose answer is over UPSTREAM_MAX_BODY is split in time too, and an instant read at
 * smaller pages (oversize.ts).
 *
 * Requests run through one queue with fixed budgets, earliest window first, so memory is bounded
 * by `2 × concurrency` leaf pages (plus the pages of an instant being compared), never by the size
 * of a window or a run:
 * - at most `concurrency` requests are open at once, and the window being written holds at most
 *   `concurrency` pages (open or fetched, not yet taken) together with requests open for later windows;
 * - later windows hold at most `concurrency` pages (open or fetched) between them.
 */
import { AbortedError, InconsistentWindowError } from '../errors.js';
import type { AnalyticsPage, AnalyticsRecord } from '../upstream/analytics.js';
import { dataElementSpans, stringifyJson } from '../upstream/page-text.js';
import { readAtSmallerPages, whenTooLarge } from './oversize.js';
import type { E6Pages } from './ports.js';
import { ProfileCells, splitOverflow, splitRange, type RecordEstimate } from './split.js';
import { iso, type Window } from './windows.js';

/** One leaf: a part of a window and its page, as `prepare` made it. */
export interface Leaf<T> {
  part: Window;
  page: T;
  /** Records E6 returned for the part (before the caller's boundary rule). */
  records: number;
}

/** What reading one window took. */
export interface WindowReadStats {
  /** E6 requests made for the window: leaves, overflows and both reads of instants. */
  requests: number;
  /** Leaf pages (an instant counts its pages of the read taken). */
  leaves: number;
  /** Overflows that were split. */
  splits: number;
  /** Instants (more than a page at one SYNC_MIN_SPLIT cell) read twice. */
  instants: number;
}

export interface WindowReaderOptions<T> {
  /** E6 pageSize, 1 to 1000. */
  pageSize: number;
  /** Requests open at once (see the module comment for the budgets). */
  concurrency: number;
  /** SYNC_MIN_SPLIT in milliseconds: cuts lie on its multiples. */
  minSplitMs: number;
  /** Pairs of reads of an instant before the window fails. */
  instantAttempts: number;
  /** Turns a leaf page into what is held for the writer. Must not throw. */
  prepare: (page: AnalyticsPage, part: Window) => T;
  /**
   * The event times of the records a prepared page keeps (null for none), so the estimate learns
   * where in a window records fall without reading them twice. Without it, later windows are cut
   * evenly.
   */
  timesOf?: (prepared: T) => Iterable<number | null>;
  /** A record's event time (RECORD_TIME_FIELD), to steer cuts; undefined when it has none. */
  eventTime: (record: AnalyticsRecord) => number | undefined;
  /** Expected counts of windows not read yet: chooses their first parts. */
  estimate: RecordEstimate;
  signal?: AbortSignal;
  /**
   * E6 served fewer records on a page than `pageSize` asked and `totalRecords` held: from now on
   * parts are cut for, and requested at, `served` (called each time the size learned shrinks).
   * Must not throw.
   */
  onPageSizeClamped?: (event: { asked: number; served: number; echoed: number }) => void;
  /** The two reads of an instant disagreed (attempt counts from 1). Must not throw. */
  onUnstableInstant?: (event: { instant: Window; records: number; attempt: number }) => void;
}

interface Task {
  part: Window;
  pageNumber: number;
  /** The page size asked, fixed when the request is queued so a page's offset never moves. */
  pageSize: number;
  resolve: (page: AnalyticsPage) => void;
  reject: (err: unknown) => void;
}

interface WindowState<T> {
  window: Window;
  /** Requests not launched yet, in order. */
  queue: Task[];
  open: number;
  held: Leaf<T>[];
  started: boolean;
  done: boolean;
  /** What failed the window (reads of its parts throw Errors; anything else is wrapped). */
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
  readonly #client: E6Pages;
  readonly #o: WindowReaderOptions<T>;
  readonly #states: WindowState<T>[];
  readonly #stop = new AbortController();
  readonly #signal: AbortSignal;
  #cursor = 0;
  #open = 0;
  /** Set while #pump runs: a request queued meanwhile makes it look again instead of re-entering. */
  #pumping = false;
  #pumpAgain = false;
  /** The page size E6 really serves: SYNC_PAGE_SIZE until a page shows less (see onPageSizeClamped). */
  #pageSize: number;

  /**
   * @param windows the run's windows, disjoint, in time order; nothing is requested before
   *   {@link leaves} is first called.
   */
  constructor(client: E6Pages, windows: readonly Window[], options: WindowReaderOptions<T>) {
    this.#client = client;
    this.#o = options;
    this.#pageSize = options.pageSize;
    this.#states = windows.map((window) => ({
      window,
      queue: [],
      open: 0,
      held: [],
      started: false,
      done: false,
      error: undefined,
      dropped: false,
      waiter: undefined,
      stats: { requests: 0, leaves: 0, splits: 0, instants: 0 },
      records: 0,
      cells: undefined,
    }));
    this.#signal = options.signal ? AbortSignal.any([options.signal, this.#stop.signal]) : this.#stop.signal;
    // Queued requests are never sent once stopped: end every window still waiting for one.
    this.#signal.addEventListener(
      'abort',
      () => {
        for (const state of this.#states) this.#fail(state, new AbortedError('sync interrupted'), true);
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
    this.#cursor = index;
    this.#start(state);
    this.#pump();
    for (;;) {
      const leaf = state.held.shift();
      if (leaf !== undefined) {
        this.#pump();
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
    this.#fail(state, new AbortedError('window dropped by the writer'), false);
    this.#pump();
  }

  /** Aborts every request in flight and sends no more. Idempotent. */
  close(): void {
    this.#stop.abort();
  }

  /** Starts reading a window: its first parts, sized from the estimate. */
  #start(state: WindowState<T>): void {
    if (state.started) return;
    state.started = true;
    const { minSplitMs, estimate } = this.#o;
    const parts = estimate.plan(state.window, this.#pageSize, minSplitMs);
    if (this.#o.timesOf) state.cells = new ProfileCells(state.window, minSplitMs);
    Promise.all(parts.map((part) => this.#readPart(state, part))).then(
      () => {
        state.done = true;
        estimate.observe(state.window, state.records, state.cells);
        this.#wake(state);
        this.#pump();
      },
      (err: unknown) => this.#fail(state, err, true),
    );
  }

  #fail(state: WindowState<T>, err: unknown, wake: boolean): void {
    if (state.error === undefined) state.error = err instanceof Error ? err : new Error(String(err));
    for (const task of state.queue.splice(0)) task.reject(err);
    if (wake) this.#wake(state);
  }

  #wake(state: WindowState<T>): void {
    const waiter = state.waiter;
    state.waiter = undefined;
    waiter?.();
  }

  /** One E6 request, queued until the budgets allow it. */
  #request(state: WindowState<T>, part: Window, pageNumber: number, pageSize = this.#pageSize): Promise<AnalyticsPage> {
    if (state.error !== undefined) return Promise.reject(state.error);
    return new Promise<AnalyticsPage>((resolve, reject) => {
      state.queue.push({ part, pageNumber, pageSize, resolve, reject });
      this.#pump();
    });
  }

  async #readPart(state: WindowState<T>, part: Window): Promise<void> {
    const { minSplitMs } = this.#o;
    const page = await whenTooLarge(this.#firstPage(state, part), (err) => this.#readOversized(state, part, err));
    if (page === undefined) return; // over UPSTREAM_MAX_BODY: read split instead
    if (page.data.length === page.totalRecords) {
      this.#hold(state, { part, page: this.#o.prepare(page, part), records: page.data.length });
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
    if (part.start === state.window.start && part.end === state.window.end) this.#o.estimate.observe(part, total);
    const parts = splitOverflow(part, { totalRecords: total, sampleTimes: times }, { pageSize, minSplitMs });
    if (parts.length === 1) {
      await whenTooLarge(this.#readInstant(state, part), (err) => this.#readOversized(state, part, err));
      return;
    }
    state.stats.splits++;
    await Promise.all(parts.map((p) => this.#readPart(state, p)));
  }

  /** A part whose answer was over UPSTREAM_MAX_BODY: its halves in time, or, an instant, read at smaller pages (oversize.ts). */
  async #readOversized(state: WindowState<T>, part: Window, cause: unknown): Promise<void> {
    const halves = splitRange(part, 2, this.#o.minSplitMs);
    if (halves.length > 1) {
      state.stats.splits++;
      await Promise.all(halves.map((half) => this.#readPart(state, half)));
      return;
    }
    await readAtSmallerPages(this.#pageSize, (size) => this.#readInstant(state, part, size), { instant: part, window: state.window, cause });
  }

  /**
   * Page 1 of a part, checked against its own envelope: it holds `min(pageSize asked,
   * totalRecords)` records, or fewer when E6 clamps the page size (learned here, see
   * onPageSizeClamped). A page that holds more than that, or none of a non-zero total, contradicts
   * itself: it is asked again, and after SYNC_WINDOW_ATTEMPTS the window fails.
   *
   * @throws {InconsistentWindowError} when every attempt contradicted itself.
   */
  async #firstPage(state: WindowState<T>, part: Window, pageSize = Infinity): Promise<AnalyticsPage> {
    let served = 0;
    let total = 0;
    let asked = this.#pageSize;
    for (let attempt = 1; attempt <= this.#o.instantAttempts; attempt++) {
      asked = Math.min(this.#pageSize, pageSize);
      const page = await this.#request(state, part, 1, asked);
      served = page.data.length;
      total = page.totalRecords;
      const expected = Math.min(asked, total);
      if (served > expected || (served === 0 && total > 0) || !Number.isInteger(total) || total < 0) continue;
      if (served < expected) this.#learnPageSize(asked, served, page.pageSize);
      return page;
    }
    throw new InconsistentWindowError(
      `E6 answered ${iso(part.start)}..${iso(part.end)} with pages that contradict their own envelope (${served} records on page 1 of ` +
        `totalRecords ${total}, pageSize ${asked} asked) ${this.#o.instantAttempts} times (SYNC_WINDOW_ATTEMPTS); ` +
        `nothing of window ${iso(state.window.start)}..${iso(state.window.end)} was committed`,
    );
  }

  #learnPageSize(asked: number, served: number, echoed: number): void {
    if (served >= this.#pageSize) return;
    this.#pageSize = served;
    this.#o.onPageSizeClamped?.({ asked, served, echoed });
  }

  /**
   * Reads an instant (a part that cannot be split) page by page, twice, and keeps the second read
   * when both hold the same multiset of records with the same `totalRecords` throughout; at most
   * `pageSize` records a page when given (smaller than what E6 serves: oversize.ts).
   */
  async #readInstant(state: WindowState<T>, instant: Window, pageSize?: number): Promise<void> {
    const { instantAttempts, onUnstableInstant } = this.#o;
    state.stats.instants++;
    let records = 0;
    for (let attempt = 1; attempt <= instantAttempts; attempt++) {
      const [first, second] = await Promise.all([this.#pageThrough(state, instant, pageSize), this.#pageThrough(state, instant, pageSize)]);
      records = second.total;
      if (first.total === second.total && first.consistent && second.consistent && sameMultiset(first.keys, second.keys)) {
        for (const page of second.pages) this.#hold(state, { part: instant, page: this.#o.prepare(page, instant), records: page.data.length });
        return;
      }
      onUnstableInstant?.({ instant, records, attempt });
    }
    throw new InconsistentWindowError(
      `instant ${iso(instant.start)}..${iso(instant.end)} holds ${records} records, more than a page (SYNC_PAGE_SIZE ${this.#o.pageSize}), ` +
        `and ${instantAttempts} pairs of reads of it (SYNC_WINDOW_ATTEMPTS) returned different records: E6's order within it is not stable, ` +
        `so paging it could double or lose records; nothing of window ${iso(state.window.start)}..${iso(state.window.end)} was committed. ` +
        `If the API resolves finer times than SYNC_MIN_SPLIT, lower it`,
    );
  }

  /**
   * Pages through a range once: its pages, the multiset of the records it keeps (all but those
   * exactly at its end), and whether every page gave the same totalRecords.
   */
  async #pageThrough(
    state: WindowState<T>,
    range: Window,
    pageSize?: number,
  ): Promise<{ total: number; consistent: boolean; pages: AnalyticsPage[]; keys: Map<string, number> }> {
    const first = await this.#firstPage(state, range, pageSize);
    const total = first.totalRecords;
    // Paged at the size page 1 showed E6 serves (never at totalPages, which an upstream that
    // clamps the size while echoing the asked one gets wrong), and complete only when every
    // record of totalRecords came.
    const size = Math.max(1, first.data.length);
    const rest = await Promise.all(Array.from({ length: Math.max(0, Math.ceil(total / size) - 1) }, (_, i) => this.#request(state, range, i + 2, size)));
    const pages = [first, ...rest];
    const keys = new Map<string, number>();
    let consistent = pages.reduce((sum, page) => sum + page.data.length, 0) === total;
    for (const page of pages) {
      if (page.totalRecords !== total) consistent = false;
      const texts = recordTexts(page);
      for (let i = 0; i < page.data.length; i++) {
        // A record exactly at the end belongs to the next part (an inclusive toDate returns it twice).
        if (this.#o.eventTime(page.data[i]!) === range.end) continue;
        const key = texts[i]!;
        keys.set(key, (keys.get(key) ?? 0) + 1);
      }
    }
    return { total, consistent, pages, keys };
  }

  #hold(state: WindowState<T>, leaf: Leaf<T>): void {
    state.stats.leaves++;
    const cells = state.cells;
    if (this.#o.timesOf && cells !== undefined) {
      // Count what the part keeps: records at its end belong to the next part, and counted here
      // too they would inflate the estimate of later windows.
      for (const ms of this.#o.timesOf(leaf.page)) {
        state.records++;
        if (ms !== null) cells.add(ms);
      }
    } else {
      state.records += leaf.records;
    }
    if (state.dropped) return;
    state.held.push(leaf);
    this.#wake(state);
  }

  /** Launches queued requests, earliest window first, while the budgets allow (see the module comment). */
  #pump(): void {
    if (this.#pumping) {
      this.#pumpAgain = true;
      return;
    }
    this.#pumping = true;
    try {
      do {
        this.#pumpAgain = false;
        while (!this.#signal.aborted && this.#launchNext());
      } while (this.#pumpAgain);
    } finally {
      this.#pumping = false;
    }
  }

  /** Launches one request if the budgets allow; false when none was launched. */
  #launchNext(): boolean {
    const { concurrency } = this.#o;
    const states = this.#states;
    const current = states[this.#cursor];
    if (this.#open >= concurrency) return false;
    if (current !== undefined && !current.dropped && this.#open + current.held.length >= concurrency) return false;
    let later = 0;
    for (let i = this.#cursor + 1; i < states.length && states[i]!.started; i++) later += states[i]!.open + states[i]!.held.length;
    for (let i = this.#cursor; i < states.length; i++) {
      const state = states[i]!;
      if (state.dropped || state.error !== undefined) continue;
      if (i > this.#cursor) {
        if (later >= concurrency) return false;
        // Plan a later window only once the estimate can place its cuts, or when nothing earlier
        // is left to teach it (the first windows of a run would otherwise be cut blind).
        if (!state.started && !this.#o.estimate.ready(state.window, this.#pageSize) && earlierOpen(states, this.#cursor, i)) return false;
        this.#start(state);
      }
      const task = state.queue.shift();
      if (task === undefined) continue;
      this.#launch(state, task);
      return true;
    }
    return false;
  }

  #launch(state: WindowState<T>, task: Task): void {
    state.open++;
    this.#open++;
    state.stats.requests++;
    this.#client
      .fetchPage(
        { startDate: new Date(task.part.start), toDate: new Date(task.part.end), pageNumber: task.pageNumber, pageSize: task.pageSize },
        { signal: this.#signal },
      )
      .then(task.resolve, task.reject)
      .finally(() => {
        state.open--;
        this.#open--;
        this.#pump();
      });
  }
}

/** Whether a window in [from, to) is still being read. */
function earlierOpen(states: readonly { done: boolean }[], from: number, to: number): boolean {
  for (let i = from; i < to; i++) if (!states[i]!.done) return true;
  return false;
}

/**
 * Each record of a page as text, to compare reads: its exact text in the body where there is one
 * (so records differing only in digits JSON.parse rounds away stay different), else its JSON
 * serialisation.
 */
function recordTexts(page: AnalyticsPage): string[] {
  const text = page.text;
  const spans = text === undefined ? undefined : dataElementSpans(text);
  return page.data.map((record, i) => {
    const span = spans?.[i];
    return span !== undefined && text !== undefined ? text.slice(span.start, span.end) : stringifyJson(record);
  });
}

function sameMultiset(a: Map<string, number>, b: Map<string, number>): boolean {
  if (a.size !== b.size) return false;
  for (const [key, count] of a) if (b.get(key) !== count) return false;
  return true;
}
