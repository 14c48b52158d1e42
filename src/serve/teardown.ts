/**
 * Teardown as a stack (graphile-worker's `Releasers`): each resource registers its release the
 * moment it is acquired, and {@link TeardownStack.release} unwinds exactly what was acquired, in
 * reverse, whenever it is called: after a full start, halfway through one that failed, or while
 * a start is still acquiring.
 *
 * Every release is bounded. A release that throws is reported and counts as done (there is
 * nothing left to wait for). One that returns `false` (it stopped waiting at its own bound) or
 * is still going at the stack's bound leaves the teardown undrained: the caller is answered
 * `{ drained: false }` at once, as a process should then exit rather than wait, and the releases
 * below it run in the background only once it has settled, because what lies below (the pool, the
 * data-dir lock) may still be in use by what lies above (a stuck run, a database closing).
 */
import { settledWithin } from '../settle.js';

/**
 * Lets a resource go. Resolving `false` says it was still busy at its own bound (a sync left
 * running); anything else says it is released. A throw is reported and counts as released.
 */
export type Release = () => unknown;

export interface ReleaseOptions {
  /** Stop waiting for this release after so many milliseconds: the teardown is then undrained. */
  timeoutMs?: number;
}

export interface TeardownHooks {
  /** A release threw (or rejected); unwinding goes on. Must not throw. */
  onError: (name: string, err: unknown) => void;
  /** A release was still going at its bound; what lies below it waits for it in the background. Must not throw. */
  onTimeout?: (name: string, timeoutMs: number) => void;
}

interface Entry {
  name: string;
  release: Release;
  timeoutMs: number | undefined;
}

/** Resources in the order they were acquired, released in reverse; see the module comment. */
export class TeardownStack {
  readonly #hooks: TeardownHooks;
  readonly #entries: Entry[] = [];
  #releasing: Promise<{ drained: boolean }> | undefined;
  /** Set once unwinding has reached the bottom: a resource registered after that is released at once. */
  #done = false;

  constructor(hooks: TeardownHooks) {
    this.#hooks = hooks;
  }

  /** Names of the resources held, oldest first (for tests and logs). */
  get held(): string[] {
    return this.#entries.map((entry) => entry.name);
  }

  /** Whether {@link release} has been called: a start still acquiring should stop. */
  get releasing(): boolean {
    return this.#releasing !== undefined;
  }

  /**
   * Registers the release of a resource just acquired. During unwinding it goes on top, so it is
   * the next released; after unwinding has finished it is released at once, in the background
   * (a start that acquired it while the stop was under way).
   *
   * @param name for reports: `upstream clients`, `database`.
   */
  add(name: string, release: Release, options: ReleaseOptions = {}): void {
    const entry: Entry = { name, release, timeoutMs: options.timeoutMs };
    if (this.#done) {
      void this.#releaseOne(entry);
      return;
    }
    this.#entries.push(entry);
  }

  /**
   * Releases everything held, newest first, each within its bound. Idempotent: later calls get
   * the same promise. Never rejects.
   *
   * @returns `drained: false` as soon as a release is still busy at its bound; the rest is then
   *   released in the background, each once the one above it has settled.
   */
  release(): Promise<{ drained: boolean }> {
    return (this.#releasing ??= new Promise((resolve) => {
      void this.#unwind(resolve);
    }));
  }

  async #unwind(answer: (result: { drained: boolean }) => void): Promise<void> {
    let answered = false;
    for (let entry = this.#entries.pop(); entry !== undefined; entry = this.#entries.pop()) {
      const step = await this.#releaseOne(entry);
      if (!step.drained && !answered) {
        answered = true;
        answer({ drained: false });
      }
      // What lies below may be in use by this release until it settles.
      if (!step.settled) await step.later;
    }
    this.#done = true;
    if (!answered) answer({ drained: true });
  }

  /** Runs one release within its bound: whether it finished in time, and its settling when it did not. */
  async #releaseOne(entry: Entry): Promise<{ drained: boolean; settled: boolean; later: Promise<unknown> }> {
    // A release that throws at once is treated as one that rejects.
    const running = new Promise<unknown>((resolve) => resolve(entry.release()));
    const outcome = running.then(
      (value) => value !== false,
      (err: unknown) => {
        this.#hooks.onError(entry.name, err);
        return true;
      },
    );
    if (entry.timeoutMs === undefined) return { drained: await outcome, settled: true, later: outcome };
    const settled = await settledWithin(outcome, entry.timeoutMs);
    if (settled) return { drained: await outcome, settled: true, later: outcome };
    this.#hooks.onTimeout?.(entry.name, entry.timeoutMs);
    return { drained: false, settled: false, later: outcome };
  }
}
