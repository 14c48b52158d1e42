/**
 * Client of the analytics API: E6 `GET /analytics` (JSON pages) and E7 `GET /analytics/prometheus`
 * (Prometheus text), with tokens from E0. Requests wait on the budget and are retried; a 401 renews
 * the token once; every body is decoded, then validated before anyone sees it. Design:
 * docs/design/upstream-requests.md, docs/design/e6-pages.md.
 */
import type { Dispatcher } from 'undici';
import { z } from 'zod';
import type { UpstreamConfig } from '../config.js';
import { AbortedError, InvalidArgumentError, UpstreamBodyError, type Endpoint, type FailureReason } from '../errors.js';
import { failureReason } from '../failures.js';
import type { Logger } from '../log.js';
import { RequestBudget, untilAborted } from './budget.js';
import { CLOCK_SKEW_FLOOR_MS, ClockWatch } from './clock.js';
import { readClientFiles } from './files.js';
import { ACCEPT_ENCODING } from './encoding.js';
import { bodyError, createAgent, excerpt, mediaType, send, statusError, type RawResponse } from './http.js';
import { logRetry, withRetries, type RetryPolicy } from './retry.js';
import { MIN_CLIENT_SECRET_LENGTH, TokenClient } from './token.js';

/** Reference Limits. */
const MAX_PAGE_SIZE = 1000;
/** Reference E6. */
const DEFAULT_PAGE_SIZE = 500;
/** Kept whole: the reference does not publish its fields. */
export type AnalyticsRecord = Record<string, unknown>;

/** The E6 page envelope (reference: Analytics resources). See docs/design/e6-pages.md. */
export interface AnalyticsPage {
  pageNumber: number;
  pageSize: number;
  totalRecords: number;
  totalPages: number;
  data: AnalyticsRecord[];
  /** The body exactly as received from E6: records are stored from it, not from `data`. */
  text?: string;
  /** What `text` was decoded from, when valid UTF-8. */
  bytes?: Buffer;
  /** Fields of the body beside the envelope's. */
  extra?: Record<string, unknown>;
}

/** E6 query parameters, dates sent as ISO 8601 UTC. */
export interface PageQuery {
  startDate: Date;
  /** Absent: no upper bound. Inclusive or not, the reference does not say. */
  toDate?: Date;
  /** From 1 (the default). */
  pageNumber?: number;
  /** 1 to 1000, default 500. */
  pageSize?: number;
}

/** E7 query parameters, sent when given. */
export interface PrometheusQuery {
  startDate?: Date;
  toDate?: Date;
}

export interface RequestOptions {
  signal?: AbortSignal;
  /** E7: makes per response a SendOptions.inspect; what it throws is what the request throws. */
  inspectBody?: () => (chunk: Uint8Array) => void;
}

/** Hooks for the exporter's own metrics. */
export interface ClientObserver {
  /** Requests per second, at start and after every change. */
  onRateLimit?(ratePerSecond: number): void;
  onRateLimitWait?(seconds: number): void;
  /** `status` undefined for a network failure. */
  onResponse?(event: { endpoint: Endpoint; status: number | undefined; durationSeconds: number }): void;
  onRetry?(event: { endpoint: Endpoint; code: string; status: number | undefined; delayMs: number }): void;
  onTokenRequest?(outcome: 'success' | 'failure'): void;
  /** Every failed attempt, E0 included, retried or not; not for an abort. No token: `token`. */
  onAttemptFailed?(event: { endpoint: Endpoint; reason: FailureReason }): void;
  /** Every E6 and E7 response with a `Date` header: the API's clock minus the local one, in seconds. */
  onClockSkew?(skewSeconds: number): void;
}

/** How far before the local now the clock probe asks E6 about: an instant with no more than a page. */
const CLOCK_PROBE_AGO_MS = 86_400_000;

const pageEnvelopeSchema = z.object({
  pageNumber: z.number().int().min(1),
  pageSize: z.number().int().min(1),
  totalRecords: z.number().int().min(0),
  totalPages: z.number().int().min(0),
  data: z.array(z.unknown()),
});

/** E7 body: text, no NUL, not HTML or JSON. */
const prometheusTextSchema = z
  .string()
  .refine((text) => !text.includes('\u0000'), 'contains NUL bytes')
  .refine((text) => !/^\s*[<{[]/.test(text), 'looks like HTML or JSON, not Prometheus text');

/** `YYYY-MM-DDTHH:mm:ssZ` as the reference's examples write it; milliseconds only when non-zero. */
export function formatApiDate(date: Date): string {
  return date.toISOString().replace('.000Z', 'Z');
}

function checkDate(name: string, date: Date | undefined): void {
  if (date !== undefined && (!(date instanceof Date) || Number.isNaN(date.getTime()))) {
    throw new InvalidArgumentError(`${name} must be a valid date`);
  }
}

/** Checks E6 parameters before anything is sent. @throws {InvalidArgumentError} naming the parameter. */
export function validatePageQuery(query: PageQuery): Required<Omit<PageQuery, 'toDate'>> & Pick<PageQuery, 'toDate'> {
  if (query.startDate === undefined) throw new InvalidArgumentError('startDate is required (E6)');
  checkDate('startDate', query.startDate);
  checkDate('toDate', query.toDate);
  if (query.toDate !== undefined && query.toDate < query.startDate) {
    throw new InvalidArgumentError(`toDate ${formatApiDate(query.toDate)} is before startDate ${formatApiDate(query.startDate)}`);
  }
  const pageNumber = query.pageNumber ?? 1;
  const pageSize = query.pageSize ?? DEFAULT_PAGE_SIZE;
  if (!Number.isInteger(pageNumber) || pageNumber < 1) throw new InvalidArgumentError(`pageNumber must be a whole number ≥ 1, got ${pageNumber}`);
  if (!Number.isInteger(pageSize) || pageSize < 1 || pageSize > MAX_PAGE_SIZE) {
    throw new InvalidArgumentError(`pageSize must be a whole number from 1 to ${MAX_PAGE_SIZE}, got ${pageSize}`);
  }
  return { startDate: query.startDate, toDate: query.toDate, pageNumber, pageSize };
}

/**
 * Validates a parsed E6 body against the envelope and itself (docs/design/e6-pages.md); a short page
 * passes (the reader decides). `options` are carried on the page; `url` is named by origin and path.
 * @throws {UpstreamError} `ERR_UPSTREAM_BODY`, retryable, `invalid_envelope` or `inconsistent_page`; nothing else.
 */
export function parsePage(body: unknown, requestedPage: number, url: URL, options: { text?: string; bytes?: Buffer } = {}): AnalyticsPage {
  const page = plainEnvelope(body) ?? schemaEnvelope(body, url);
  const bad = (what: string) => bodyError('analytics', url, `page ${requestedPage} is inconsistent: ${what}`, undefined, 'inconsistent_page');
  for (let i = 0; i < page.data.length; i++) {
    const record = page.data[i];
    if (typeof record !== 'object' || record === null || Array.isArray(record)) throw bad(`data[${i}] is not a JSON object`);
  }
  if (page.pageNumber !== requestedPage) throw bad(`answered pageNumber ${page.pageNumber}`);
  if (page.data.length > page.pageSize) throw bad(`${page.data.length} records, more than pageSize ${page.pageSize}`);
  const expectedPages = Math.ceil(page.totalRecords / page.pageSize);
  if (page.totalPages !== expectedPages && !(page.totalRecords === 0 && page.totalPages === 1)) {
    throw bad(`totalPages ${page.totalPages} does not match totalRecords ${page.totalRecords} at pageSize ${page.pageSize}`);
  }
  const expectedLength =
    page.pageNumber < expectedPages ? page.pageSize : page.pageNumber === expectedPages ? page.totalRecords - (expectedPages - 1) * page.pageSize : 0;
  // Fewer records than promised pass, none included: the reader decides (a paging limit, a count
  // that lies, a fault read again: docs/design/e6-pages.md); more fail, a later page with its page.
  const taken = withOptions(page, body, options);
  if (page.data.length > expectedLength) {
    const what = `${page.data.length} records, expected ${expectedLength} of totalRecords ${page.totalRecords}`;
    if (page.pageNumber > 1) throw new OverfullPageError(bad(what), taken);
    throw bad(what);
  }
  return taken;
}

/**
 * A page past the first holding more records than its envelope leaves for it, as an E6 that ignores
 * `pageNumber` answers a last page (page 1's records again); `page` is the page as parsed, for the
 * reader's check for copies (src/sync/read/page-copies.ts). Retryable, `inconsistent_page`, as before.
 */
export class OverfullPageError extends UpstreamBodyError {
  constructor(
    err: UpstreamBodyError,
    readonly page: AnalyticsPage,
  ) {
    super(err.endpoint, err.reason, err.message, { retryable: true });
  }
}

function withOptions(page: AnalyticsPage, body: unknown, options: { text?: string; bytes?: Buffer }): AnalyticsPage {
  const { pageNumber: _n, pageSize: _s, totalRecords: _r, totalPages: _p, data: _d, ...extra } = body as Record<string, unknown>;
  const withExtra = Object.keys(extra).length > 0 ? { ...page, extra } : page;
  if (options.text === undefined) return withExtra;
  return options.bytes === undefined ? { ...withExtra, text: options.text } : { ...withExtra, text: options.text, bytes: options.bytes };
}

/** The envelope of a body the schema accepts, checked without it (no copy of `data`); else undefined. */
function plainEnvelope(body: unknown): AnalyticsPage | undefined {
  if (typeof body !== 'object' || body === null) return undefined;
  const { pageNumber, pageSize, totalRecords, totalPages, data } = body as Record<string, unknown>;
  const whole = (n: unknown, min: number): n is number => Number.isSafeInteger(n) && (n as number) >= min;
  if (!whole(pageNumber, 1) || !whole(pageSize, 1) || !whole(totalRecords, 0) || !whole(totalPages, 0) || !Array.isArray(data)) return undefined;
  return { pageNumber, pageSize, totalRecords, totalPages, data: data as AnalyticsRecord[] };
}

/** The envelope as the schema reads it. @throws {UpstreamError} `invalid_envelope`, naming what it refused. */
function schemaEnvelope(body: unknown, url: URL): AnalyticsPage {
  const parsed = pageEnvelopeSchema.safeParse(body);
  if (!parsed.success) {
    const what = parsed.error.issues.map((i) => `${i.path.join('.') || 'body'}: ${i.message}`).join('; ');
    throw bodyError('analytics', url, `page envelope is invalid: ${what}`, undefined, 'invalid_envelope');
  }
  return parsed.data as AnalyticsPage;
}

/**
 * One 2xx E6 response as a validated page: content type (JSON or none), JSON, {@link parsePage}.
 * @throws {UpstreamError} `ERR_UPSTREAM_BODY` as parsePage, or `content_type`, `invalid_json`; nothing else.
 */
export function decodePage(res: Pick<RawResponse, 'headers' | 'body' | 'bytes'>, requestedPage: number, url: URL): AnalyticsPage {
  const type = mediaType(res.headers);
  if (type !== '' && type !== 'application/json' && !type.endsWith('+json')) {
    throw bodyError('analytics', url, `content type ${type}, expected application/json: ${excerpt(res.body)}`, undefined, 'content_type');
  }
  let json: unknown;
  try {
    json = JSON.parse(res.body);
  } catch (err) {
    throw bodyError('analytics', url, `body is not valid JSON (${excerpt((err as Error).message, 160)}): ${excerpt(res.body)}`, err, 'invalid_json');
  }
  return parsePage(json, requestedPage, url, res.bytes === undefined ? { text: res.body } : { text: res.body, bytes: res.bytes });
}

export interface AnalyticsClientOptions {
  statisticsUrl: URL;
  tokens: TokenClient;
  dispatcher: Dispatcher;
  retry: RetryPolicy;
  log: Logger;
  observer?: ClientObserver;
  now?: () => number;
  /** UPSTREAM_TIMEOUT in milliseconds, for messages (the dispatcher enforces it). */
  timeoutMs?: number;
  /** Absent: no pacing. */
  budget?: RequestBudget;
  /** UPSTREAM_MAX_BODY in bytes, also bounding a decoded body. */
  maxBodyBytes: number;
  /** ms beyond which a clock skew is logged at warn (clockSkewBoundMs of SYNC_SETTLE); default CLOCK_SKEW_FLOOR_MS. */
  clockSkewBoundMs?: number;
}

export class AnalyticsClient {
  readonly #o: AnalyticsClientOptions;
  readonly #now: () => number;
  readonly #clock: ClockWatch;
  readonly #analyticsUrl: URL;
  readonly #prometheusUrl: URL;

  constructor(options: AnalyticsClientOptions) {
    this.#o = options;
    this.#now = options.now ?? Date.now;
    const onSkew = options.observer?.onClockSkew?.bind(options.observer);
    this.#clock = new ClockWatch({ boundMs: options.clockSkewBoundMs ?? CLOCK_SKEW_FLOOR_MS, log: options.log, ...(onSkew ? { onSkew } : {}) });
    const base = new URL(options.statisticsUrl);
    if (!base.pathname.endsWith('/')) base.pathname += '/';
    this.#analyticsUrl = new URL('analytics', base);
    this.#prometheusUrl = new URL('analytics/prometheus', base);
  }

  /**
   * A client with its token client and dispatcher, the client's files read now; {@link close} it.
   * @throws {ConfigError} for an unreadable file or an empty secret file.
   */
  static fromConfig(
    config: UpstreamConfig,
    deps: {
      log: Logger;
      observer?: ClientObserver;
      now?: () => number;
      random?: () => number;
      sleep?: RetryPolicy['sleep'];
      clockSkewBoundMs?: number;
    },
  ): AnalyticsClient {
    const files = readClientFiles(config);
    if (files.clientSecret.length < MIN_CLIENT_SECRET_LENGTH) {
      const variable = config.clientSecretVariable ?? 'CLIENT_SECRET';
      deps.log.warn(
        { variable, minimumLength: MIN_CLIENT_SECRET_LENGTH },
        `${variable} holds a client secret shorter than ${MIN_CLIENT_SECRET_LENGTH} characters: it is easy to guess, and messages mask it only where it stands as a whole word`,
      );
    }
    const dispatcher = createAgent({ timeoutMs: config.timeoutMs, maxBodyBytes: config.maxBodyBytes, tls: files.tls });
    const retry: RetryPolicy = {
      maxAttempts: config.maxAttempts,
      maxDelayMs: config.retryMaxDelayMs,
      ...(deps.random ? { random: deps.random } : {}),
      ...(deps.sleep ? { sleep: deps.sleep } : {}),
    };
    // E0 is not paced: a token queued behind pages would only delay them.
    const budget =
      config.rateLimit === undefined
        ? undefined
        : new RequestBudget({
            ...config.rateLimit,
            ...(deps.sleep ? { sleep: deps.sleep } : {}),
            observer: {
              onRate: (rate) => deps.observer?.onRateLimit?.(rate),
              onWait: (seconds) => deps.observer?.onRateLimitWait?.(seconds),
            },
          });
    const tokens = new TokenClient({
      tokenUrl: config.tokenUrl,
      clientId: config.clientId,
      clientSecret: files.clientSecret,
      ...(config.clientSecretFile !== undefined ? { clientSecretFile: config.clientSecretFile.file } : {}),
      authMethod: config.tokenAuthMethod,
      scope: config.scope,
      dispatcher,
      retry,
      log: deps.log,
      timeoutMs: config.timeoutMs,
      maxBodyBytes: config.maxBodyBytes,
      ...(deps.now ? { now: deps.now } : {}),
      ...(deps.observer?.onTokenRequest ? { onTokenRequest: (o) => deps.observer?.onTokenRequest?.(o) } : {}),
      ...(deps.observer?.onAttemptFailed ? { onAttemptFailed: (reason) => deps.observer?.onAttemptFailed?.({ endpoint: 'token', reason }) } : {}),
    });
    return new AnalyticsClient({
      statisticsUrl: config.statisticsUrl,
      tokens,
      dispatcher,
      retry,
      log: deps.log,
      timeoutMs: config.timeoutMs,
      maxBodyBytes: config.maxBodyBytes,
      ...(budget ? { budget } : {}),
      ...(deps.observer ? { observer: deps.observer } : {}),
      ...(deps.now ? { now: deps.now } : {}),
      ...(deps.clockSkewBoundMs !== undefined ? { clockSkewBoundMs: deps.clockSkewBoundMs } : {}),
    });
  }

  get budget(): RequestBudget | undefined {
    return this.#o.budget;
  }

  get tokens(): TokenClient {
    return this.#o.tokens;
  }

  /**
   * Fetches one E6 page, validated ({@link parsePage}), with the body's text.
   * @throws {InvalidArgumentError} for parameters the reference forbids (nothing sent); {@link UpstreamError}
   *   `ERR_UPSTREAM_*` after the retries; {@link TokenError} without a token; {@link AbortedError} on `signal`.
   */
  async fetchPage(query: PageQuery, options: RequestOptions = {}): Promise<AnalyticsPage> {
    const q = validatePageQuery(query);
    const url = new URL(this.#analyticsUrl);
    url.searchParams.set('pageNumber', String(q.pageNumber));
    url.searchParams.set('pageSize', String(q.pageSize));
    url.searchParams.set('startDate', formatApiDate(q.startDate));
    if (q.toDate !== undefined) url.searchParams.set('toDate', formatApiDate(q.toDate));
    return this.#get('analytics', url, 'application/json', { ...(options.signal ? { signal: options.signal } : {}) }, (res) =>
      decodePage(res, q.pageNumber, url),
    );
  }

  /** E7's text for a range, checked to be text. @throws as {@link fetchPage}, and what `inspectBody`'s function throws. */
  async fetchPrometheusText(query: PrometheusQuery = {}, options: RequestOptions = {}): Promise<string> {
    checkDate('startDate', query.startDate);
    checkDate('toDate', query.toDate);
    const url = new URL(this.#prometheusUrl);
    if (query.startDate !== undefined) url.searchParams.set('startDate', formatApiDate(query.startDate));
    if (query.toDate !== undefined) url.searchParams.set('toDate', formatApiDate(query.toDate));
    return this.#get('prometheus', url, 'text/plain;version=0.0.4, */*;q=0.1', options, (res) => {
      const type = mediaType(res.headers);
      if (type !== '' && type !== 'text/plain' && type !== 'application/openmetrics-text') {
        throw bodyError('prometheus', url, `content type ${type}, expected text/plain: ${excerpt(res.body)}`, undefined, 'content_type');
      }
      const parsed = prometheusTextSchema.safeParse(res.body);
      if (!parsed.success) throw bodyError('prometheus', url, `body is not Prometheus text: ${parsed.error.issues[0]!.message}`);
      return parsed.data;
    });
  }

  /**
   * The API's time now, in epoch ms: the local clock plus the skew one E6 request's `Date` header
   * shows (E6; the page itself is not used). An error status still tells the time. Undefined when
   * no response carried a `Date` (none sent, or E6 not reached: logged at debug).
   * @throws {AbortedError} on `signal`; nothing else.
   */
  async apiNow(options: { signal?: AbortSignal } = {}): Promise<number | undefined> {
    const before = this.#clock.reads;
    const at = new Date(Math.floor((this.#now() - CLOCK_PROBE_AGO_MS) / 1000) * 1000);
    try {
      // Its token request takes no signal: the run stops waiting for it at once, as the reader does.
      const fetching = this.fetchPage({ startDate: at, toDate: at, pageSize: 1 }, options);
      if (options.signal === undefined) await fetching;
      else {
        fetching.catch(() => undefined);
        await untilAborted(fetching, options.signal, "sync interrupted while asking E6 for the API's time");
      }
    } catch (err) {
      if (err instanceof AbortedError) throw err;
      if (this.#clock.reads === before) this.#o.log.debug({ err }, "E6 did not answer the request for the API's time");
    }
    const skew = this.#clock.reads === before ? undefined : this.#clock.latest;
    return skew === undefined ? undefined : this.#now() + skew.skewMs;
  }

  /** Releases keep-alive sockets. Idempotent. */
  async close(): Promise<void> {
    const d = this.#o.dispatcher as Dispatcher & { destroyed?: boolean; closed?: boolean };
    if (d.destroyed || d.closed) return;
    await d.close();
  }

  async #get<T>(endpoint: Endpoint, url: URL, accept: string, options: RequestOptions, parse: (res: RawResponse) => T): Promise<T> {
    const { tokens, retry, log, observer, dispatcher, timeoutMs, budget, maxBodyBytes } = this.#o;
    const { signal, inspectBody } = options;
    const once = async (token: string): Promise<RawResponse> => {
      // The budget's wait is not part of the request's duration.
      if (budget !== undefined) await budget.acquire(signal);
      const started = performance.now();
      try {
        const res = await send({
          dispatcher,
          endpoint,
          method: 'GET',
          url,
          headers: { authorization: `Bearer ${token}`, accept, 'accept-encoding': ACCEPT_ENCODING },
          maxBodyBytes,
          ...(signal ? { signal } : {}),
          ...(timeoutMs !== undefined ? { timeoutMs } : {}),
          now: this.#now,
          ...(endpoint === 'analytics' ? { keepBytes: true } : {}),
          // Per response: a retry starts counting again.
          ...(inspectBody ? { inspect: inspectBody() } : {}),
        });
        this.#clock.observe(endpoint, res);
        if (res.status === 429) budget?.throttled();
        else if (res.status >= 200 && res.status <= 299) budget?.succeeded();
        observer?.onResponse?.({ endpoint, status: res.status, durationSeconds: res.durationSeconds });
        return res;
      } catch (err) {
        if (!(err instanceof AbortedError)) observer?.onResponse?.({ endpoint, status: undefined, durationSeconds: (performance.now() - started) / 1000 });
        throw err;
      }
    };
    return withRetries(
      async () => {
        try {
          let token = await tokens.getToken();
          let res = await once(token);
          if (res.status === 401) {
            // A token can be revoked before its hour: renew once.
            tokens.invalidate(token);
            token = await tokens.getToken();
            res = await once(token);
          }
          if (res.status < 200 || res.status > 299) throw statusError(endpoint, url, res, this.#now(), excerpt(res.body, 120, [token]));
          return parse(res);
        } catch (err) {
          if (!(err instanceof AbortedError)) observer?.onAttemptFailed?.({ endpoint, reason: failureReason(err) });
          throw err;
        }
      },
      retry,
      {
        ...(signal ? { signal } : {}),
        onRetry: (event) => {
          const { error, delayMs } = event;
          observer?.onRetry?.({ endpoint, code: error.code, status: error.status, delayMs });
          logRetry(log, endpoint, event, retry.maxAttempts);
        },
      },
    );
  }
}
