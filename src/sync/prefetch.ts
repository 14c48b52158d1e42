/**
 * Fetches E6 pages ahead of the writer, across window boundaries, with a fixed budget of pages
 * in flight: memory is bounded by `concurrency` pages (plus the one being written), never by
 * the size of a window or a run.
 *
 * Pages are launched earliest window first: the pages of the window being written, then page 1
 * of the windows after it (their page count is unknown until page 1 answers). A slow upstream
 * with many one-page windows thus still sees `concurrency` requests at once.
 */
import type { AnalyticsClient, AnalyticsPage } from '../upstream/analytics.js';
import type { Window } from './windows.js';

interface WindowState {
  window: Window;
  /** Known once page 1 answered. */
  totalPages: number | undefined;
  /** Next page number to launch. */
  nextPage: number;
  /** Launched pages not yet taken. */
  pending: Map<number, Promise<AnalyticsPage>>;
  dropped: boolean;
}

export interface PrefetcherOptions {
  pageSize: number;
  /** Pages in flight or fetched but not yet taken, at most. */
  concurrency: number;
  signal?: AbortSignal;
}

export class Prefetcher {
  readonly #client: AnalyticsClient;
  readonly #options: PrefetcherOptions;
  readonly #states: WindowState[];
  readonly #stop = new AbortController();
  readonly #signal: AbortSignal;
  /** Index of the window the writer is on; earlier windows are never launched again. */
  #cursor = 0;
  #inFlight = 0;

  constructor(client: AnalyticsClient, windows: readonly Window[], options: PrefetcherOptions) {
    this.#client = client;
    this.#options = options;
    this.#states = windows.map((window) => ({ window, totalPages: undefined, nextPage: 1, pending: new Map(), dropped: false }));
    this.#signal = options.signal ? AbortSignal.any([options.signal, this.#stop.signal]) : this.#stop.signal;
    this.#pump();
  }

  /**
   * Returns page `pageNumber` of window `index`, launching it now if the budget had not reached it.
   * The writer takes pages in order: all pages of a window, then the next window.
   *
   * @throws what {@link AnalyticsClient.fetchPage} throws for that page.
   */
  async take(index: number, pageNumber: number): Promise<AnalyticsPage> {
    const state = this.#states[index];
    if (state === undefined) throw new RangeError(`no window ${index}`);
    this.#cursor = index;
    let pending = state.pending.get(pageNumber);
    if (pending === undefined) {
      if (pageNumber >= state.nextPage) state.nextPage = pageNumber + 1;
      pending = this.#launch(state, pageNumber);
    }
    state.pending.delete(pageNumber);
    try {
      return await pending;
    } finally {
      this.#inFlight--;
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
    this.#inFlight -= state.pending.size;
    state.pending.clear();
    this.#pump();
  }

  /** Aborts every request in flight. Idempotent. */
  close(): void {
    this.#stop.abort();
  }

  #launch(state: WindowState, pageNumber: number): Promise<AnalyticsPage> {
    this.#inFlight++;
    const promise = this.#client.fetchPage(
      { startDate: new Date(state.window.start), toDate: new Date(state.window.end), pageNumber, pageSize: this.#options.pageSize },
      { signal: this.#signal },
    );
    promise.catch(() => undefined); // surfaced by take(); never an unhandled rejection
    if (pageNumber === 1) {
      promise.then(
        (page) => {
          state.totalPages = page.totalPages;
          this.#pump();
        },
        () => undefined,
      );
    }
    return promise;
  }

  /** Launches pages, earliest window first, while the budget allows. */
  #pump(): void {
    if (this.#signal.aborted) return;
    for (let i = this.#cursor; i < this.#states.length && this.#inFlight < this.#options.concurrency; i++) {
      const state = this.#states[i]!;
      if (state.dropped) continue;
      while (this.#inFlight < this.#options.concurrency) {
        const next = state.nextPage;
        if (next > 1 && (state.totalPages === undefined || next > state.totalPages)) break;
        state.nextPage++;
        state.pending.set(next, this.#launch(state, next));
      }
    }
  }
}
