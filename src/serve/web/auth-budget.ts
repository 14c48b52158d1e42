/**
 * The per-client-address budget of failed basic-auth logins, and the rate-limited log of attempts
 * refused for it or the concurrency cap. See docs/design/http-hardening.md, Basic auth.
 */
import type { Logger } from '../../log.js';
import { IntervalCount } from '../interval-count.js';

/** AUTH_FAILURE_BUDGET's default: failed logins per address per period. */
export const DEFAULT_AUTH_FAILURE_BUDGET = 10;
const AUTH_BUDGET_PERIOD_MS = 60_000;
/** Addresses remembered; beyond, the one touched longest ago is forgotten. */
const AUTH_BUDGET_ADDRESSES = 4096;
const AUTH_REFUSAL_LOG_INTERVAL_MS = 60_000;

/**
 * The key an address is budgeted under: `::ffff:1.2.3.4` as `1.2.3.4`, other IPv6 addresses whole
 * (not by /64: a LAN's hosts share one), undefined as `unknown`.
 */
export function budgetKey(address: string | undefined): string {
  if (address === undefined || address === '') return 'unknown';
  const lower = address.toLowerCase();
  const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/.exec(lower);
  return mapped ? mapped[1]! : lower;
}

interface Bucket {
  tokens: number;
  /** When `tokens` was computed, by the budget's clock. */
  at: number;
}

/**
 * A token bucket per client address, refilled at `capacity` per period: a check takes a token and
 * gives it back when the password was right. At most `maxAddresses`, least recently used forgotten.
 */
export class FailureBudget {
  readonly #capacity: number;
  readonly #perMs: number;
  readonly #maxAddresses: number;
  readonly #now: () => number;
  /** Insertion order is the order of last use. */
  readonly #buckets = new Map<string, Bucket>();

  /** @param capacity AUTH_FAILURE_BUDGET; 0 turns the budget off. `options.now` is in milliseconds. */
  constructor(capacity: number, options: { periodMs?: number; maxAddresses?: number; now?: () => number } = {}) {
    this.#capacity = capacity;
    this.#perMs = capacity / (options.periodMs ?? AUTH_BUDGET_PERIOD_MS);
    this.#maxAddresses = options.maxAddresses ?? AUTH_BUDGET_ADDRESSES;
    this.#now = options.now ?? Date.now;
  }

  get size(): number {
    return this.#buckets.size;
  }

  /** Takes a token for one check. @returns 0 when taken, else the milliseconds until one has refilled. */
  take(address: string | undefined): number {
    if (this.#capacity <= 0) return 0;
    const key = budgetKey(address);
    const bucket = this.#refilled(key);
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      return 0;
    }
    // Less a nanosecond, so the refill's rounding errors do not add a millisecond.
    return Math.max(1, Math.ceil((1 - bucket.tokens) / this.#perMs - 1e-6));
  }

  /** Gives back the token of a check that did not fail or did not run. */
  refund(address: string | undefined): void {
    if (this.#capacity <= 0) return;
    const key = budgetKey(address);
    const bucket = this.#refilled(key);
    bucket.tokens = Math.min(this.#capacity, bucket.tokens + 1);
    // A full bucket is what a forgotten address gets.
    if (bucket.tokens >= this.#capacity) this.#buckets.delete(key);
  }

  /** The bucket refilled to now, moved last; forgets the oldest beyond the cap. */
  #refilled(key: string): Bucket {
    const now = this.#now();
    const known = this.#buckets.get(key);
    const bucket: Bucket = known
      ? { tokens: Math.min(this.#capacity, known.tokens + Math.max(0, now - known.at) * this.#perMs), at: now }
      : { tokens: this.#capacity, at: now };
    this.#buckets.delete(key);
    this.#buckets.set(key, bucket);
    while (this.#buckets.size > this.#maxAddresses) this.#buckets.delete(this.#buckets.keys().next().value!);
    return bucket;
  }
}

/** Why a login attempt was refused with 429 without a password check. */
export type AuthRefusal = 'budget' | 'busy';

/** Logs attempts refused with 429 at most once per interval, with counts; never a user name or password. */
export class AuthRefusalLog {
  readonly #count: IntervalCount<AuthRefusal>;

  constructor(log: Logger, intervalMs: number = AUTH_REFUSAL_LOG_INTERVAL_MS) {
    this.#count = new IntervalCount<AuthRefusal>(['budget', 'busy'], intervalMs, ({ count, byKind, since, lastRemote }) =>
      log.warn(
        { count, reasons: byKind, since, lastRemote, intervalMs },
        `${count} login attempt${count === 1 ? '' : 's'} since ${since} refused with 429 without a password check ` +
          `(budget: the address spent its failed logins, AUTH_FAILURE_BUDGET; busy: as many checks ran as allowed); at most one such line every ${intervalMs / 1000} s`,
      ),
    );
  }

  record(reason: AuthRefusal, remote: string | undefined): void {
    this.#count.record(reason, remote);
  }

  close(): void {
    this.#count.close();
  }
}
