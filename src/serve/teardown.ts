/**
 * Teardown as a stack (graphile-worker's `Releasers`): each resource registers its release as it
 * is acquired, and {@link TeardownStack.release} unwinds exactly that, in reverse, whenever it is
 * called. Every release is bounded; one still busy at its bound answers `{ drained: false }` at
 * once, and what lies below it is released only once it settles. See
 * docs/design/serve-lifecycle.md.
 */
import { settledWithin } from '../settle.js';

/** Lets a resource go: `false` if still busy at its own bound; a throw is reported and counts as released. */
export type Release = () => unknown;

export interface ReleaseOptions {
  timeoutMs?: number;
}

export interface TeardownHooks {
  /** Must not throw. */
  onError: (name: string, err: unknown) => void;
  onTimeout?: (name: string, timeoutMs: number) => void;
}

interface Entry {
  name: string;
  release: Release;
  timeoutMs: number | undefined;
}

/** Resources in the order they were acquired, released in reverse. */
export class TeardownStack {
  readonly #hooks: TeardownHooks;
  readonly #entries: Entry[] = [];
  #releasing: Promise<{ drained: boolean }> | undefined;
  #done = false;

  constructor(hooks: TeardownHooks) {
    this.#hooks = hooks;
  }

  /** Oldest first. */
  get held(): string[] {
    return this.#entries.map((entry) => entry.name);
  }

  /** Whether {@link release} has been called: a start still acquiring should stop. */
  get releasing(): boolean {
    return this.#releasing !== undefined;
  }

  /** Registers the release of a resource just acquired; after unwinding has finished, releases it at once. */
  add(name: string, release: Release, options: ReleaseOptions = {}): void {
    const entry: Entry = { name, release, timeoutMs: options.timeoutMs };
    if (this.#done) {
      void this.#releaseOne(entry);
      return;
    }
    this.#entries.push(entry);
  }

  /** Releases everything held, newest first, each within its bound. Idempotent; never rejects. */
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
    // A release that throws at once rejects this promise too.
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
