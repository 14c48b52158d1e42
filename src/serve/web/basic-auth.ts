/** HTTP Basic authentication against `basic_auth_users`; see docs/design/http-hardening.md, Basic auth. */
import { createHash, randomBytes } from 'node:crypto';
import { budgetKey, type FailureBudget } from './auth-budget.js';
import { inThreadBcrypt, type BcryptPort } from './bcrypt-worker.js';

/** Results kept per kind (successes, failures). */
const AUTH_CACHE_ENTRIES = 256;
const DEFAULT_MAX_COMPARISONS_IN_FLIGHT = 4;
/** Half the places: another address finds one free, one wrong job's password does not block the right one. */
const MAX_COMPARISONS_IN_FLIGHT_PER_ADDRESS = 2;

/** `denied` is a 401; `busy` (comparisons at their cap) and `budget` (no failed login left) a 429 without a check. */
export type AuthVerdict = { outcome: 'ok' | 'denied' } | { outcome: 'busy' | 'budget'; retryAfterSeconds: number };

const OK: AuthVerdict = { outcome: 'ok' };
const DENIED: AuthVerdict = { outcome: 'denied' };

/** The cost of a bcrypt hash `$2b$NN$…`, clamped to 4..31. */
export function bcryptCost(hash: string): number {
  const cost = Number(/^\$2[aby]\$(\d{2})\$/.exec(hash)?.[1] ?? 10);
  return Math.min(31, Math.max(4, cost));
}

/**
 * Checks Basic credentials against one set of users, in this order: the caches of successes and
 * failures (apart, so wrong attempts never evict a correct login), the address's failure budget,
 * the caps on comparisons in flight, then bcrypt; an unknown user against a decoy hash as costly
 * as the costliest user's.
 */
export class BasicAuth {
  readonly #users: Record<string, string>;
  readonly #successes = new Map<string, true>();
  readonly #failures = new Map<string, true>();
  /** By cache key. */
  readonly #pending = new Map<string, Promise<boolean>>();
  /** Counts by {@link budgetKey}. */
  readonly #pendingByAddress = new Map<string, number>();
  readonly #maxInFlight: number;
  readonly #budget: FailureBudget | undefined;
  readonly #bcrypt: BcryptPort;
  /** Undefined when no user is configured. */
  readonly #decoy: Promise<string> | undefined;

  /**
   * @param users user name → bcrypt hash, validated.
   * @param options.budget shared by one server's instances; none: unlimited.
   * @param options.bcrypt default: bcryptjs on this thread.
   */
  constructor(users: Record<string, string>, options: { maxInFlight?: number; budget?: FailureBudget; bcrypt?: BcryptPort } = {}) {
    this.#users = users;
    this.#maxInFlight = options.maxInFlight ?? DEFAULT_MAX_COMPARISONS_IN_FLIGHT;
    this.#budget = options.budget;
    this.#bcrypt = options.bcrypt ?? inThreadBcrypt;
    const hashes = Object.values(users);
    if (hashes.length > 0) {
      const cost = Math.max(...hashes.map(bcryptCost));
      // A random password's hash: no password is known for it. A failure surfaces where it is awaited.
      this.#decoy = this.#bcrypt.hash(randomBytes(24).toString('base64'), cost);
      this.#decoy.catch(() => undefined);
    }
  }

  get enabled(): boolean {
    return Object.keys(this.#users).length > 0;
  }

  /** The hash unknown user names are compared against. */
  decoyHash(): Promise<string> | undefined {
    return this.#decoy;
  }

  /**
   * Verifies an `Authorization` value (`Basic base64(user:password)`, RFC 7617) from `remote`.
   *
   * @throws what the bcrypt port throws (a dead worker): the request fails.
   */
  async verify(header: string | undefined, remote?: string): Promise<AuthVerdict> {
    const match = /^Basic ([A-Za-z0-9+/=]+)$/i.exec(header?.trim() ?? '');
    if (!match) return DENIED;
    const decoded = Buffer.from(match[1]!, 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    if (colon < 0) return DENIED;
    const user = decoded.slice(0, colon);
    const password = decoded.slice(colon + 1);
    const hash = Object.hasOwn(this.#users, user) ? this.#users[user]! : undefined;
    const key = `${user}\u0000${createHash('sha256').update(password).digest('base64')}`;
    if (this.#successes.has(key)) return hash !== undefined ? OK : DENIED;
    if (this.#failures.has(key)) return DENIED;
    let pending = this.#pending.get(key);
    if (pending === undefined) {
      const waitMs = this.#budget?.take(remote) ?? 0;
      if (waitMs > 0) return { outcome: 'budget', retryAfterSeconds: Math.ceil(waitMs / 1000) };
      const address = budgetKey(remote);
      const ofAddress = this.#pendingByAddress.get(address) ?? 0;
      if (this.#pending.size >= this.#maxInFlight || ofAddress >= MAX_COMPARISONS_IN_FLIGHT_PER_ADDRESS) {
        this.#budget?.refund(remote);
        return { outcome: 'busy', retryAfterSeconds: 1 };
      }
      this.#pendingByAddress.set(address, ofAddress + 1);
      pending = this.#compare(key, password, hash, remote);
      this.#pending.set(key, pending);
    }
    return (await pending) ? OK : DENIED;
  }

  /** One comparison, its result cached; only a failure keeps the token taken. */
  async #compare(key: string, password: string, hash: string | undefined, remote: string | undefined): Promise<boolean> {
    let ok = true;
    try {
      ok = (await this.#bcrypt.compare(password, hash ?? (await this.#decoy!))) && hash !== undefined;
      const cache = ok ? this.#successes : this.#failures;
      if (cache.size >= AUTH_CACHE_ENTRIES) cache.delete(cache.keys().next().value!);
      cache.set(key, true);
      return ok;
    } finally {
      this.#pending.delete(key);
      const address = budgetKey(remote);
      const ofAddress = (this.#pendingByAddress.get(address) ?? 1) - 1;
      if (ofAddress > 0) this.#pendingByAddress.set(address, ofAddress);
      else this.#pendingByAddress.delete(address);
      if (ok) this.#budget?.refund(remote);
    }
  }
}
