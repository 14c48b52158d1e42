/**
 * The request budget (UPSTREAM_RATE_LIMIT, reference Limits): a token bucket that paces E6 and E7
 * requests, retries included, with an AIMD-adjusted rate (a 429 halves it, success restores it).
 * Time is injected. Design: docs/design/upstream-requests.md ("Request budget").
 */
import type { RateLimit } from '../config.js';
import { AbortedError } from '../errors.js';
import { abortableSleep } from './retry.js';

const MULTIPLICATIVE_DECREASE = 0.5;
/** Share of the configured rate added back per second, once a request succeeds. */
const ADDITIVE_INCREASE_SHARE = 0.1;
/** Floor, as a share of the configured rate, so a run always moves on. */
const MIN_RATE_SHARE = 0.05;
/** 429s this soon after a decrease answer requests already in flight: no second decrease. */
export const DECREASE_HOLD_MS = 1_000;

export interface BudgetObserver {
  /** Requests per second, at start and after every change. */
  onRate?(ratePerSecond: number): void;
  /** Seconds (> 0) one request waited. */
  onWait?(seconds: number): void;
}

export interface RequestBudgetOptions extends RateLimit {
  /** Monotonic milliseconds. */
  now?: () => number;
  /** Rejects with {@link AbortedError} when `signal` aborts. */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  observer?: BudgetObserver;
}

export class RequestBudget {
  readonly #limit: number;
  readonly #burst: number;
  readonly #minRate: number;
  readonly #now: () => number;
  readonly #sleep: (ms: number, signal?: AbortSignal) => Promise<void>;
  readonly #observer: BudgetObserver | undefined;
  #rate: number;
  #tokens: number;
  #refilledAt: number;
  /** When the rate last changed, or an increase was last counted from. */
  #adjustedAt: number;
  #decreasedAt: number | undefined;
  /** Each acquisition starts once the one before is granted or given up. */
  #queue: Promise<void> = Promise.resolve();

  /** @throws {RangeError} for a rate not > 0 or a burst not a whole number ≥ 1. */
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

  /** Requests per second: the configured rate, or less after 429s. */
  get ratePerSecond(): number {
    return this.#rate;
  }

  /** UPSTREAM_RATE_LIMIT, requests per second. */
  get limitPerSecond(): number {
    return this.#limit;
  }

  /** Waits in order of arrival and takes a token. @throws {AbortedError} when `signal` aborts first (no token taken). */
  async acquire(signal?: AbortSignal): Promise<void> {
    const started = this.#now();
    const turn = this.#queue.then(() => this.#take(signal));
    this.#queue = turn.catch(() => undefined);
    if (signal === undefined) await turn;
    else await untilAborted(turn, signal, 'aborted while waiting for the request budget (UPSTREAM_RATE_LIMIT)');
    const waitedMs = this.#now() - started;
    if (waitedMs > 0) this.#observer?.onWait?.(waitedMs / 1000);
  }

  /** After a 429: halves the rate (see {@link DECREASE_HOLD_MS}) and empties the bucket. */
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

  /** After a success: {@link ADDITIVE_INCREASE_SHARE} back per whole second since the last change. */
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
      await this.#sleep(Math.max(1, Math.ceil(((1 - this.#tokens) / this.#rate) * 1000)), signal);
    }
  }
}

/** `turn`, or an {@link AbortedError} saying `message` as soon as `signal` aborts (`turn` is left running). */
export function untilAborted<T>(turn: Promise<T>, signal: AbortSignal, message: string): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(new AbortedError(message));
    if (signal.aborted) {
      onAbort();
      return;
    }
    signal.addEventListener('abort', onAbort, { once: true });
    turn.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}
