/**
 * The request budget (UPSTREAM_RATE_LIMIT): paces E6 and E7 requests before they are sent, so a
 * backfill stays under the platform's rate limit (reference: Limits) instead of tripping 429 and
 * backing off. One budget is shared by every E6/E7 request of the process, retries included.
 *
 * - A token bucket: `ratePerSecond` tokens a second, holding at most `burst`; a request takes one,
 *   and waits, in order of arrival, while there is none.
 * - AIMD on the rate: a 429 halves it (multiplicative decrease, at most once per
 *   {@link DECREASE_HOLD_MS}, down to {@link MIN_RATE_SHARE} of the configured rate) and empties the
 *   bucket; each second since the last change, once a request succeeds again, adds
 *   {@link ADDITIVE_INCREASE_SHARE} of the configured rate back (additive increase), up to the
 *   configured rate.
 *
 * Time is injected (`now`, `sleep`), so tests drive the bucket and the AIMD on a fake clock.
 */
import type { RateLimit } from '../config.js';
import { AbortedError } from '../errors.js';
import { abortableSleep } from './retry.js';

/** A 429 multiplies the current rate by this. */
export const MULTIPLICATIVE_DECREASE = 0.5;
/** Each second without a 429, once a request succeeds, adds this share of the configured rate (10%: a halved rate is back in 5 s). */
export const ADDITIVE_INCREASE_SHARE = 0.1;
/** The rate never falls below this share of the configured rate (5%), so a run always moves on. */
export const MIN_RATE_SHARE = 0.05;
/**
 * 429s within this long of a decrease do not decrease the rate again: they answer requests sent
 * before the first 429 was seen (four pages in flight see four 429s for one overload), and
 * counting each would cut the rate to a sixteenth for one event.
 */
export const DECREASE_HOLD_MS = 1_000;

/** Hooks for the exporter's own metrics. */
export interface BudgetObserver {
  /** The current rate, in requests per second: at start and after every change. */
  onRate?(ratePerSecond: number): void;
  /** One request waited this many seconds (> 0) for the budget before it was sent. */
  onWait?(seconds: number): void;
}

export interface RequestBudgetOptions extends RateLimit {
  /** A monotonic clock in milliseconds; default `performance.now`. */
  now?: () => number;
  /** Waits `ms`, rejecting with {@link AbortedError} when `signal` aborts; default a timer. */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  observer?: BudgetObserver;
}

/** A token bucket with an AIMD-adjusted rate, shared by the requests of one process (see the module comment). */
export class RequestBudget {
  readonly #limit: number;
  readonly #burst: number;
  readonly #minRate: number;
  readonly #now: () => number;
  readonly #sleep: (ms: number, signal?: AbortSignal) => Promise<void>;
  readonly #observer: BudgetObserver | undefined;
  #rate: number;
  #tokens: number;
  /** When `#tokens` was last brought up to date, in `now()` milliseconds. */
  #refilledAt: number;
  /** When the rate last changed (or an increase was last counted from). */
  #adjustedAt: number;
  #decreasedAt: number | undefined;
  /** The waiters' queue: each acquisition starts after the one before it is granted or given up. */
  #queue: Promise<void> = Promise.resolve();

  /** @throws {RangeError} when `ratePerSecond` is not > 0 or `burst` not a whole number ≥ 1. */
  constructor(options: RequestBudgetOptions) {
    if (!(Number.isFinite(options.ratePerSecond) && options.ratePerSecond > 0)) throw new RangeError(`ratePerSecond must be > 0; got ${options.ratePerSecond}`);
    if (!(Number.isSafeInteger(options.burst) && options.burst >= 1)) throw new RangeError(`burst must be a whole number ≥ 1; got ${options.burst}`);
    this.#limit = options.ratePerSecond;
    this.#burst = options.burst;
    this.#minRate = options.ratePerSecond * MIN_RATE_SHARE;
    this.#now = options.now ?? (() => performance.now());
    this.#sleep = options.sleep ?? abortableSleep;
    this.#observer = options.observer;
    this.#rate = options.ratePerSecond;
    this.#tokens = options.burst;
    this.#refilledAt = this.#adjustedAt = this.#now();
    this.#observer?.onRate?.(this.#rate);
  }

  /** The current rate, in requests per second: the configured one, or less after 429s. */
  get ratePerSecond(): number {
    return this.#rate;
  }

  /** The configured rate (UPSTREAM_RATE_LIMIT), in requests per second. */
  get limitPerSecond(): number {
    return this.#limit;
  }

  /**
   * Waits until a request may be sent, and takes its token. Waiters are served in order of arrival.
   *
   * @throws {AbortedError} when `signal` aborts first (no token is taken).
   */
  async acquire(signal?: AbortSignal): Promise<void> {
    const started = this.#now();
    const turn = this.#queue.then(() => this.#take(signal));
    this.#queue = turn.catch(() => undefined);
    if (signal === undefined) await turn;
    else await untilAborted(turn, signal);
    const waitedMs = this.#now() - started;
    if (waitedMs > 0) this.#observer?.onWait?.(waitedMs / 1000);
  }

  /** A response said 429 (Too Many Requests): halves the rate (see {@link DECREASE_HOLD_MS}) and empties the bucket. */
  throttled(): void {
    const t = this.#now();
    this.#refill(t);
    this.#tokens = Math.min(this.#tokens, 0);
    if (this.#decreasedAt !== undefined && t - this.#decreasedAt < DECREASE_HOLD_MS) return;
    this.#decreasedAt = this.#adjustedAt = t;
    const rate = Math.max(this.#minRate, this.#rate * MULTIPLICATIVE_DECREASE);
    if (rate !== this.#rate) {
      this.#rate = rate;
      this.#observer?.onRate?.(rate);
    }
  }

  /**
   * A request succeeded: adds {@link ADDITIVE_INCREASE_SHARE} of the configured rate for each whole
   * second since the rate last changed, up to the configured rate.
   */
  succeeded(): void {
    const t = this.#now();
    const seconds = Math.floor((t - this.#adjustedAt) / 1000);
    if (seconds < 1) return;
    this.#adjustedAt += seconds * 1000;
    if (this.#rate >= this.#limit) return;
    this.#refill(t);
    this.#rate = Math.min(this.#limit, this.#rate + seconds * this.#limit * ADDITIVE_INCREASE_SHARE);
    this.#observer?.onRate?.(this.#rate);
  }

  #refill(t: number): void {
    this.#tokens = Math.min(this.#burst, this.#tokens + (Math.max(0, t - this.#refilledAt) / 1000) * this.#rate);
    this.#refilledAt = t;
  }

  async #take(signal: AbortSignal | undefined): Promise<void> {
    for (;;) {
      if (signal?.aborted) throw new AbortedError('aborted while waiting for the request budget (UPSTREAM_RATE_LIMIT)');
      this.#refill(this.#now());
      if (this.#tokens >= 1) {
        this.#tokens -= 1;
        return;
      }
      // Recomputed after each wait: the rate may have changed meanwhile.
      await this.#sleep(Math.max(1, Math.ceil(((1 - this.#tokens) / this.#rate) * 1000)), signal);
    }
  }
}

/** `turn`, or an {@link AbortedError} as soon as `signal` aborts (the turn then gives itself up without a token). */
function untilAborted(turn: Promise<void>, signal: AbortSignal): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const onAbort = (): void => reject(new AbortedError('aborted while waiting for the request budget (UPSTREAM_RATE_LIMIT)'));
    if (signal.aborted) {
      onAbort();
      return;
    }
    signal.addEventListener('abort', onAbort, { once: true });
    turn.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}
