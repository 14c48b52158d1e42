/**
 * What a simulator is given and gives: its options, the fault settings and queued faults that
 * tests and `--latency`-style flags turn on, and the handle {@link startSimulator} returns.
 */
import type { BehaviourOptions } from './behaviours.js';
import type { Dataset } from './dataset.js';
import type { DeleteSelection } from './deletions.js';
import type { DatasetOptions } from './dataset-options.js';
import type { AnalyticsRecord } from './records.js';
import { DEMO_CLIENT_ID, DEMO_CLIENT_SECRET } from './demo.js';
import { InvalidArgumentError } from './errors.js';
import type { Logger } from './log.js';
import type { RecordOrder } from './order.js';

/** The demo's client, unless told otherwise. */
export const DEFAULT_CLIENT_ID = DEMO_CLIENT_ID;
export const DEFAULT_CLIENT_SECRET = DEMO_CLIENT_SECRET;
export const DEFAULT_SCOPE = 'api.external';
/** Reference, Authentication 5 and Limits: `expires_in` is normally 3600. */
export const DEFAULT_TOKEN_LIFETIME_SECONDS = 3600;
/** Reference, E6 query parameters and Limits. */
export const DEFAULT_PAGE_SIZE = 500;
export const MAX_PAGE_SIZE = 1000;
/** Largest token request body read; more is refused with 413. */
export const MAX_TOKEN_BODY_BYTES = 64 * 1024;

/**
 * Faults that apply while set. The object on {@link Simulator.faults} is read at every
 * request, so tests may change it mid-run. Periodic faults ("every Nth") count from the moment
 * their value last changed, so setting `rateLimitEvery = 3` makes the 3rd, 6th, … E6/E7 request
 * from then on answer 429.
 */
export interface FaultSettings {
  /** Delay before every request (E0, E6, E7) is handled, in milliseconds. 0 = none. */
  latencyMs: number;
  /** Every Nth authenticated E6/E7 request answers 429 with `Retry-After`. 0 = never. */
  rateLimitEvery: number;
  /** Value of `Retry-After` on those 429s, in seconds. */
  retryAfterSeconds: number;
  /**
   * A real rate limit on authenticated E6/E7 requests, one token bucket for the whole server:
   * `perSecond` requests a second, `burst` at once after a quiet spell. A request over it answers
   * 429 with `Retry-After` (whole seconds until a request would be let through, at least 1).
   * The bucket starts full whenever a new object is set. `undefined` = no limit.
   */
  rateLimit: { perSecond: number; burst: number } | undefined;
  /** Share (0..1) of authenticated E6/E7 requests answered with `errorStatus`; drawn from a seeded generator. */
  errorRate: number;
  /** Status of `errorRate` failures. */
  errorStatus: number;
  /** Tokens stop working this many seconds after issue (401), although `expires_in` promised longer. `undefined` = never. */
  revokeTokensAfterSeconds: number | undefined;
  /** Every Nth authenticated E6 response is truncated JSON. 0 = never. */
  malformedEvery: number;
  /**
   * When the `afterRequests`th E6 request that reaches the data (authenticated, valid, not
   * failed by another fault; counted from when this object was set) arrives,
   * `count` new records with timestamps inside that request's range are inserted before it is
   * answered: records arriving while a client pages, so `totalRecords` changes mid-window.
   */
  arrivals: { afterRequests: number; count: number } | undefined;
  /** How long a queued `'slow-body'` fault stalls the body after the headers, in milliseconds. */
  stallMs: number;
  /** Every E6 page answers page 1's records, echoing the `pageNumber` asked (a proxy dropping it). */
  ignorePageNumber: boolean;
  /**
   * E6 pages starting at offset `fromOffset` or more (`(pageNumber - 1) × pageSize`) are refused
   * with HTTP 400 `Result window is too large` (`answer: 'refuse'`, as search-engine-backed APIs
   * do), or answered with `data: []` and the true `totalRecords` (`'empty'`). `undefined` = none.
   */
  deepPages: { fromOffset: number; answer: 'refuse' | 'empty' } | undefined;
  /** E6's `totalRecords` (and `totalPages`) claim this many records more than it serves. 0 = none. */
  totalRecordsExtra: number;
  /**
   * Faults for some instants only: an E6 request whose range (`startDate` to `toDate`, both
   * inclusive; no `toDate`: to the data's end) overlaps an entry's `from`–`to` (inclusive) gets its
   * `ignorePageNumber` and `totalRecordsExtra` as if set above (the first overlapping entry wins),
   * other requests do not. A dense instant behind a proxy that drops `pageNumber`, a few windows
   * whose count lies, among ordinary data. Empty = none.
   */
  inRanges: readonly RangeFault[];
}

/** One entry of {@link FaultSettings.inRanges}. */
export interface RangeFault {
  from: Date;
  to: Date;
  ignorePageNumber?: boolean;
  totalRecordsExtra?: number;
}

/** Default fault settings: none active. */
export const NO_FAULTS: Readonly<FaultSettings> = Object.freeze({
  latencyMs: 0,
  rateLimitEvery: 0,
  retryAfterSeconds: 1,
  rateLimit: undefined,
  errorRate: 0,
  errorStatus: 503,
  revokeTokensAfterSeconds: undefined,
  malformedEvery: 0,
  arrivals: undefined,
  stallMs: 2000,
  ignorePageNumber: false,
  deepPages: undefined,
  totalRecordsExtra: 0,
  inRanges: [],
});

/**
 * A one-shot fault for an upcoming E6/E7 request (see {@link Simulator.queueFault}):
 * - `{status, retryAfter?}`: that status with a small JSON body; `retryAfter` is sent verbatim
 *   as `Retry-After` (seconds or an HTTP-date). A 401 also carries `WWW-Authenticate`.
 * - `'malformed-json'`: a 200 whose body is cut in half (E7: text cut mid-line).
 * - `'bad-envelope'`: valid JSON of the wrong shape, `data` an object (E7: lines that are not samples).
 * - `'wrong-content-type'`: a 200 `text/html` page.
 * - `'reset-mid-body'`: headers and half the body, then the socket is destroyed.
 * - `'slow-body'`: headers, then nothing for `faults.stallMs`, then the body.
 * - E6 only: `'inconsistent-total-pages'` (totalPages disagrees with totalRecords and pageSize),
 *   `'empty-page'` (`data: []` on a page before totalPages), `'oversized-page'` (more records than pageSize),
 *   `'nul-in-record'` (the page's first record carries a string holding U+0000: valid JSON that
 *   PostgreSQL jsonb refuses).
 *
 * Queued for the `'token'` target, the same kinds apply to E0 requests (the E6-only ones excepted):
 * a status answers with an RFC 6749 §5.2 body `temporarily_unavailable`, `'bad-envelope'` is a JSON
 * object without `access_token`, the transport faults cut, stall or mislabel the token response.
 */
export type QueuedFault =
  | { status: number; retryAfter?: string }
  | 'malformed-json'
  | 'bad-envelope'
  | 'wrong-content-type'
  | 'reset-mid-body'
  | 'slow-body'
  | 'inconsistent-total-pages'
  | 'empty-page'
  | 'oversized-page'
  | 'nul-in-record';

/**
 * Which requests a queued fault may be used by: `'any'` is any authenticated E6/E7 request;
 * `'token'` is E0 token requests only (never matched by `'any'`).
 */
export type FaultTarget = 'analytics' | 'prometheus' | 'any' | 'token';

/** One request the simulator answered (or broke off), reported to {@link SimulatorOptions.onRequest}. */
export interface SimulatorRequestEvent {
  endpoint: 'token' | 'analytics' | 'prometheus' | 'other';
  method: string;
  /** Path and query as received (`/analytics?pageNumber=2&…`). */
  path: string;
  /** Status sent, or undefined when the connection closed before any. */
  status: number | undefined;
  /** The injected fault this request got, if any: a queued kind, `status <n>`, `rate-limit`, `error-rate`, `malformed-every`, `ignore-page-number`. */
  fault: string | undefined;
}

export const ANALYTICS_ONLY_FAULTS = new Set<QueuedFault>(['inconsistent-total-pages', 'empty-page', 'oversized-page', 'nul-in-record']);

/** A request as a queued fault's `when` predicate sees it. */
export interface FaultRequest {
  endpoint: 'token' | 'analytics' | 'prometheus';
  /** Path and query as received, e.g. `url.searchParams.get('pageNumber')`. */
  url: URL;
}

/** Label of a queued fault for {@link SimulatorRequestEvent.fault}. */
export function faultLabel(fault: QueuedFault): string {
  return typeof fault === 'object' ? `status ${fault.status}` : fault;
}

/** PEM strings (not paths) for HTTPS. */
export interface SimulatorTlsOptions {
  cert: string;
  key: string;
  /** CA that client certificates must chain to (mutual TLS). */
  ca?: string;
  /** Demand a client certificate signed by `ca` and refuse the handshake without one. */
  requireClientCert?: boolean;
}

/** Options of {@link startSimulator}: the dataset's, the behaviours' (each off by default), plus the server's. */
export interface SimulatorOptions extends DatasetOptions, BehaviourOptions {
  /** Serve this dataset instead of building one from the dataset options. */
  dataset?: Dataset;
  /** Interface to listen on. Default 127.0.0.1. */
  host?: string;
  /** TCP port; 0 (default) = an ephemeral port, see {@link Simulator.url}. */
  port?: number;
  clientId?: string;
  clientSecret?: string;
  /** The scope a token request must ask for. Default `api.external`. */
  scope?: string;
  /** `expires_in` of issued tokens, and their real lifetime, in seconds. */
  tokenLifetimeSeconds?: number;
  /** Text every issued token starts with, so tests can search outputs for leaked tokens. Default none. */
  tokenPrefix?: string;
  /** Whether a record exactly at `toDate` is in the range. Default inclusive (the reference is silent). */
  toDate?: 'inclusive' | 'exclusive';
  /**
   * Order of records within an E6 range, drawn anew per request (the reference promises none):
   * `stable` (default), `ties` (timestamp order, ties reshuffled), `random`. See {@link Dataset.pageJsonOrdered}.
   */
  order?: RecordOrder;
  tls?: SimulatorTlsOptions;
  /** Initial fault settings; the rest from {@link NO_FAULTS}. */
  faults?: Partial<FaultSettings>;
  /** Add `# HELP` and `# TYPE … untyped` lines to E7 (the reference shows none). */
  prometheusHelp?: boolean;
  /** Receives one debug line per request and an error line for handler failures. */
  logger?: Logger;
  /** Clock for token expiry and revocation, in milliseconds since the epoch. Default `Date.now`. */
  now?: () => number;
  /**
   * Serve E0 on a second port of its own ({@link Simulator.authUrl}), as the platform's identity host
   * is a host of its own; the main port then answers 404 for `/connect/token`. Needed for
   * {@link Simulator.setAuthDown}. Default false (one port for everything).
   */
  separateAuth?: boolean;
  /** Called once per request when its response ends or its connection closes (tests count attempts with it). Must not throw. */
  onRequest?: (event: SimulatorRequestEvent) => void;
}

/** Request and response counts since start. */
export interface SimulatorStats {
  tokenRequests: number;
  analyticsRequests: number;
  prometheusRequests: number;
  otherRequests: number;
  /** Responses by status code, e.g. `{ '200': 12, '429': 3 }`. */
  responses: Record<string, number>;
  /**
   * Body bytes of E6 and E7 answers written to the connection (pages, Prometheus text, and the
   * transport faults of those), by endpoint: after gzip, so the bytes on the wire; headers and
   * error answers not counted. A body cut short by the client counts what was written.
   */
  bodyBytes: Record<WireEndpoint, number>;
  /** Of those answers, how many went with `Content-Encoding: gzip`, by endpoint. */
  gzipResponses: Record<WireEndpoint, number>;
}

/** The endpoints whose bodies {@link SimulatorStats.bodyBytes} counts. */
export type WireEndpoint = 'analytics' | 'prometheus';

/** Stats at start: every count 0. */
export function emptyStats(): SimulatorStats {
  return {
    tokenRequests: 0,
    analyticsRequests: 0,
    prometheusRequests: 0,
    otherRequests: 0,
    responses: {},
    bodyBytes: { analytics: 0, prometheus: 0 },
    gzipResponses: { analytics: 0, prometheus: 0 },
  };
}

/** A running simulator. */
export interface Simulator {
  /** Base URL without a trailing slash, e.g. `http://127.0.0.1:41234`: {statistics_url}, and {auth_url} unless `separateAuth`. */
  readonly url: string;
  /** {auth_url}: the same as `url`, or the E0 port's own URL with `separateAuth`. */
  readonly authUrl: string;
  readonly dataset: Dataset;
  /**
   * Order of records within an E6 range (see {@link SimulatorOptions.order}). Assign to change it
   * for the requests that follow; a value other than `stable`, `ties` or `random` throws
   * {@link InvalidArgumentError} and leaves the order as it was.
   */
  order: RecordOrder;
  /** Live fault settings; change fields at any time. */
  readonly faults: FaultSettings;
  readonly stats: SimulatorStats;
  /**
   * Makes the next `times` matching E6/E7 requests (authenticated ones) fail with `fault`.
   * Faults are used in the order queued. E6-only kinds are never used by E7 requests.
   *
   * @param target restricts the fault to E6 (`'analytics'`) or E7 (`'prometheus'`), or makes it an E0
   *   fault (`'token'`). Default `'any'` (E6 or E7).
   * @param when further restricts it to the requests for which this returns true (a given page of a
   *   given range, say), so a test can aim a fault without racing the client's prefetching.
   * @throws {InvalidArgumentError} for `times` < 1, a status outside 100–599, an E6-only fault for `'token'`.
   */
  queueFault(fault: QueuedFault, times?: number, target?: FaultTarget, when?: (request: FaultRequest) => boolean): void;
  /** Number of queued fault uses not yet consumed. */
  pendingFaults(): number;
  /** Inserts late records into the dataset (see {@link Dataset.insert}). @throws {InvalidArgumentError} for an invalid record. */
  insertRecords(records: readonly AnalyticsRecord[]): void;
  /**
   * Deletes records, as `POST /admin/delete` does (without needing `admin`): from now on E6 and E7
   * leave them out.
   *
   * @returns the records deleted.
   * @throws {InvalidArgumentError} for an invalid selection or a record not in the data; nothing is deleted then.
   */
  deleteRecords(selection: DeleteSelection): AnalyticsRecord[];
  /**
   * The JSON text of every record a complete E6 paging of `[from, to]` returns now, in order:
   * deletions, the hidden filter time and out-of-range numbers applied (`dataset.iterate` knows
   * none of them). `to` absent = no upper bound; `toDate` semantics as configured.
   */
  servedJson(from: Date, to?: Date): string[];
  /** Makes every token issued so far invalid (401 on next use). */
  revokeAllTokens(): void;
  /**
   * Rotates the client's secret: from now on E0 accepts `secret` only and answers 401
   * `invalid_client` to the old one. Tokens issued so far stay valid, as at identity hosts that
   * rotate credentials; call {@link revokeAllTokens} as well to force a token request.
   *
   * @throws {InvalidArgumentError} for an empty secret.
   */
  setClientSecret(secret: string): void;
  /**
   * Takes the identity host down (`true`: the E0 port stops listening and drops its connections, so
   * token requests see connection refused) or brings it back on the same port (`false`).
   * Resolves once done; idempotent.
   *
   * @throws {InvalidArgumentError} without `separateAuth` (E6/E7 share the port and would go down too).
   */
  setAuthDown(down: boolean): Promise<void>;
  /** Stops listening and destroys idle and active connections. Idempotent. */
  close(): Promise<void>;
}

/**
 * Checks the numbers of fault settings.
 *
 * @throws {InvalidArgumentError} naming the first setting out of range.
 */
export function checkFaultNumbers(faults: FaultSettings): void {
  const rules: [keyof FaultSettings, boolean][] = [
    ['latencyMs', Number.isFinite(faults.latencyMs) && faults.latencyMs >= 0],
    ['rateLimitEvery', Number.isSafeInteger(faults.rateLimitEvery) && faults.rateLimitEvery >= 0],
    ['retryAfterSeconds', Number.isSafeInteger(faults.retryAfterSeconds) && faults.retryAfterSeconds >= 0],
    ['errorRate', faults.errorRate >= 0 && faults.errorRate <= 1],
    ['errorStatus', Number.isInteger(faults.errorStatus) && faults.errorStatus >= 100 && faults.errorStatus <= 599],
    ['revokeTokensAfterSeconds', faults.revokeTokensAfterSeconds === undefined || faults.revokeTokensAfterSeconds >= 0],
    ['malformedEvery', Number.isSafeInteger(faults.malformedEvery) && faults.malformedEvery >= 0],
    ['stallMs', Number.isFinite(faults.stallMs) && faults.stallMs >= 0],
    ['totalRecordsExtra', Number.isSafeInteger(faults.totalRecordsExtra) && faults.totalRecordsExtra >= 0],
  ];
  for (const [name, ok] of rules) {
    if (!ok) throw new InvalidArgumentError(`fault setting ${name} is out of range; got ${JSON.stringify(faults[name])}`);
  }
  const limit = faults.rateLimit;
  if (limit !== undefined && !(Number.isFinite(limit.perSecond) && limit.perSecond > 0 && Number.isSafeInteger(limit.burst) && limit.burst >= 1)) {
    throw new InvalidArgumentError('fault setting rateLimit needs perSecond > 0 and burst ≥ 1, a whole number');
  }
  const arrivals = faults.arrivals;
  if (
    arrivals !== undefined &&
    !(Number.isSafeInteger(arrivals.afterRequests) && arrivals.afterRequests >= 1 && Number.isSafeInteger(arrivals.count) && arrivals.count >= 0)
  ) {
    throw new InvalidArgumentError('fault setting arrivals needs afterRequests ≥ 1 and count ≥ 0, whole numbers');
  }
  for (const r of faults.inRanges) {
    const extra = r.totalRecordsExtra ?? 0;
    if (!(r.from instanceof Date && r.to instanceof Date && r.from.getTime() <= r.to.getTime() && Number.isSafeInteger(extra) && extra >= 0)) {
      throw new InvalidArgumentError('fault setting inRanges needs Dates from ≤ to and a totalRecordsExtra ≥ 0, a whole number');
    }
  }
  const deep = faults.deepPages;
  if (deep !== undefined && !(Number.isSafeInteger(deep.fromOffset) && deep.fromOffset >= 1 && (deep.answer === 'refuse' || deep.answer === 'empty'))) {
    throw new InvalidArgumentError("fault setting deepPages needs fromOffset ≥ 1, a whole number, and answer 'refuse' or 'empty'");
  }
}
