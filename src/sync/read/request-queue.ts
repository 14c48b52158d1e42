/**
 * The window reader's E6 requests, queued per window and sent earliest window first under fixed
 * budgets: at most `concurrency` open; the window being written holds at most `concurrency` pages
 * (open, or fetched and not taken); later windows as many between them, the next one past that
 * while the written one waits for its first slice. "Written" is the window whose leaves are being
 * taken (`writing`): the loader takes the next one while the one before is in its transaction, so
 * memory holds up to two windows' SYNC_READ_AHEAD besides these budgets. Once aborted (close() or
 * the caller's signal) nothing more is sent and every queued request ends with an AbortedError.
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
  pending: Task[];
  open: number;
  failed: Error | undefined;
  dropped: boolean;
}

/** A run's E6 requests under the budgets of the module comment. */
export class RequestQueue {
  /** Aborted by {@link close} or the caller's signal; requests are sent with it. */
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

  /** What queued requests ended with once aborted. */
  get abortError(): AbortedError | undefined {
    return this.#abortError;
  }

  /** The window being written: the budgets count from it. */
  get writing(): number {
    return this.#writing;
  }

  set writing(index: number) {
    this.#writing = index;
  }

  /** Queues a request of window `index`; rejects with what fetchPage throws, or the window's failure. */
  request(index: number, request: PageRequest): Promise<AnalyticsPage> {
    const lane = this.#lanes[index]!;
    if (lane.failed !== undefined) return Promise.reject(lane.failed);
    return new Promise<AnalyticsPage>((resolve, reject) => {
      lane.pending.push({ ...request, resolve, reject });
      this.pump();
    });
  }

  /** Ends window `index`'s queued requests with `err`; none of its later ones is sent. */
  fail(index: number, err: unknown): void {
    const lane = this.#lanes[index];
    if (lane === undefined) return;
    lane.failed ??= err instanceof Error ? err : new Error(String(err));
    for (const task of lane.pending.splice(0)) task.reject(err);
  }

  /** Window `index` was forgotten by the writer: its held pages stop counting. */
  drop(index: number): void {
    const lane = this.#lanes[index];
    if (lane !== undefined) lane.dropped = true;
  }

  /** Aborts every open request and sends no more. Idempotent. */
  close(): void {
    this.#stop.abort();
  }

  /** Sends queued requests while the budgets allow; call after anything they count changed. */
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
