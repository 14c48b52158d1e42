/**
 * HTTP Basic authentication against `basic_auth_users` of the web configuration (WEB_CONFIG_FILE,
 * exporter-toolkit's format: user name → bcrypt hash).
 */
import { createHash, randomBytes } from 'node:crypto';

/** Results of bcrypt comparisons kept per kind (successes, failures), so a scrape does not pay bcrypt's cost every time. */
const AUTH_CACHE_ENTRIES = 256;
/** Uncached bcrypt comparisons allowed at once, by default; beyond them a request is refused ('busy'). */
export const DEFAULT_MAX_COMPARISONS_IN_FLIGHT = 4;

/**
 * What {@link BasicAuth.verify} concluded: `ok` (a configured user with its password), `denied`
 * (anything else: HTTP 401), `busy` (not checked, because {@link BasicAuth} already runs as many
 * bcrypt comparisons as it allows: HTTP 429 with `Retry-After`).
 */
export type AuthOutcome = 'ok' | 'denied' | 'busy';

/** The cost (log2 of rounds) of a bcrypt hash `$2b$NN$…`, clamped to what bcrypt accepts (4..31). */
export function bcryptCost(hash: string): number {
  const cost = Number(/^\$2[aby]\$(\d{2})\$/.exec(hash)?.[1] ?? 10);
  return Math.min(31, Math.max(4, cost));
}

/**
 * Checks HTTP Basic credentials against `basic_auth_users`, caching results by a hash of the
 * password. One instance lives per web-configuration load (a change of users makes a new one).
 *
 * Bounds, so that wrong passwords cannot stall scrapes (bcrypt runs on the main thread):
 * - Successes and failures are cached apart, each FIFO of {@link AUTH_CACHE_ENTRIES}: any number of
 *   distinct wrong attempts never evicts a cached correct login, which keeps answering without bcrypt.
 * - At most `maxInFlight` uncached comparisons run at once; a further uncached attempt is `busy`
 *   (HTTP 429, `Retry-After: 1`) without running bcrypt. Identical attempts in flight share one
 *   comparison and take no extra place.
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
  readonly #maxInFlight: number;
  /** The decoy hash for unknown users; undefined when no user is configured. */
  readonly #decoy: Promise<string> | undefined;

  /**
   * @param users user name → bcrypt hash (`$2a$`, `$2b$` or `$2y$`), as validated by the web configuration.
   * @param options.maxInFlight uncached bcrypt comparisons allowed at once (default {@link DEFAULT_MAX_COMPARISONS_IN_FLIGHT}).
   */
  constructor(users: Record<string, string>, options: { maxInFlight?: number } = {}) {
    this.#users = users;
    this.#maxInFlight = options.maxInFlight ?? DEFAULT_MAX_COMPARISONS_IN_FLIGHT;
    const hashes = Object.values(users);
    if (hashes.length > 0) {
      const cost = Math.max(...hashes.map(bcryptCost));
      // bcryptjs is loaded only by servers with basic_auth_users; hashing a random password at
      // that cost gives a decoy no password is known for.
      this.#decoy = import('bcryptjs').then(({ default: bcrypt }) => bcrypt.hash(randomBytes(24).toString('base64'), cost));
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
   * Verifies an `Authorization` header value (`Basic base64(user:password)`, RFC 7617).
   *
   * @returns `ok` when it names a configured user with a password matching its bcrypt hash,
   *   `busy` when the check would need a comparison and `maxInFlight` are running, else `denied`.
   */
  async verify(header: string | undefined): Promise<AuthOutcome> {
    const match = /^Basic ([A-Za-z0-9+/=]+)$/i.exec(header?.trim() ?? '');
    if (!match) return 'denied';
    const decoded = Buffer.from(match[1]!, 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    if (colon < 0) return 'denied';
    const user = decoded.slice(0, colon);
    const password = decoded.slice(colon + 1);
    const hash = Object.hasOwn(this.#users, user) ? this.#users[user]! : undefined;
    const key = `${user}\u0000${createHash('sha256').update(password).digest('base64')}`;
    if (this.#successes.has(key)) return hash !== undefined ? 'ok' : 'denied';
    if (this.#failures.has(key)) return 'denied';
    let pending = this.#pending.get(key);
    if (pending === undefined) {
      if (this.#pending.size >= this.#maxInFlight) return 'busy';
      pending = this.#compare(key, password, hash);
      this.#pending.set(key, pending);
    }
    return (await pending) ? 'ok' : 'denied';
  }

  /** One bcrypt comparison, its result cached; removed from the pending ones when it ends. */
  async #compare(key: string, password: string, hash: string | undefined): Promise<boolean> {
    try {
      const { default: bcrypt } = await import('bcryptjs');
      const ok = (await bcrypt.compare(password, hash ?? (await this.#decoy!))) && hash !== undefined;
      const cache = ok ? this.#successes : this.#failures;
      if (cache.size >= AUTH_CACHE_ENTRIES) cache.delete(cache.keys().next().value!);
      cache.set(key, true);
      return ok;
    } finally {
      this.#pending.delete(key);
    }
  }
}
