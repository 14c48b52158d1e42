/**
 * The window reader's E6 requests (reader.ts), queued per window and sent earliest window first
 * under fixed budgets, so that memory is bounded by the budgets, never by a window's size:
 * - at most `concurrency` requests are open at once;
 * - the window being written holds at most `concurrency` pages, open or fetched and not taken;
 * - later windows hold at most `concurrency` pages, open or fetched, between them; the next window
 *   reads past that while the window being written waits for its first slice (boundary.ts).
 * A request's page size is fixed when it is queued. Once aborted (close(), or the caller's signal)
 * nothing more is sent and every queued request ends with an AbortedError.
 * See docs/design/reader-budgets.md.
 */
import { AbortedError } from '../../errors.js';
import type { AnalyticsPage } from '../../upstream/analytics.js';
import type { E6Pages } from '../store/ports.js';
import type { Window } from '../windows.js';

/** One E6 request: page `pageNumber` of `range` at `pageSize`; `count`: a count for boundary sets. */
export interface PageRequest {
  range: Window;
  pageNumber: number;
  pageSize: number;
  count?: boolean;
}

/** What the queue reads of the run's windows (index: position in time order). */
export interface QueuedWindows {
  readonly length: number;
  /** Pages of window `i` fetched and held for the writer, not taken yet. */
  held(i: number): number;
  /** Whether window `i` is planned (its requests may be queued). */
  started(i: number): boolean;
  /** Plans window `i`, later than `writing`, queueing its first requests at once; false: not yet. */
  start(i: number, writing: number): boolean;
  /** Whether window `i` waits for the first slice of the window after it. */
  awaitingNext(i: number): boolean;
  /** A request of window `i` was sent. */
  launched?(i: number, request: PageRequest): void;
}

interface Task extends PageRequest {
  resolve: (page: AnalyticsPage) => void;
  reject: (err: unknown) => void;
}

interface Lane {
  /** Requests not sent yet, in order. */
  pending: Task[];
  open: number;
  /** The first error it failed with: no more requests are sent for it. */
  failed: Error | undefined;
  /** Forgotten by the writer: its held pages no longer count against its budget. */
  dropped: boolean;
}

/** Requests of a run's windows under the budgets of the module comment. */
export class RequestQueue {
  /** Aborted by {@link close} or the caller's signal; open requests are sent with it. */
  readonly signal: AbortSignal;
  readonly #client: E6Pages;
  readonly #windows: QueuedWindows;
  readonly #concurrency: number;
  readonly #lanes: Lane[];
  readonly #stop = new AbortController();
  #abortError: AbortedError | undefined;
  #open = 0;
  #writing = 0;
  /** Set while #pump runs: a request queued meanwhile makes it look again instead of re-entering. */
  #pumping = false;
  #pumpAgain = false;

  constructor(client: E6Pages, windows: QueuedWindows, o: { concurrency: number; signal?: AbortSignal | undefined }) {
    this.#client = client;
    this.#windows = windows;
    this.#concurrency = o.concurrency;
    this.#lanes = Array.from({ length: windows.length }, () => ({ pending: [], open: 0, failed: undefined, dropped: false }));
    this.signal = o.signal ? AbortSignal.any([o.signal, this.#stop.signal]) : this.#stop.signal;
    this.signal.addEventListener(
      'abort',
      () => {
        this.#abortError = new AbortedError(o.signal?.aborted ? 'sync interrupted by a signal' : 'sync interrupted');
        for (let i = 0; i < this.#lanes.length; i++) this.fail(i, this.#abortError);
      },
      { once: true },
    );
  }

  /** What every queued request ended with once aborted; undefined before. */
  get abortError(): AbortedError | undefined {
    return this.#abortError;
  }

  /** The window being written: the budgets count from it, and earlier ones get nothing more. */
  get writing(): number {
    return this.#writing;
  }

  set writing(index: number) {
    this.#writing = index;
  }

  /**
   * Queues a request of window `index`, sent when the budgets allow.
   *
   * @throws (rejects) what E6Pages.fetchPage throws; the error window `index` failed with
   *   ({@link fail}), or an AbortedError, when it ends unsent.
   */
  request(index: number, request: PageRequest): Promise<AnalyticsPage> {
    const lane = this.#lanes[index]!;
    if (lane.failed !== undefined) return Promise.reject(lane.failed);
    return new Promise<AnalyticsPage>((resolve, reject) => {
      lane.pending.push({ ...request, resolve, reject });
      this.pump();
    });
  }

  /** Ends window `index`'s queued requests with `err` and sends none of its later ones. */
  fail(index: number, err: unknown): void {
    const lane = this.#lanes[index];
    if (lane === undefined) return;
    lane.failed ??= err instanceof Error ? err : new Error(String(err));
    for (const task of lane.pending.splice(0)) task.reject(err);
  }

  /** Window `index` was forgotten by the writer: its held pages stop counting against the budget. */
  drop(index: number): void {
    const lane = this.#lanes[index];
    if (lane !== undefined) lane.dropped = true;
  }

  /** Aborts every open request and sends no more. Idempotent. */
  close(): void {
    this.#stop.abort();
  }

  /** Sends queued requests, earliest window first, while the budgets allow. Call after anything they count changed. */
  pump(): void {
    if (this.#pumping) {
      this.#pumpAgain = true;
      return;
    }
    this.#pumping = true;
    try {
      do {
        this.#pumpAgain = false;
        while (!this.signal.aborted && this.#launchNext());
      } while (this.#pumpAgain);
    } finally {
      this.#pumping = false;
    }
  }

  /** Sends one request if the budgets allow; false when none was sent. */
  #launchNext(): boolean {
    const concurrency = this.#concurrency;
    const windows = this.#windows;
    const lanes = this.#lanes;
    const writing = this.#writing;
    const current = lanes[writing];
    if (this.#open >= concurrency) return false;
    if (current !== undefined && !current.dropped && this.#open + windows.held(writing) >= concurrency) return false;
    let later = 0;
    for (let i = writing + 1; i < lanes.length && windows.started(i); i++) later += lanes[i]!.open + windows.held(i);
    for (let i = writing; i < lanes.length; i++) {
      const lane = lanes[i]!;
      if (lane.dropped || lane.failed !== undefined) continue;
      if (i > writing) {
        if (later >= concurrency && !(i === writing + 1 && current !== undefined && windows.awaitingNext(writing))) return false;
        if (!windows.start(i, writing)) return false;
      }
      const task = lane.pending.shift();
      if (task === undefined) continue;
      this.#launch(i, lane, task);
      return true;
    }
    return false;
  }

  #launch(index: number, lane: Lane, task: Task): void {
    lane.open++;
    this.#open++;
    this.#windows.launched?.(index, task);
    this.#client
      .fetchPage(
        { startDate: new Date(task.range.start), toDate: new Date(task.range.end), pageNumber: task.pageNumber, pageSize: task.pageSize },
        { signal: this.signal },
      )
      .then(task.resolve, task.reject)
      .finally(() => {
        lane.open--;
        this.#open--;
        this.pump();
      });
  }
}
