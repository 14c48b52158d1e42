/**
 * HTTP Basic authentication against `basic_auth_users` of the web configuration (WEB_CONFIG_FILE,
 * exporter-toolkit's format: user name → bcrypt hash).
 */
import { createHash, randomBytes } from 'node:crypto';
import { budgetKey, type FailureBudget } from './auth-budget.js';
import { inThreadBcrypt, type BcryptPort } from './bcrypt-worker.js';

/** Results of bcrypt comparisons kept per kind (successes, failures), so a scrape does not pay bcrypt's cost every time. */
const AUTH_CACHE_ENTRIES = 256;
/** Uncached bcrypt comparisons allowed at once, by default; beyond them a request is refused ('busy'). */
const DEFAULT_MAX_COMPARISONS_IN_FLIGHT = 4;
/**
 * Uncached comparisons one client address may have in flight: two, so that an attacker's address
 * never holds more than half of the places and a login from another address finds one free, while
 * a correct login from an address that also sends a failing one (a Prometheus with one job's
 * password wrong, after a change of users emptied the caches) is not refused as busy.
 */
const MAX_COMPARISONS_IN_FLIGHT_PER_ADDRESS = 2;

/**
 * What {@link BasicAuth.verify} concluded: `ok` (a configured user with its password), `denied`
 * (anything else: HTTP 401); or, refused without a password check (HTTP 429 with `Retry-After`,
 * `retryAfterSeconds`): `busy` (as many bcrypt comparisons run as {@link BasicAuth} allows),
 * `budget` (the client's address spent its budget of failed logins, {@link FailureBudget}).
 */
export type AuthVerdict = { outcome: 'ok' | 'denied' } | { outcome: 'busy' | 'budget'; retryAfterSeconds: number };

const OK: AuthVerdict = { outcome: 'ok' };
const DENIED: AuthVerdict = { outcome: 'denied' };

/** The cost (log2 of rounds) of a bcrypt hash `$2b$NN$…`, clamped to what bcrypt accepts (4..31). */
export function bcryptCost(hash: string): number {
  const cost = Number(/^\$2[aby]\$(\d{2})\$/.exec(hash)?.[1] ?? 10);
  return Math.min(31, Math.max(4, cost));
}

/**
 * Checks HTTP Basic credentials against `basic_auth_users`, caching results by a hash of the
 * password. One instance lives per web-configuration load (a change of users makes a new one).
 *
 * Bounds, so that wrong passwords cannot stall scrapes:
 * - Successes and failures are cached apart, each FIFO of {@link AUTH_CACHE_ENTRIES}: any number of
 *   distinct wrong attempts never evicts a cached correct login, which keeps answering without bcrypt.
 * - A cached login is answered before anything else: neither bound below ever refuses it.
 * - Each uncached comparison takes a token from the client address's {@link FailureBudget} (given
 *   back when the password was right); an address without one is refused (`budget`) without
 *   bcrypt. So a correct login that is not cached yet (the first scrape after a start or a change
 *   of users) from an address an attacker shares and has spent is refused until a token refills:
 *   bcrypt is the only way to tell it is correct, and bcrypt is what the budget withholds. An
 *   attacker on another address never touches it.
 * - At most `maxInFlight` uncached comparisons run at once, at most
 *   {@link MAX_COMPARISONS_IN_FLIGHT_PER_ADDRESS} of them for one client address; a further
 *   uncached attempt is `busy` (`Retry-After: 1`) without running bcrypt. Identical attempts in flight share one comparison
 *   and take no extra place nor token.
 * - The comparisons run where `bcrypt` runs them: the server gives a worker thread
 *   ({@link BcryptWorker}), so they never hold the event loop.
 * - A user name that is not configured is compared against a decoy hash of the cost of the
 *   costliest configured hash, made once when the instance is created, so an unknown user takes as
 *   long as a wrong password for the costliest user.
 */
export class BasicAuth {
  readonly #users: Record<string, string>;
  readonly #successes = new Map<string, true>();
  readonly #failures = new Map<string, true>();
  /** Comparisons running now, by cache key. */
  readonly #pending = new Map<string, Promise<boolean>>();
  /** Comparisons running now, by client address ({@link budgetKey}). */
  readonly #pendingByAddress = new Map<string, number>();
  readonly #maxInFlight: number;
  readonly #budget: FailureBudget | undefined;
  readonly #bcrypt: BcryptPort;
  /** The decoy hash for unknown users; undefined when no user is configured. */
  readonly #decoy: Promise<string> | undefined;

  /**
   * @param users user name → bcrypt hash (`$2a$`, `$2b$` or `$2y$`), as validated by the web configuration.
   * @param options.maxInFlight uncached bcrypt comparisons allowed at once (default {@link DEFAULT_MAX_COMPARISONS_IN_FLIGHT}).
   * @param options.budget failed logins per client address (shared by the instances of one server); none: unlimited.
   * @param options.bcrypt where comparisons and the decoy's hashing run (default: bcryptjs on this thread).
   */
  constructor(users: Record<string, string>, options: { maxInFlight?: number; budget?: FailureBudget; bcrypt?: BcryptPort } = {}) {
    this.#users = users;
    this.#maxInFlight = options.maxInFlight ?? DEFAULT_MAX_COMPARISONS_IN_FLIGHT;
    this.#budget = options.budget;
    this.#bcrypt = options.bcrypt ?? inThreadBcrypt;
    const hashes = Object.values(users);
    if (hashes.length > 0) {
      const cost = Math.max(...hashes.map(bcryptCost));
      // Hashing a random password at that cost gives a decoy no password is known for. A failure
      // surfaces where the decoy is awaited (that request fails), not as an unhandled rejection.
      this.#decoy = this.#bcrypt.hash(randomBytes(24).toString('base64'), cost);
      this.#decoy.catch(() => undefined);
    }
  }

  /** Whether any user is configured (authentication required). */
  get enabled(): boolean {
    return Object.keys(this.#users).length > 0;
  }

  /**
   * The hash unknown user names are compared against (its cost is the costliest configured
   * hash's); undefined when no user is configured.
   */
  decoyHash(): Promise<string> | undefined {
    return this.#decoy;
  }

  /**
   * Verifies an `Authorization` header value (`Basic base64(user:password)`, RFC 7617;
   * Authentication of the web configuration).
   *
   * @param remote the client's address (the socket's `remoteAddress`), whose failure budget an uncached check spends.
   * @returns `ok` when it names a configured user with a password matching its bcrypt hash;
   *   `budget` or `busy` (with the seconds to wait) when the check would need a comparison and the
   *   address has no budget left, or `maxInFlight` run; else `denied`.
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

  /** One bcrypt comparison, its result cached; removed from the pending ones when it ends. Only a failure keeps the token taken. */
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
