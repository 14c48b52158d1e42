/**
 * Counting events that must not log one line each (malformed requests, refused connections,
 * refused logins): the first event is told at once, those that follow within the interval are
 * told together when it ends, so a client sending thousands of them costs a line a minute.
 */

/** What one line tells: the counts by kind since `since`, and the last client's address. */
export interface IntervalCounts<K extends string> {
  /** Events since the last line, all kinds. */
  count: number;
  byKind: Record<K, number>;
  /** When the first of them came, ISO 8601. */
  since: string;
  lastRemote: string | undefined;
  intervalMs: number;
}

/**
 * Counts events by kind and hands `tell` at most one {@link IntervalCounts} per `intervalMs`: the
 * first event at once, those that follow within the interval when it ends (one unref'd timer).
 * {@link close} tells what is still counted and stops the timer.
 */
export class IntervalCount<K extends string> {
  readonly #kinds: readonly K[];
  readonly #intervalMs: number;
  readonly #tell: (counts: IntervalCounts<K>) => void;
  #counted: Record<K, number>;
  #total = 0;
  #since = 0;
  #lastRemote: string | undefined;
  /** When the last line was told (Date.now()), or undefined before the first. */
  #toldAt: number | undefined;
  #timer: NodeJS.Timeout | undefined;

  /** @param intervalMs at least this many milliseconds between two lines. */
  constructor(kinds: readonly K[], intervalMs: number, tell: (counts: IntervalCounts<K>) => void) {
    this.#kinds = kinds;
    this.#intervalMs = intervalMs;
    this.#tell = tell;
    this.#counted = this.#zero();
  }

  /** Counts one event of `kind` from `remote` (the client's address, when known). */
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

  /** Tells what was counted since the last line, if anything, and stops the timer (the server closed). */
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
