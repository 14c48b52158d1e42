/**
 * Client of the analytics API: E6 `GET /analytics` (JSON pages) and E7
 * `GET /analytics/prometheus` (Prometheus text), with bearer tokens from E0.
 *
 * Every request is retried on transient faults (see {@link withRetries}); a 401 renews the
 * token and repeats the call once; every request asks for gzip (Accept-Encoding) and every body
 * is decoded (src/upstream/encoding.ts), then validated before anyone sees it.
 */
import type { Dispatcher } from 'undici';
import { z } from 'zod';
import type { UpstreamConfig } from '../config.js';
import { AbortedError, InvalidArgumentError, type Endpoint, type FailureReason } from '../errors.js';
import { failureReason } from '../failures.js';
import type { Logger } from '../log.js';
import { RequestBudget } from './budget.js';
import { readClientFiles } from './files.js';
import { ACCEPT_ENCODING } from './encoding.js';
import { bodyError, createAgent, excerpt, mediaType, send, statusError, type RawResponse } from './http.js';
import { logRetry, withRetries, type RetryPolicy } from './retry.js';
import { MIN_CLIENT_SECRET_LENGTH, TokenClient } from './token.js';

/** Reference Limits: pageSize is 1 to 1000. */
export const MAX_PAGE_SIZE = 1000;
/** Reference E6: pageSize default. */
export const DEFAULT_PAGE_SIZE = 500;
/**
 * One analytics record, kept whole. The reference does not publish its fields, so nothing
 * here looks inside it.
 */
export type AnalyticsRecord = Record<string, unknown>;

/** The E6 page envelope (reference: Analytics resources). */
export interface AnalyticsPage {
  pageNumber: number;
  pageSize: number;
  totalRecords: number;
  totalPages: number;
  data: AnalyticsRecord[];
  /**
   * The body's text exactly as received, when the page was read from E6 ({@link decodePage}): the
   * sync stores the records from this text, so they are kept exactly as sent (JSON.parse rounds
   * integers beyond 2^53 and rewrites `1.10` or `1e400`; PostgreSQL's jsonb keeps them as numeric).
   */
  text?: string;
  /**
   * `text` as the UTF-8 bytes it was decoded from, when the page was read from E6 and they were
   * valid UTF-8: the store writes records from them without encoding `text` again.
   */
  bytes?: Buffer;
  /**
   * Fields of the body beside the envelope's, when it has any: the reference names none, but a
   * store that parses the whole text (`text`) parses them too.
   */
  extra?: Record<string, unknown>;
}

/** E6 query parameters. Dates are sent as ISO 8601 UTC. */
export interface PageQuery {
  /** Start of the range (required by E6). */
  startDate: Date;
  /** End of the range; absent means no upper bound. Whether the API treats it as inclusive is not documented. */
  toDate?: Date;
  /** From 1 (the default). */
  pageNumber?: number;
  /** 1 to 1000; the API's default is 500. */
  pageSize?: number;
}

/** E7 query parameters (whether they are required is not documented; both are sent when given). */
export interface PrometheusQuery {
  startDate?: Date;
  toDate?: Date;
}

export interface RequestOptions {
  signal?: AbortSignal;
  /**
   * E7 only: makes, for each attempt, a function that sees the body's bytes as they are received
   * and may throw to abandon it (see SendOptions.inspect); what it throws is not retried unless it
   * is a retryable {@link ExporterError}, and is what the request throws.
   */
  inspectBody?: () => (chunk: Uint8Array) => void;
}

/** Hooks for the exporter's own metrics; every one is optional. */
export interface ClientObserver {
  /** The pace of the request budget (UPSTREAM_RATE_LIMIT), in requests per second: at start and after every change. */
  onRateLimit?(ratePerSecond: number): void;
  /** One E6/E7 request waited this many seconds for the request budget before it was sent. */
  onRateLimitWait?(seconds: number): void;
  /** One HTTP response or network failure (`status` undefined) of E6 or E7. */
  onResponse?(event: { endpoint: Endpoint; status: number | undefined; durationSeconds: number }): void;
  /** A failed attempt that will be tried again. */
  onRetry?(event: { endpoint: Endpoint; code: string; status: number | undefined; delayMs: number }): void;
  /** One token request (E0) sent. */
  onTokenRequest?(outcome: 'success' | 'failure'): void;
  /**
   * One attempt of a request failed, whether it is retried or not (E0 token attempts included):
   * `reason` is the fault's {@link FailureReason}; an E6/E7 attempt that could get no token is `token`.
   * Cancellations through an AbortSignal are not reported.
   */
  onAttemptFailed?(event: { endpoint: Endpoint; reason: FailureReason }): void;
}

const pageEnvelopeSchema = z.object({
  pageNumber: z.number().int().min(1),
  pageSize: z.number().int().min(1),
  totalRecords: z.number().int().min(0),
  totalPages: z.number().int().min(0),
  data: z.array(z.unknown()),
});

/** Bounds on one E7 body: text, no NUL bytes. */
const prometheusTextSchema = z
  .string()
  .refine((text) => !text.includes('\u0000'), 'contains NUL bytes')
  .refine((text) => !/^\s*[<{[]/.test(text), 'looks like HTML or JSON, not Prometheus text');

/**
 * Formats a date as the reference's examples do: ISO 8601 UTC, `YYYY-MM-DDTHH:mm:ssZ`,
 * with milliseconds only when they are not zero.
 */
export function formatApiDate(date: Date): string {
  return date.toISOString().replace('.000Z', 'Z');
}

function checkDate(name: string, date: Date | undefined): void {
  if (date !== undefined && (!(date instanceof Date) || Number.isNaN(date.getTime()))) {
    throw new InvalidArgumentError(`${name} must be a valid date`);
  }
}

/**
 * Checks E6 parameters against the reference before anything is sent.
 *
 * @throws {InvalidArgumentError} naming the parameter: startDate missing or invalid, toDate
 *   invalid or before startDate, pageNumber not a whole number ≥ 1, pageSize not 1 to 1000.
 */
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
 * Validates an E6 body against the envelope and against itself: the page asked for, no more
 * records than pageSize or than the page's share of totalRecords, totalPages agreeing with
 * totalRecords, no empty page before the last, every record a JSON object. A page holding fewer
 * records than its envelope promises passes (an upstream that clamps the page size while echoing
 * the size asked): whether a part is complete is the reader's question (src/sync/read/reader.ts). What a store can keep of the records is the store's question
 * (src/sync/rows/storable.ts).
 *
 * @param body the parsed JSON of the response.
 * @param requestedPage the pageNumber sent, from 1.
 * @param url the request URL; only its origin and path appear in messages.
 * @param options.text the body's JSON text, when there is one: the page carries it (see
 *   {@link AnalyticsPage.text}).
 * @param options.bytes the UTF-8 bytes `text` was decoded from, when known: carried with it
 *   ({@link AnalyticsPage.bytes}).
 * @returns the page, records kept whole (the same objects), with `text` when given and `extra`
 *   when the body has fields beside the envelope's.
 * @throws {UpstreamError} `ERR_UPSTREAM_BODY`, retryable, naming what was wrong (reason
 *   `invalid_envelope` or `inconsistent_page`. Never anything else.
 */
export function parsePage(body: unknown, requestedPage: number, url: URL, options: { text?: string; bytes?: Buffer } = {}): AnalyticsPage {
  const parsed = pageEnvelopeSchema.safeParse(body);
  if (!parsed.success) {
    const what = parsed.error.issues.map((i) => `${i.path.join('.') || 'body'}: ${i.message}`).join('; ');
    throw bodyError('analytics', url, `page envelope is invalid: ${what}`, undefined, 'invalid_envelope');
  }
  const page = parsed.data as AnalyticsPage;
  const bad = (what: string) => bodyError('analytics', url, `page ${requestedPage} is inconsistent: ${what}`, undefined, 'inconsistent_page');
  for (let i = 0; i < page.data.length; i++) {
    const record = page.data[i];
    if (typeof record !== 'object' || record === null || Array.isArray(record)) throw bad(`data[${i}] is not a JSON object`);
  }
  if (page.pageNumber !== requestedPage) throw bad(`answered pageNumber ${page.pageNumber}`);
  if (page.data.length > page.pageSize) throw bad(`${page.data.length} records, more than pageSize ${page.pageSize}`);
  const expectedPages = Math.ceil(page.totalRecords / page.pageSize);
  // An empty result may be reported as zero pages or as one empty page.
  if (page.totalPages !== expectedPages && !(page.totalRecords === 0 && page.totalPages === 1)) {
    throw bad(`totalPages ${page.totalPages} does not match totalRecords ${page.totalRecords} at pageSize ${page.pageSize}`);
  }
  const expectedLength =
    page.pageNumber < expectedPages ? page.pageSize : page.pageNumber === expectedPages ? page.totalRecords - (expectedPages - 1) * page.pageSize : 0;
  // Fewer records than the envelope promises is not refused here: an upstream that clamps the page
  // size may echo the size asked, and only the reader, which knows what it asked and what each part
  // holds, can tell a short page from a complete one (it never takes a short one as complete:
  // src/sync/read/reader.ts). More records than that, or none of a page that should hold some, is.
  if (page.data.length > expectedLength || (page.data.length === 0 && expectedLength > 0)) {
    const where = page.data.length === 0 && page.pageNumber < expectedPages ? `an empty page before the last (totalPages ${page.totalPages}): ` : '';
    throw bad(`${where}${page.data.length} records, expected ${expectedLength} of totalRecords ${page.totalRecords}`);
  }
  const { pageNumber: _n, pageSize: _s, totalRecords: _r, totalPages: _p, data: _d, ...extra } = body as Record<string, unknown>;
  const withExtra = Object.keys(extra).length > 0 ? { ...page, extra } : page;
  if (options.text === undefined) return withExtra;
  return options.bytes === undefined ? { ...withExtra, text: options.text } : { ...withExtra, text: options.text, bytes: options.bytes };
}

/**
 * Turns one 2xx E6 response into a validated page, as {@link AnalyticsClient.fetchPage} does:
 * the content type (JSON, or none), the body as JSON, then {@link parsePage}.
 *
 * @param res the response's headers (only `content-type` is read), its body as text, and the
 *   bytes it was decoded from when the response kept them.
 * @param requestedPage the pageNumber sent, from 1.
 * @param url the request URL; only its origin and path appear in messages.
 * @returns the page with the body's text (see {@link AnalyticsPage.text}) and bytes when given.
 * @throws {UpstreamError} `ERR_UPSTREAM_BODY`, retryable, with reason `content_type`, `invalid_json`,
 *   `invalid_envelope` or `inconsistent_page`. Never anything else, whatever the body
 *   (test/unit/page-fuzz.test.ts).
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
  /** {statistics_url}. */
  statisticsUrl: URL;
  tokens: TokenClient;
  dispatcher: Dispatcher;
  retry: RetryPolicy;
  log: Logger;
  observer?: ClientObserver;
  now?: () => number;
  /** UPSTREAM_TIMEOUT in milliseconds, named in timeout messages (the dispatcher enforces it). */
  timeoutMs?: number;
  /** The request budget every E6/E7 request (retries included) waits on; absent = no pacing. */
  budget?: RequestBudget;
  /** UPSTREAM_MAX_BODY in bytes, the dispatcher's cap: a decoded body is bounded by it too. */
  maxBodyBytes: number;
}

/** Reads analytics from the platform (E6, E7) with tokens from E0. */
export class AnalyticsClient {
  readonly #o: AnalyticsClientOptions;
  readonly #now: () => number;
  readonly #analyticsUrl: URL;
  readonly #prometheusUrl: URL;

  constructor(options: AnalyticsClientOptions) {
    this.#o = options;
    this.#now = options.now ?? Date.now;
    const base = new URL(options.statisticsUrl);
    if (!base.pathname.endsWith('/')) base.pathname += '/';
    this.#analyticsUrl = new URL('analytics', base);
    this.#prometheusUrl = new URL('analytics/prometheus', base);
  }

  /**
   * Builds a client, its token client and its dispatcher from the configuration, reading the
   * client's files (src/upstream/files.ts: the secret file, the TLS files) now.
   * Call {@link close} when done, to release keep-alive sockets. Logs a warning (naming the
   * variable, never the value) when the client secret is shorter than {@link MIN_CLIENT_SECRET_LENGTH}.
   *
   * @throws {ConfigError} for a file that cannot be read or an empty secret file, as at start.
   */
  static fromConfig(
    config: UpstreamConfig,
    deps: { log: Logger; observer?: ClientObserver; now?: () => number; random?: () => number; sleep?: RetryPolicy['sleep'] },
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
    // E0 is not paced: one token request an hour does not count against a request rate, and a
    // token request queued behind a backlog of pages would only delay the pages waiting for it.
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
    });
  }

  /** The request budget (UPSTREAM_RATE_LIMIT), when one is set. */
  get budget(): RequestBudget | undefined {
    return this.#o.budget;
  }

  /** The token client, for `check`'s token step. */
  get tokens(): TokenClient {
    return this.#o.tokens;
  }

  /**
   * Fetches one E6 page.
   *
   * @param query startDate required; pageSize 1–1000 (default 500); pageNumber from 1.
   * @returns the validated page envelope with its records kept whole and the body's text (see
   *   {@link parsePage}).
   * @throws {InvalidArgumentError} for parameters the reference forbids (nothing is sent);
   *   {@link UpstreamError} `ERR_UPSTREAM_HTTP` / `_NETWORK` / `_TIMEOUT` / `_BODY` after the retries;
   *   {@link TokenError} when no token can be had; {@link AbortedError} on `signal`.
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

  /**
   * Fetches the E7 Prometheus text for a range.
   *
   * @returns the body as text; it is checked to be text (content type, no NUL, not HTML/JSON)
   *   but not parsed here.
   * @throws as {@link fetchPage}, and what `options.inspectBody`'s function throws (serve: an
   *   UpstreamLimitError for a body over the source's limits).
   */
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
      // Every request waits on the budget, retries and a 401's renewed call included; the wait is
      // not part of the request's duration.
      if (budget !== undefined) await budget.acquire(signal);
      const started = performance.now();
      try {
        const res = await send({
          dispatcher,
          endpoint,
          method: 'GET',
          url,
          // gzip both ways: E6 pages of JSON shrink several times over; send() decodes what comes back.
          headers: { authorization: `Bearer ${token}`, accept, 'accept-encoding': ACCEPT_ENCODING },
          maxBodyBytes,
          ...(signal ? { signal } : {}),
          ...(timeoutMs !== undefined ? { timeoutMs } : {}),
          // E6 pages are stored from their bytes (AnalyticsPage.bytes); E7 bodies need only text.
          ...(endpoint === 'analytics' ? { keepBytes: true } : {}),
          // A new inspector per response: a retry or a 401's renewed call starts counting again.
          ...(inspectBody ? { inspect: inspectBody() } : {}),
        });
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
            // The reference promises an hour, but a token can be revoked early: renew once.
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
