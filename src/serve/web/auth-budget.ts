/**
 * The per-client-address budget of failed logins of HTTP Basic authentication (`basic_auth_users`
 * of WEB_CONFIG_FILE), and the rate-limited log of the attempts refused for it or for the
 * concurrency cap: the bounds that keep one address from spending the server's password checks.
 */
import type { Logger } from '../../log.js';
import { IntervalCount } from '../interval-count.js';

/** Failed logins one client address may spend per minute, by default (AUTH_FAILURE_BUDGET). */
export const DEFAULT_AUTH_FAILURE_BUDGET = 10;
/** The period over which the budget refills, in milliseconds. */
const AUTH_BUDGET_PERIOD_MS = 60_000;
/** Client addresses whose budget is remembered; beyond it the one touched longest ago is forgotten. */
const AUTH_BUDGET_ADDRESSES = 4096;
/** At most one log line about refused login attempts per this many milliseconds. */
const AUTH_REFUSAL_LOG_INTERVAL_MS = 60_000;

/**
 * The key a client address is budgeted under: an IPv4-mapped IPv6 address (`::ffff:1.2.3.4`, how
 * a dual-stack socket reports an IPv4 client) as its IPv4 form, so one client has one budget
 * whichever socket it came through; other IPv6 addresses whole and lower-cased. IPv6 addresses are
 * not grouped by /64: hosts of one LAN (or pods of one node) share a /64, and grouping them would
 * let an attacker spend a legitimate scraper's budget.
 *
 * @param address the socket's `remoteAddress`; undefined (a closed socket) is the key `unknown`.
 */
export function budgetKey(address: string | undefined): string {
  if (address === undefined || address === '') return 'unknown';
  const lower = address.toLowerCase();
  const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/.exec(lower);
  return mapped ? mapped[1]! : lower;
}

interface Bucket {
  tokens: number;
  /** When `tokens` was computed, in milliseconds (the clock given to {@link FailureBudget}). */
  at: number;
}

/**
 * A token bucket per client address: `capacity` tokens, refilled at `capacity` per
 * {@link AUTH_BUDGET_PERIOD_MS}. Every uncached password check takes a token when it starts and
 * gets it back when the password was right, so only failed logins (a wrong password, an unknown
 * user) spend the budget; with none left, an address's uncached attempts are refused until a token
 * has refilled.
 *
 * A token bucket rather than a sliding window of timestamps: two numbers per address instead of N,
 * the time until there is room is exact (for `Retry-After`), and an address that spent its budget
 * gets one attempt per period/N afterwards instead of a new burst of N each period.
 *
 * Memory is bounded: at most {@link AUTH_BUDGET_ADDRESSES} addresses, the one touched longest ago
 * forgotten first (it is also the one closest to a full bucket). An attacker with more addresses
 * than that gets fresh budgets, but the concurrency cap of the password checks still bounds the work.
 */
export class FailureBudget {
  readonly #capacity: number;
  readonly #perMs: number;
  readonly #maxAddresses: number;
  readonly #now: () => number;
  /** Insertion order = order of last use: the first entry is the one touched longest ago. */
  readonly #buckets = new Map<string, Bucket>();

  /**
   * @param capacity failed logins an address may spend per period (AUTH_FAILURE_BUDGET); 0 turns the budget off.
   * @param options.periodMs the refill period (default {@link AUTH_BUDGET_PERIOD_MS}).
   * @param options.maxAddresses addresses remembered (default {@link AUTH_BUDGET_ADDRESSES}).
   * @param options.now the clock, in milliseconds (default `Date.now`; tests pass their own).
   */
  constructor(capacity: number, options: { periodMs?: number; maxAddresses?: number; now?: () => number } = {}) {
    this.#capacity = capacity;
    this.#perMs = capacity / (options.periodMs ?? AUTH_BUDGET_PERIOD_MS);
    this.#maxAddresses = options.maxAddresses ?? AUTH_BUDGET_ADDRESSES;
    this.#now = options.now ?? Date.now;
  }

  /** Addresses remembered now (at most `maxAddresses`). */
  get size(): number {
    return this.#buckets.size;
  }

  /**
   * Takes a token for one password check from `address`'s budget.
   *
   * @param address the client's address (the socket's `remoteAddress`; normalised by {@link budgetKey}).
   * @returns 0 when a token was taken, else the milliseconds until one will have refilled (> 0).
   */
  take(address: string | undefined): number {
    if (this.#capacity <= 0) return 0;
    const key = budgetKey(address);
    const bucket = this.#refilled(key);
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      return 0;
    }
    // Less a nanosecond, so that rounding errors of the refill do not add a whole millisecond.
    return Math.max(1, Math.ceil((1 - bucket.tokens) / this.#perMs - 1e-6));
  }

  /** Gives back the token of a check that did not fail (the password was right, or no check ran). */
  refund(address: string | undefined): void {
    if (this.#capacity <= 0) return;
    const key = budgetKey(address);
    const bucket = this.#refilled(key);
    bucket.tokens = Math.min(this.#capacity, bucket.tokens + 1);
    // A full bucket is what a forgotten address gets: nothing worth remembering.
    if (bucket.tokens >= this.#capacity) this.#buckets.delete(key);
  }

  /** The address's bucket, refilled to now and moved to the end of the order of use; forgets the oldest beyond the cap. */
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

/**
 * Logs login attempts refused with 429 at warn, at most one line per `intervalMs`: the first at
 * once, those that follow within the interval in one line when it ends (counts by reason, the last
 * client's address; never a user name or a password). {@link close} logs what is still counted.
 */
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

  /** Counts one refused attempt from `remote` (the client's address, when known). */
  record(reason: AuthRefusal, remote: string | undefined): void {
    this.#count.record(reason, remote);
  }

  /** Logs what was counted since the last line, if anything, and stops the timer (the server closed). */
  close(): void {
    this.#count.close();
  }
}
