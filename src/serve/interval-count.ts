/**
 * Counting events that must not log one line each (malformed requests, refused connections and
 * logins): the first is told at once, those within the interval together when it ends.
 */

/** What one line tells. */
export interface IntervalCounts<K extends string> {
  /** All kinds. */
  count: number;
  byKind: Record<K, number>;
  /** ISO 8601, the first event's. */
  since: string;
  lastRemote: string | undefined;
  intervalMs: number;
}

/** Hands `tell` at most one {@link IntervalCounts} per `intervalMs` (one unref'd timer). */
export class IntervalCount<K extends string> {
  readonly #kinds: readonly K[];
  readonly #intervalMs: number;
  readonly #tell: (counts: IntervalCounts<K>) => void;
  #counted: Record<K, number>;
  #total = 0;
  #since = 0;
  #lastRemote: string | undefined;
  #toldAt: number | undefined;
  #timer: NodeJS.Timeout | undefined;

  constructor(kinds: readonly K[], intervalMs: number, tell: (counts: IntervalCounts<K>) => void) {
    this.#kinds = kinds;
    this.#intervalMs = intervalMs;
    this.#tell = tell;
    this.#counted = this.#zero();
  }

  /** `remote`: the client's address, when known. */
  record(kind: K, remote: string | undefined): void {
    const now = Date.now();
    if (this.#total === 0) this.#since = now;
    this.#counted[kind] += 1;
    this.#total += 1;
    this.#lastRemote = remote;
    if (this.#toldAt === undefined || now - this.#toldAt >= this.#intervalMs) {
      this.#flush();
      return;
    }
    this.#timer ??= setTimeout(
      () => {
        this.#timer = undefined;
        this.#flush();
      },
      this.#toldAt + this.#intervalMs - now,
    ).unref();
  }

  /** Tells what is still counted and stops the timer. */
  close(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#flush();
  }

  #zero(): Record<K, number> {
    return Object.fromEntries(this.#kinds.map((k) => [k, 0])) as Record<K, number>;
  }

  #flush(): void {
    if (this.#total === 0) return;
    const counts = {
      count: this.#total,
      byKind: this.#counted,
      since: new Date(this.#since).toISOString(),
      lastRemote: this.#lastRemote,
      intervalMs: this.#intervalMs,
    };
    this.#counted = this.#zero();
    this.#total = 0;
    this.#toldAt = Date.now();
    this.#tell(counts);
  }
}
