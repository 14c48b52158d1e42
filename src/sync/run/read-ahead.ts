/**
 * The read-ahead of the window after the one loading (load-window.ts), begun as soon as every leaf
 * of that one was taken: at most one at a time, so a run holds at most two windows' read-ahead.
 * Design: docs/design/sync-run.md.
 */
import type { PreparedPage } from '../read/prepare.js';
import type { Leaf } from '../read/reader.js';
import type { Window } from '../windows.js';

/** A window's leaves taken before its transaction: `held` in order, then `rest` when over the bound. */
export interface ReadAhead {
  held: Leaf<PreparedPage>[];
  rest: AsyncGenerator<Leaf<PreparedPage>, void, undefined> | undefined;
  /** Called once `rest` is taken whole. */
  whenRead?: () => void;
}

/** One window of the run: its position in the reader's order. */
interface Job {
  window: Window;
  index: number;
}

/** The run's one read-ahead begun early, if any. */
export class ReadAheads {
  readonly #windows: readonly Window[];
  #next: { index: number; ahead: Promise<ReadAhead> } | undefined;

  /** @param windows the run's windows, in the reader's order. */
  constructor(windows: readonly Window[]) {
    this.#windows = windows;
  }

  /** Window `job`'s read-ahead: the one begun early, else `read()` now. @throws what the reader throws. */
  take(job: Job, read: () => Promise<ReadAhead>): Promise<ReadAhead> {
    const next = this.#next;
    if (next?.index !== job.index) return read();
    this.#next = undefined;
    return next.ahead;
  }

  /** Begins reading the window after `index` ahead with `read`, unless one is begun or none follows. */
  begin(index: number, read: (job: Job) => Promise<ReadAhead>): void {
    const window = this.#windows[index + 1];
    if (window === undefined || this.#next !== undefined) return;
    const ahead = read({ window, index: index + 1 });
    // Its failure is the window's: thrown when it is taken (or dropped by close()).
    ahead.catch(() => undefined);
    this.#next = { index: index + 1, ahead };
  }

  /** Lets go of a read-ahead not taken (the run stopped first), `drop`ping its window. Never throws. */
  async close(drop: (index: number) => void): Promise<void> {
    const next = this.#next;
    this.#next = undefined;
    if (next === undefined) return;
    drop(next.index);
    const ahead = await next.ahead.catch(() => undefined);
    await ahead?.rest?.return();
  }
}
