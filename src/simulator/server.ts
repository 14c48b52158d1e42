/**
 * The simulator's HTTP(S) server: E0 (`POST /connect/token`), E6 (`GET /analytics`) and E7
 * (`GET /analytics/prometheus`) on one host, over a {@link Dataset}, with fault injection.
 *
 * Where the reference is silent (error statuses and bodies, E7's optional parameters, rate
 * limits) the behaviour follows the RFCs named at each handler and is our guess; docs/simulator.md
 * lists these choices.
 */
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { InvalidArgumentError } from '../errors.js';
import type { Logger } from '../log.js';
import { parseIsoDateTime } from '../time.js';
import { mulberry32 } from './random.js';
import { Dataset, EVENT_TYPES, RECORD_ORDERS, type AnalyticsRecord, type DatasetOptions, type RecordOrder } from './dataset.js';

export const DEFAULT_CLIENT_ID = 'demo-client';
export const DEFAULT_CLIENT_SECRET = 'demo-secret';
export const DEFAULT_SCOPE = 'api.external';
/** Reference, Authentication 5 and Limits: `expires_in` is normally 3600. */
export const DEFAULT_TOKEN_LIFETIME_SECONDS = 3600;
/** Reference, E6 query parameters and Limits. */
export const DEFAULT_PAGE_SIZE = 500;
export const MAX_PAGE_SIZE = 1000;
/** Largest token request body read; more is refused with 413. */
const MAX_TOKEN_BODY_BYTES = 64 * 1024;

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
  /** The injected fault this request got, if any: a queued kind, `status <n>`, `rate-limit`, `error-rate`, `malformed-every`. */
  fault: string | undefined;
}

const ANALYTICS_ONLY_FAULTS = new Set<QueuedFault>(['inconsistent-total-pages', 'empty-page', 'oversized-page', 'nul-in-record']);

/** A request as a queued fault's `when` predicate sees it. */
export interface FaultRequest {
  endpoint: 'token' | 'analytics' | 'prometheus';
  /** Path and query as received, e.g. `url.searchParams.get('pageNumber')`. */
  url: URL;
}

/** Label of a queued fault for {@link SimulatorRequestEvent.fault}. */
function faultLabel(fault: QueuedFault): string {
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

/** Options of {@link startSimulator}: the dataset's, plus the server's. */
export interface SimulatorOptions extends DatasetOptions {
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

interface TokenInfo {
  issuedAtMs: number;
  expiresAtMs: number;
  revoked: boolean;
}

interface QueueEntry {
  fault: QueuedFault;
  remaining: number;
  target: FaultTarget;
  when: ((request: FaultRequest) => boolean) | undefined;
}

type Endpoint = 'analytics' | 'prometheus';

class ParameterError extends Error {
  constructor(
    readonly parameter: string,
    message: string,
  ) {
    super(message);
  }
}

/** @returns `value` when it is one of {@link RECORD_ORDERS}. @throws {InvalidArgumentError} otherwise, naming the value. */
function checkOrder(value: unknown): RecordOrder {
  if (!(RECORD_ORDERS as readonly unknown[]).includes(value)) {
    throw new InvalidArgumentError(`order must be ${RECORD_ORDERS.join(', ')}; got ${String(value)}`);
  }
  return value as RecordOrder;
}

/** Decodes one `application/x-www-form-urlencoded` component: `+` is a space (RFC 6749 §2.3.1, appendix B). */
function formDecode(text: string): string {
  return decodeURIComponent(text.replaceAll('+', ' '));
}

/** Escapes an E7 label value for the Prometheus text format 0.0.4: backslash, double quote and line feed. */
export function escapeLabelValue(value: string): string {
  return value.replace(/[\\"\n]/g, (c) => (c === '\\' ? '\\\\' : c === '"' ? '\\"' : '\\n'));
}

/** E7 metric family of an event type: `UserLogin` → `userlogin_event_count`. */
export function metricName(eventType: string): string {
  return `${eventType.toLowerCase()}_event_count`;
}

function checkFaultNumbers(faults: FaultSettings): void {
  const rules: [keyof FaultSettings, boolean][] = [
    ['latencyMs', Number.isFinite(faults.latencyMs) && faults.latencyMs >= 0],
    ['rateLimitEvery', Number.isSafeInteger(faults.rateLimitEvery) && faults.rateLimitEvery >= 0],
    ['retryAfterSeconds', Number.isSafeInteger(faults.retryAfterSeconds) && faults.retryAfterSeconds >= 0],
    ['errorRate', faults.errorRate >= 0 && faults.errorRate <= 1],
    ['errorStatus', Number.isInteger(faults.errorStatus) && faults.errorStatus >= 100 && faults.errorStatus <= 599],
    ['revokeTokensAfterSeconds', faults.revokeTokensAfterSeconds === undefined || faults.revokeTokensAfterSeconds >= 0],
    ['malformedEvery', Number.isSafeInteger(faults.malformedEvery) && faults.malformedEvery >= 0],
    ['stallMs', Number.isFinite(faults.stallMs) && faults.stallMs >= 0],
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
}

/**
 * Starts the simulator and resolves once it listens.
 *
 * Serves E0 `POST /connect/token`, E6 `GET /analytics`, E7 `GET /analytics/prometheus`
 * (reference: Authentication, E0, E6, E7, Limits); anything else is 404, a wrong method 405.
 *
 * @throws {InvalidArgumentError} for invalid dataset, fault or order options.
 * @throws the listen error (e.g. `EADDRINUSE`, `EACCES`) when the port cannot be bound.
 */
export async function startSimulator(options: SimulatorOptions = {}): Promise<Simulator> {
  const dataset = options.dataset ?? new Dataset(options);
  const host = options.host ?? '127.0.0.1';
  const clientId = options.clientId ?? DEFAULT_CLIENT_ID;
  /** The secret E0 accepts now (see {@link Simulator.setClientSecret}). */
  let clientSecret = options.clientSecret ?? DEFAULT_CLIENT_SECRET;
  const requiredScope = options.scope ?? DEFAULT_SCOPE;
  const lifetimeSeconds = options.tokenLifetimeSeconds ?? DEFAULT_TOKEN_LIFETIME_SECONDS;
  if (!Number.isSafeInteger(lifetimeSeconds) || lifetimeSeconds < 1) {
    throw new InvalidArgumentError(`tokenLifetimeSeconds must be a whole number ≥ 1; got ${lifetimeSeconds}`);
  }
  const toInclusive = (options.toDate ?? 'inclusive') === 'inclusive';
  /** The live order (see {@link Simulator.order}); read by every E6 request. */
  let order = checkOrder(options.order ?? 'stable');
  /** Draws each E6 request's order; seeded, so a run repeats, and advanced per request, so two requests differ. */
  const orderRandom = mulberry32(dataset.seed ^ 0x0bad5eed);
  const now = options.now ?? Date.now;
  const log = options.logger;
  const faults: FaultSettings = { ...NO_FAULTS, ...options.faults };
  checkFaultNumbers(faults);

  const tokens = new Map<string, TokenInfo>();
  /** The fault each response got, for onRequest. */
  const injected = new WeakMap<http.ServerResponse, string>();
  const queue: QueueEntry[] = [];
  const random = mulberry32(dataset.seed ^ 0x2545f491);
  const stats: SimulatorStats = { tokenRequests: 0, analyticsRequests: 0, prometheusRequests: 0, otherRequests: 0, responses: {} };
  const stallTimers = new Set<NodeJS.Timeout>();
  let closed = false;

  // "Every Nth" counters restart whenever their setting changes value (or, for arrivals, object).
  const periodic = new Map<string, { setting: unknown; count: number }>();
  const tick = (name: string, setting: unknown): number => {
    let state = periodic.get(name);
    if (state === undefined || state.setting !== setting) {
      state = { setting, count: 0 };
      periodic.set(name, state);
    }
    return ++state.count;
  };
  const everyNth = (name: string, every: number): boolean => every > 0 && tick(name, every) % every === 0;

  /** The token bucket of `faults.rateLimit`, started full for each new setting object. */
  let bucket: { setting: NonNullable<FaultSettings['rateLimit']>; tokens: number; atMs: number } | undefined;
  /** Takes a token of `faults.rateLimit`; returns undefined when the request may go on, else the seconds to wait (≥ 1). */
  const overRateLimit = (): number | undefined => {
    const limit = faults.rateLimit;
    if (limit === undefined) return undefined;
    const t = performance.now();
    if (bucket === undefined || bucket.setting !== limit) bucket = { setting: limit, tokens: limit.burst, atMs: t };
    bucket.tokens = Math.min(limit.burst, bucket.tokens + ((t - bucket.atMs) / 1000) * limit.perSecond);
    bucket.atMs = t;
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      return undefined;
    }
    return Math.max(1, Math.ceil((1 - bucket.tokens) / limit.perSecond));
  };

  // ----------------------------------------------------------------------------------------
  // Response helpers.

  const writeHead = (res: http.ServerResponse, status: number, headers: http.OutgoingHttpHeaders): void => {
    stats.responses[String(status)] = (stats.responses[String(status)] ?? 0) + 1;
    res.writeHead(status, headers);
  };

  const send = (res: http.ServerResponse, status: number, contentType: string, body: string, headers: http.OutgoingHttpHeaders = {}): void => {
    if (closed || res.destroyed) return;
    const bytes = Buffer.from(body, 'utf8');
    writeHead(res, status, { 'content-type': contentType, 'content-length': bytes.length, ...headers });
    res.end(bytes);
  };

  const sendJson = (res: http.ServerResponse, status: number, value: unknown, headers: http.OutgoingHttpHeaders = {}): void =>
    send(res, status, 'application/json; charset=utf-8', JSON.stringify(value), headers);

  /** OAuth 2.0 error response (RFC 6749 §5.2). */
  const oauthError = (res: http.ServerResponse, status: number, error: string, description: string, headers: http.OutgoingHttpHeaders = {}): void =>
    sendJson(res, status, { error, error_description: description }, { 'cache-control': 'no-store', pragma: 'no-cache', ...headers });

  // ----------------------------------------------------------------------------------------
  // E0: token endpoint (reference Authentication 3–5; RFC 6749 §2.3.1, §4.4, §5).

  const readBody = async (req: http.IncomingMessage): Promise<string | undefined> => {
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of req as AsyncIterable<Buffer>) {
      size += chunk.length;
      if (size > MAX_TOKEN_BODY_BYTES) return undefined;
      chunks.push(chunk);
    }
    return Buffer.concat(chunks).toString('utf8');
  };

  const handleToken = async (req: http.IncomingMessage, res: http.ServerResponse, queued: QueuedFault | undefined): Promise<void> => {
    const body = await readBody(req);
    if (body === undefined) {
      oauthError(res, 413, 'invalid_request', `request body larger than ${MAX_TOKEN_BODY_BYTES} bytes`, { connection: 'close' });
      return;
    }
    if (typeof queued === 'object') {
      // RFC 6749 §5.2 names no code for a server fault; temporarily_unavailable (§4.1.2.1) is the closest.
      oauthError(res, queued.status, 'temporarily_unavailable', 'simulated fault', queued.retryAfter !== undefined ? { 'retry-after': queued.retryAfter } : {});
      return;
    }
    const contentType = (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
    if (contentType !== 'application/x-www-form-urlencoded') {
      oauthError(res, 400, 'invalid_request', 'Content-Type must be application/x-www-form-urlencoded');
      return;
    }
    const params = new URLSearchParams(body);
    for (const name of new Set(params.keys())) {
      if (params.getAll(name).length > 1) {
        oauthError(res, 400, 'invalid_request', `parameter ${name} is repeated`); // RFC 6749 §3.2
        return;
      }
    }

    let presentedId: string | undefined;
    let presentedSecret: string | undefined;
    let usedBasic = false;
    const authorization = req.headers.authorization;
    if (authorization !== undefined) {
      const match = /^Basic[ ]+([A-Za-z0-9+/=]+)\s*$/i.exec(authorization);
      if (match === null) {
        oauthError(res, 401, 'invalid_client', 'Authorization header is not HTTP Basic', { 'www-authenticate': 'Basic realm="simulator"' });
        return;
      }
      usedBasic = true;
      const decoded = Buffer.from(match[1]!, 'base64').toString('utf8');
      const colon = decoded.indexOf(':');
      try {
        if (colon < 0) throw new Error('no colon');
        presentedId = formDecode(decoded.slice(0, colon));
        presentedSecret = formDecode(decoded.slice(colon + 1));
      } catch {
        oauthError(res, 401, 'invalid_client', 'Basic credentials are not form-encoded id:secret', { 'www-authenticate': 'Basic realm="simulator"' });
        return;
      }
      // RFC 6749 §2.3: one authentication method per request. A client_id matching the header is tolerated.
      const bodyId = params.get('client_id');
      if (params.has('client_secret') || (bodyId !== null && bodyId !== presentedId)) {
        oauthError(res, 400, 'invalid_request', 'client credentials sent both in the Authorization header and in the body');
        return;
      }
    } else {
      presentedId = params.get('client_id') ?? undefined;
      presentedSecret = params.get('client_secret') ?? undefined;
    }

    const grantType = params.get('grant_type');
    if (grantType === null) {
      oauthError(res, 400, 'invalid_request', 'grant_type is required');
      return;
    }
    if (presentedId !== clientId || presentedSecret !== clientSecret) {
      const reason = presentedId === undefined ? 'no client authentication included' : 'unknown client or wrong secret';
      oauthError(res, 401, 'invalid_client', reason, usedBasic ? { 'www-authenticate': 'Basic realm="simulator"' } : {});
      return;
    }
    if (grantType !== 'client_credentials') {
      oauthError(res, 400, 'unsupported_grant_type', `grant_type ${grantType} is not supported; use client_credentials`);
      return;
    }
    const scope = params.get('scope');
    if (scope === null || !scope.split(' ').includes(requiredScope)) {
      oauthError(res, 400, 'invalid_scope', scope === null ? `scope is required (${requiredScope})` : `scope must include ${requiredScope}`);
      return;
    }

    const issuedAtMs = now();
    const token = `${options.tokenPrefix ?? ''}${randomBytes(32).toString('base64url')}`;
    tokens.set(token, { issuedAtMs, expiresAtMs: issuedAtMs + lifetimeSeconds * 1000, revoked: false });
    for (const [key, info] of tokens) if (info.expiresAtMs <= issuedAtMs) tokens.delete(key);
    if (queued !== undefined) {
      const answer =
        queued === 'bad-envelope'
          ? { token_type: 'Bearer', expires_in: lifetimeSeconds }
          : { access_token: token, token_type: 'Bearer', expires_in: lifetimeSeconds };
      deliver(res, 'application/json; charset=utf-8', JSON.stringify(answer), queued === 'bad-envelope' ? undefined : queued);
      return;
    }
    sendJson(res, 200, { access_token: token, token_type: 'Bearer', expires_in: lifetimeSeconds }, { 'cache-control': 'no-store', pragma: 'no-cache' });
  };

  // ----------------------------------------------------------------------------------------
  // Bearer check (reference Authentication 6; RFC 6750 §3).

  /** Returns undefined when the token is good, otherwise why it is not. */
  const bearerProblem = (req: http.IncomingMessage): string | undefined => {
    const authorization = req.headers.authorization;
    if (authorization === undefined) return 'no bearer token';
    const match = /^Bearer[ ]+([A-Za-z0-9\-._~+/]+=*)\s*$/i.exec(authorization);
    if (match === null) return 'Authorization is not a Bearer token';
    const info = tokens.get(match[1]!);
    if (info === undefined) return 'unknown token';
    const t = now();
    if (t >= info.expiresAtMs) return 'token expired';
    if (info.revoked) return 'token revoked';
    const revokeAfter = faults.revokeTokensAfterSeconds;
    if (revokeAfter !== undefined && t - info.issuedAtMs >= revokeAfter * 1000) return 'token revoked';
    return undefined;
  };

  const sendInvalidToken = (res: http.ServerResponse, description: string): void =>
    sendJson(
      res,
      401,
      { error: 'invalid_token', error_description: description },
      {
        'www-authenticate': `Bearer realm="simulator", error="invalid_token", error_description="${description}"`,
      },
    );

  // ----------------------------------------------------------------------------------------
  // Query parameters (reference E6 query parameters, E7 notes).

  const single = (params: URLSearchParams, name: string): string | undefined => {
    const values = params.getAll(name);
    if (values.length > 1) throw new ParameterError(name, `${name} must be given at most once; got ${values.length} values`);
    return values[0];
  };

  const intParam = (params: URLSearchParams, name: string, fallback: number, min: number, max: number): number => {
    const text = single(params, name);
    if (text === undefined) return fallback;
    const value = /^\d{1,15}$/.test(text) ? Number(text) : NaN;
    if (!(value >= min && value <= max)) {
      throw new ParameterError(name, `${name} must be a whole number from ${min} to ${max}; got ${JSON.stringify(text)}`);
    }
    return value;
  };

  const dateParam = (params: URLSearchParams, name: string, required: boolean): Date | undefined => {
    const text = single(params, name);
    if (text === undefined || text === '') {
      if (required) throw new ParameterError(name, `${name} is required (ISO 8601 date-time such as 2026-11-01T00:00:00Z)`);
      return undefined;
    }
    const ms = parseIsoDateTime(text);
    if (ms === undefined) {
      throw new ParameterError(name, `${name} must be an ISO 8601 date-time with a zone, such as 2026-11-01T00:00:00Z; got ${JSON.stringify(text)}`);
    }
    return new Date(ms);
  };

  const rangeParams = (params: URLSearchParams, startRequired: boolean): { from: Date | undefined; to: Date | undefined } => {
    const from = dateParam(params, 'startDate', startRequired);
    const to = dateParam(params, 'toDate', false);
    if (from !== undefined && to !== undefined && to.getTime() < from.getTime()) {
      throw new ParameterError('toDate', 'toDate must not be before startDate');
    }
    return { from, to };
  };

  // ----------------------------------------------------------------------------------------
  // Faults.

  const takeQueuedFault = (endpoint: Endpoint | 'token', url: URL): QueuedFault | undefined => {
    const index = queue.findIndex(
      (e) =>
        (endpoint === 'token'
          ? e.target === 'token'
          : (e.target === 'any' || e.target === endpoint) && (endpoint === 'analytics' || !ANALYTICS_ONLY_FAULTS.has(e.fault))) &&
        (e.when === undefined || e.when({ endpoint, url })),
    );
    if (index < 0) return undefined;
    const entry = queue[index]!;
    entry.remaining--;
    if (entry.remaining <= 0) queue.splice(index, 1);
    return entry.fault;
  };

  /** Writes a body according to a transport-level fault, or normally. */
  const deliver = (res: http.ServerResponse, contentType: string, body: string, fault: QueuedFault | undefined): void => {
    if (closed || res.destroyed) return;
    if (fault === 'malformed-json') {
      send(res, 200, contentType, body.slice(0, Math.max(1, Math.floor(body.length / 2))));
      return;
    }
    if (fault === 'wrong-content-type') {
      send(
        res,
        200,
        'text/html; charset=utf-8',
        '<!DOCTYPE html>\n<html><head><title>Service unavailable</title></head><body><h1>Down for maintenance</h1></body></html>\n',
      );
      return;
    }
    const bytes = Buffer.from(body, 'utf8');
    if (fault === 'reset-mid-body') {
      writeHead(res, 200, { 'content-type': contentType, 'content-length': bytes.length });
      res.write(bytes.subarray(0, Math.floor(bytes.length / 2)), () => res.socket?.destroy());
      return;
    }
    if (fault === 'slow-body') {
      writeHead(res, 200, { 'content-type': contentType, 'content-length': bytes.length });
      res.flushHeaders();
      const timer = setTimeout(() => {
        stallTimers.delete(timer);
        if (!res.destroyed) res.end(bytes);
      }, faults.stallMs);
      stallTimers.add(timer);
      res.once('close', () => {
        clearTimeout(timer);
        stallTimers.delete(timer);
      });
      return;
    }
    writeHead(res, 200, { 'content-type': contentType, 'content-length': bytes.length });
    res.end(bytes);
  };

  /**
   * Faults decided before the body is built: a queued status, the rate limit, `rateLimitEvery`, random errors.
   * @returns true when the request has been answered.
   */
  const answeredByFault = (res: http.ServerResponse, queued: QueuedFault | undefined): boolean => {
    if (typeof queued === 'object') {
      const headers: http.OutgoingHttpHeaders = {};
      if (queued.retryAfter !== undefined) headers['retry-after'] = queued.retryAfter;
      if (queued.status === 401) headers['www-authenticate'] = 'Bearer realm="simulator", error="invalid_token"';
      sendJson(res, queued.status, { error: 'simulated_fault', status: queued.status }, headers);
      return true;
    }
    const waitSeconds = overRateLimit();
    if (waitSeconds !== undefined) {
      injected.set(res, 'rate-limit');
      const limit = faults.rateLimit!;
      sendJson(
        res,
        429,
        { error: 'rate_limited', error_description: `more than ${limit.perSecond} requests per second (burst ${limit.burst})` },
        { 'retry-after': String(waitSeconds) },
      );
      return true;
    }
    if (everyNth('rateLimit', faults.rateLimitEvery)) {
      injected.set(res, 'rate-limit');
      sendJson(res, 429, { error: 'rate_limited', error_description: 'too many requests' }, { 'retry-after': String(faults.retryAfterSeconds) });
      return true;
    }
    if (faults.errorRate > 0 && random() < faults.errorRate) {
      injected.set(res, 'error-rate');
      sendJson(res, faults.errorStatus, { error: 'simulated_error', status: faults.errorStatus });
      return true;
    }
    return false;
  };

  // ----------------------------------------------------------------------------------------
  // E6: GET /analytics.

  const handleAnalytics = (url: URL, res: http.ServerResponse, queued: QueuedFault | undefined): void => {
    const params = url.searchParams;
    const pageNumber = intParam(params, 'pageNumber', 1, 1, Number.MAX_SAFE_INTEGER);
    const pageSize = intParam(params, 'pageSize', DEFAULT_PAGE_SIZE, 1, MAX_PAGE_SIZE);
    const { from, to } = rangeParams(params, true);

    const arrivals = faults.arrivals;
    if (arrivals !== undefined && tick('arrivals', arrivals) === arrivals.afterRequests) {
      // Without toDate the range is open: new records land between startDate and the data's end.
      const upper = to ?? new Date(Math.max(from!.getTime(), dataset.end.getTime()));
      const inclusive = to === undefined ? true : toInclusive;
      if (arrivals.count > 0 && (inclusive || upper.getTime() > from!.getTime())) {
        dataset.insert(dataset.plausibleRecords(arrivals.count, from!, upper, inclusive, dataset.insertedRecords + 1));
      }
    }

    const totalRecords = dataset.count(from, to, toInclusive);
    let totalPages = Math.ceil(totalRecords / pageSize);
    let records: string[] = [];
    if (pageNumber <= totalPages && queued !== 'empty-page') {
      const offset = (pageNumber - 1) * pageSize;
      const limit = queued === 'oversized-page' ? pageSize + Math.max(1, Math.ceil(pageSize / 10)) : pageSize;
      records = dataset.pageJsonOrdered(from, to, toInclusive, offset, limit, order, orderRandom);
    }
    if (queued === 'oversized-page') {
      // Too few records left in the range: pad with copies (or new records) to exceed pageSize.
      if (records.length === 0) {
        const upper = to ?? new Date(Math.max(from!.getTime(), dataset.end.getTime()));
        records = dataset.plausibleRecords(1, from!, upper, true, 0).map((r) => JSON.stringify(r));
      }
      while (records.length <= pageSize) records.push(records[records.length - 1]!);
    }
    if (queued === 'inconsistent-total-pages') totalPages += 3;
    if (queued === 'nul-in-record' && records.length > 0) {
      // Valid JSON (the escape \u0000), which PostgreSQL jsonb refuses to store (SQLSTATE 22P05).
      const first = JSON.parse(records[0]!) as Record<string, unknown>;
      first.customerName = `${typeof first.customerName === 'string' ? first.customerName : ''}\u0000`;
      records[0] = JSON.stringify(first);
    }
    const data = queued === 'bad-envelope' ? `{"records":[${records.join(',')}]}` : `[${records.join(',')}]`;
    const body = `{"pageNumber":${pageNumber},"pageSize":${pageSize},"totalRecords":${totalRecords},"totalPages":${totalPages},"data":${data}}`;
    const malformed = everyNth('malformed', faults.malformedEvery) ? 'malformed-json' : undefined;
    if (queued === undefined && malformed !== undefined) injected.set(res, 'malformed-every');
    deliver(res, 'application/json; charset=utf-8', body, queued ?? malformed);
  };

  // ----------------------------------------------------------------------------------------
  // E7: GET /analytics/prometheus.

  const handlePrometheus = (url: URL, res: http.ServerResponse, queued: QueuedFault | undefined): void => {
    const { from, to } = rangeParams(url.searchParams, false);
    const counts = dataset.eventCounts(from, to, toInclusive);
    const lines: string[] = [];
    for (const eventType of EVENT_TYPES) {
      const name = metricName(eventType);
      if (options.prometheusHelp === true) {
        lines.push(`# HELP ${name} Number of ${eventType} events in the requested range.`, `# TYPE ${name} untyped`);
      }
      for (const c of counts) {
        if (c.eventType !== eventType) continue;
        lines.push(`${name}{customer="${escapeLabelValue(c.customerName)}",customer_id="${escapeLabelValue(c.customerId)}"} ${c.count}`);
      }
    }
    let body = `${lines.join('\n')}\n`;
    if (queued === 'bad-envelope') body = 'userlogin_event_count customer=Acme 12 extra\nthis is not a sample line\n';
    deliver(res, 'text/plain; version=0.0.4; charset=utf-8', body, queued === 'bad-envelope' ? undefined : queued);
  };

  // ----------------------------------------------------------------------------------------
  // Routing.

  /** Which endpoint a path is on which port; undefined = not served there. */
  const endpointOf = (path: string, authPort: boolean): Endpoint | 'token' | undefined => {
    if (path === '/connect/token') return authPort || options.separateAuth !== true ? 'token' : undefined;
    if (authPort) return undefined;
    return path === '/analytics' ? 'analytics' : path === '/analytics/prometheus' ? 'prometheus' : undefined;
  };

  const route = async (req: http.IncomingMessage, res: http.ServerResponse, authPort: boolean): Promise<void> => {
    const url = new URL(req.url ?? '/', 'http://simulator.invalid');
    const path = url.pathname;
    const endpoint = endpointOf(path, authPort);
    if (endpoint === 'token') stats.tokenRequests++;
    else if (endpoint === 'analytics') stats.analyticsRequests++;
    else if (endpoint === 'prometheus') stats.prometheusRequests++;
    else stats.otherRequests++;

    if (faults.latencyMs > 0) await sleep(faults.latencyMs);
    if (closed) return;

    if (endpoint === undefined) {
      sendJson(res, 404, { error: 'not_found', error_description: `no resource at ${path}` });
      return;
    }
    const allowed = endpoint === 'token' ? 'POST' : 'GET';
    if (req.method !== allowed) {
      sendJson(res, 405, { error: 'method_not_allowed', error_description: `${path} accepts ${allowed}` }, { allow: allowed });
      return;
    }
    if (endpoint === 'token') {
      const queuedForToken = takeQueuedFault('token', url);
      if (queuedForToken !== undefined) injected.set(res, faultLabel(queuedForToken));
      await handleToken(req, res, queuedForToken);
      return;
    }
    const problem = bearerProblem(req);
    if (problem !== undefined) {
      sendInvalidToken(res, problem);
      return;
    }
    const queued = takeQueuedFault(endpoint, url);
    if (queued !== undefined) injected.set(res, faultLabel(queued));
    if (answeredByFault(res, queued)) return;
    try {
      if (endpoint === 'analytics') handleAnalytics(url, res, queued);
      else handlePrometheus(url, res, queued);
    } catch (err) {
      if (!(err instanceof ParameterError)) throw err;
      sendJson(res, 400, { error: 'invalid_request', parameter: err.parameter, error_description: err.message });
    }
  };

  const onRequest = (req: http.IncomingMessage, res: http.ServerResponse, authPort = false): void => {
    const startedMs = performance.now();
    res.once('finish', () => {
      log?.debug({ method: req.method, path: req.url, status: res.statusCode, ms: Math.round(performance.now() - startedMs) }, 'simulator request');
    });
    if (options.onRequest !== undefined) {
      const report = options.onRequest;
      res.once('close', () => {
        const pathname = (req.url ?? '/').split('?')[0]!;
        const endpoint = endpointOf(pathname, authPort) ?? 'other';
        try {
          report({ endpoint, method: req.method ?? '', path: req.url ?? '/', status: res.headersSent ? res.statusCode : undefined, fault: injected.get(res) });
        } catch (err) {
          log?.error({ err }, 'simulator onRequest hook threw');
        }
      });
    }
    route(req, res, authPort).catch((err: unknown) => {
      log?.error({ err, method: req.method, path: req.url }, 'simulator handler failed');
      if (!res.headersSent) sendJson(res, 500, { error: 'server_error' });
      else res.destroy();
    });
  };

  const tls = options.tls;
  const createServer = (handler: http.RequestListener): http.Server => {
    const created: http.Server = tls
      ? https.createServer(
          {
            cert: tls.cert,
            key: tls.key,
            ...(tls.ca !== undefined ? { ca: tls.ca } : {}),
            requestCert: tls.requireClientCert === true,
            rejectUnauthorized: tls.requireClientCert === true,
          },
          handler,
        )
      : http.createServer(handler);
    // A client that breaks off mid-request must not take the server down.
    created.on('clientError', (_err, socket) => socket.destroy());
    return created;
  };
  const listen = (target: http.Server, port: number): Promise<void> =>
    new Promise<void>((resolve, reject) => {
      target.once('error', reject);
      target.listen(port, host, () => {
        target.off('error', reject);
        resolve();
      });
    });
  const shutDown = (target: http.Server): Promise<void> =>
    new Promise<void>((resolve) => {
      if (!target.listening) {
        target.closeAllConnections();
        resolve();
        return;
      }
      target.close(() => resolve());
      target.closeAllConnections();
    });

  const server = createServer((req, res) => onRequest(req, res));
  await listen(server, options.port ?? 0);
  const authServer = options.separateAuth === true ? createServer((req, res) => onRequest(req, res, true)) : undefined;
  if (authServer !== undefined) {
    try {
      await listen(authServer, 0);
    } catch (err) {
      await shutDown(server);
      throw err;
    }
  }

  const shownHost = host === '0.0.0.0' ? '127.0.0.1' : host === '::' ? '::1' : host;
  const urlOf = (target: http.Server): string =>
    `${tls ? 'https' : 'http'}://${shownHost.includes(':') ? `[${shownHost}]` : shownHost}:${(target.address() as AddressInfo).port}`;
  const url = urlOf(server);
  const authUrl = authServer !== undefined ? urlOf(authServer) : url;
  const authPort = authServer !== undefined ? (authServer.address() as AddressInfo).port : undefined;
  /** Serialises setAuthDown calls. */
  let authChange: Promise<void> = Promise.resolve();

  let closing: Promise<void> | undefined;
  return {
    url,
    authUrl,
    dataset,
    get order(): RecordOrder {
      return order;
    },
    set order(value: RecordOrder) {
      order = checkOrder(value);
    },
    faults,
    stats,
    queueFault(fault, times = 1, target = 'any', when = undefined) {
      if (!Number.isSafeInteger(times) || times < 1) throw new InvalidArgumentError(`times must be a whole number ≥ 1; got ${times}`);
      if (target === 'token' && ANALYTICS_ONLY_FAULTS.has(fault))
        throw new InvalidArgumentError(`fault ${JSON.stringify(fault)} applies to E6 only, not to token requests`);
      if (typeof fault === 'object' && !(Number.isInteger(fault.status) && fault.status >= 100 && fault.status <= 599)) {
        throw new InvalidArgumentError(`fault status must be an HTTP status from 100 to 599; got ${fault.status}`);
      }
      queue.push({ fault, remaining: times, target, when });
    },
    pendingFaults() {
      return queue.reduce((sum, e) => sum + e.remaining, 0);
    },
    insertRecords(records) {
      dataset.insert(records);
    },
    revokeAllTokens() {
      for (const info of tokens.values()) info.revoked = true;
    },
    setClientSecret(secret) {
      if (typeof secret !== 'string' || secret === '') throw new InvalidArgumentError('the client secret must not be empty');
      clientSecret = secret;
    },
    setAuthDown(down) {
      if (authServer === undefined || authPort === undefined) {
        return Promise.reject(new InvalidArgumentError('setAuthDown needs startSimulator({ separateAuth: true }): E0 shares the port of E6 and E7'));
      }
      authChange = authChange.then(async () => {
        if (closed) return;
        if (down) await shutDown(authServer);
        else if (!authServer.listening) await listen(authServer, authPort);
      });
      return authChange;
    },
    close() {
      closing ??= new Promise<void>((resolve) => {
        closed = true;
        for (const timer of stallTimers) clearTimeout(timer);
        stallTimers.clear();
        const done = [shutDown(server), ...(authServer !== undefined ? [authChange.catch(() => undefined).then(() => shutDown(authServer))] : [])];
        void Promise.all(done).then(() => resolve());
      });
      return closing;
    },
  };
}
