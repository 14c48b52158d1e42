/**
 * Fetches E6 pages ahead of the writer, across window boundaries, with fixed budgets: memory is
 * bounded by `2 × concurrency` pages (plus the one being written), never by the size of a window
 * or a run.
 *
 * Pages are launched earliest window first: the pages of the window being written, then page 1
 * of the windows after it (their page count is unknown until page 1 answers), then their further
 * pages. A slow upstream with many one-page windows thus still sees `concurrency` requests at once.
 *
 * Two budgets keep pages fetched ahead for later windows from starving the window being written:
 * - the window being written holds at most `concurrency` pages (requested or fetched, not yet
 *   taken), and requests still open for later windows count against that same budget, so at most
 *   `concurrency` requests are ever open;
 * - later windows hold at most `concurrency` pages between them. Once fetched, their pages wait
 *   outside the first budget, so the window being written gets its `concurrency` requests at once
 *   even while page 1 of the next windows waits for the writer.
 */
import type { AnalyticsClient, AnalyticsPage } from '../upstream/analytics.js';
import type { Window } from './windows.js';

interface WindowState<T> {
  window: Window;
  /** Known once page 1 answered. */
  totalPages: number | undefined;
  /** Next page number to launch. */
  nextPage: number;
  /** Launched pages not yet taken. */
  pending: Map<number, Promise<T>>;
  /** Launched pages whose request has not answered yet. */
  open: number;
  dropped: boolean;
}

export interface PrefetcherOptions<T> {
  pageSize: number;
  /**
   * Requests open at once, at most; also the most pages held for the window being written, and
   * for the later windows together (see the module comment).
   */
  concurrency: number;
  signal?: AbortSignal;
  /**
   * Turns a fetched page into what is held until the writer takes it, as soon as it arrives: a
   * caller that keeps less than the parsed page (say, the body's text and an event time per
   * record) lets the parsed records die young instead of waiting, promoted, in the old generation.
   * Must not throw. Default: the page itself.
   */
  prepare?: (page: AnalyticsPage, window: Window) => T;
}

/** Anything held for the writer must say how many pages its window has (page 1 tells). */
export interface PageCount {
  totalPages: number;
}

export class Prefetcher<T extends PageCount = AnalyticsPage> {
  readonly #client: AnalyticsClient;
  readonly #options: PrefetcherOptions<T>;
  /** The `prepare` option, or the identity; a prefetcher for a refetch reuses it. */
  readonly prepare: (page: AnalyticsPage, window: Window) => T;
  readonly #states: WindowState<T>[];
  readonly #stop = new AbortController();
  readonly #signal: AbortSignal;
  /** Index of the window the writer is on; earlier windows are never launched again. */
  #cursor = 0;

  constructor(client: AnalyticsClient, windows: readonly Window[], options: PrefetcherOptions<T>) {
    this.#client = client;
    this.#options = options;
    this.prepare = options.prepare ?? ((page) => page as unknown as T);
    this.#states = windows.map((window) => ({ window, totalPages: undefined, nextPage: 1, pending: new Map(), open: 0, dropped: false }));
    this.#signal = options.signal ? AbortSignal.any([options.signal, this.#stop.signal]) : this.#stop.signal;
    this.#pump();
  }

  /**
   * Returns page `pageNumber` of window `index`, launching it now if the budget had not reached it.
   * The writer takes pages in order: all pages of a window, then the next window.
   *
   * @returns the page as `prepare` made it.
   * @throws what {@link AnalyticsClient.fetchPage} throws for that page.
   */
  async take(index: number, pageNumber: number): Promise<T> {
    const state = this.#states[index];
    if (state === undefined) throw new RangeError(`no window ${index}`);
    this.#cursor = index;
    let pending = state.pending.get(pageNumber);
    if (pending === undefined) {
      if (pageNumber >= state.nextPage) state.nextPage = pageNumber + 1;
      pending = this.#launch(state, pageNumber);
      state.pending.set(pageNumber, pending);
    }
    try {
      return await pending;
    } finally {
      state.pending.delete(pageNumber);
      this.#pump();
    }
  }

  /**
   * Forgets the prefetched pages of window `index` (the writer will fetch it again itself, or the
   * run is ending). Their requests finish in the background and are dropped.
   */
  drop(index: number): void {
    const state = this.#states[index];
    if (state === undefined || state.dropped) return;
    state.dropped = true;
    state.pending.clear();
    this.#pump();
  }

  /** Aborts every request in flight. Idempotent. */
  close(): void {
    this.#stop.abort();
  }

  #launch(state: WindowState<T>, pageNumber: number): Promise<T> {
    state.open++;
    const promise = this.#client
      .fetchPage(
        { startDate: new Date(state.window.start), toDate: new Date(state.window.end), pageNumber, pageSize: this.#options.pageSize },
        { signal: this.#signal },
      )
      .then((page) => this.prepare(page, state.window));
    promise.then(
      (page) => {
        state.open--;
        if (pageNumber === 1) state.totalPages = page.totalPages;
        this.#pump();
      },
      () => {
        state.open--; // the error is surfaced by take(); never an unhandled rejection
        this.#pump();
      },
    );
    return promise;
  }

  /** Launches pages, earliest window first, while the budgets allow (see the module comment). */
  #pump(): void {
    if (this.#signal.aborted) return;
    const { concurrency } = this.#options;
    const states = this.#states;
    // Later windows are launched in order, so those holding pages directly follow the cursor.
    const current = states[this.#cursor];
    let used = current === undefined || current.dropped ? 0 : current.pending.size;
    let laterHeld = 0;
    for (let i = this.#cursor + 1; i < states.length && states[i]!.nextPage > 1; i++) {
      const state = states[i]!;
      if (state.dropped) continue;
      used += state.open;
      laterHeld += state.pending.size;
    }
    for (let i = this.#cursor; i < states.length && used < concurrency; i++) {
      const state = states[i]!;
      if (state.dropped) continue;
      const later = i > this.#cursor;
      if (later && laterHeld >= concurrency) break;
      while (used < concurrency && (!later || laterHeld < concurrency)) {
        const next = state.nextPage;
        if (next > 1 && (state.totalPages === undefined || next > state.totalPages)) break;
        state.nextPage++;
        state.pending.set(next, this.#launch(state, next));
        used++;
        if (later) laterHeld++;
      }
    }
  }
}
