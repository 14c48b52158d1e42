/**
 * Client of the analytics API: E6 `GET /analytics` (JSON pages) and E7
 * `GET /analytics/prometheus` (Prometheus text), with bearer tokens from E0.
 *
 * Every request is retried on transient faults (see {@link withRetries}); a 401 renews the
 * token and repeats the call once; every body is validated before anyone sees it.
 */
import type { Dispatcher } from 'undici';
import { z } from 'zod';
import type { UpstreamConfig } from '../config.js';
import { AbortedError, InvalidArgumentError, failureReason, type Endpoint, type FailureReason } from '../errors.js';
import type { Logger } from '../log.js';
import { bodyError, createAgent, excerpt, mediaType, send, statusError, type RawResponse } from './http.js';
import { dataElementSpans, dataTextWithout, escapeLoneSurrogates, stringifyJson, unstorableEscapes, type UnstorableEscape } from './page-text.js';
import { withRetries, type RetryPolicy } from './retry.js';
import { TokenClient } from './token.js';

/** Reference Limits: pageSize is 1 to 1000. */
export const MAX_PAGE_SIZE = 1000;
/** Reference E6: pageSize default. */
export const DEFAULT_PAGE_SIZE = 500;
/**
 * Records nesting deeper than this (objects and arrays, the record itself being level 1) are
 * quarantined: JSON.stringify overflows the stack from about ten thousand levels and PostgreSQL
 * from a few tens of thousands (`stack depth limit exceeded`).
 */
export const MAX_RECORD_DEPTH = 1000;

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
   * The body's text, when the page was read from E6 ({@link decodePage}): the sync stores the
   * records from this text, so they are kept exactly as sent (JSON.parse rounds integers beyond
   * 2^53 and rewrites `1.10` or `1e400`; PostgreSQL's jsonb keeps them as numeric). It is the body
   * as received, unless the body may hold something jsonb refuses (the text holds `\u0000`, a
   * surrogate escape or a raw surrogate; or a record or an envelope field nests too deep): then it
   * is `{"data":[…]}` holding every record's exact text but `null` at the position of each
   * quarantined one, so positions in `data` still index it, and nothing of the envelope.
   */
  text?: string;
  /**
   * The records of `data` PostgreSQL jsonb cannot store as they are, in order of position; absent
   * when there are none (most pages). They stay in `data`; the sync keeps them out of `records`
   * and stores them in `records_quarantine` instead.
   */
  quarantined?: readonly QuarantinedRecord[];
}

/**
 * A record of an E6 page that PostgreSQL jsonb cannot store as it is (see {@link findUnstorable}):
 * a string or key holding U+0000 or an unpaired surrogate, nesting deeper than
 * {@link MAX_RECORD_DEPTH}, or (for a page without text) a number JSON.parse made infinite.
 */
export interface QuarantinedRecord {
  /** Position in the page's `data`, from 0. */
  index: number;
  /** Where in the record, JSONPath-like, as {@link findUnstorable} gives it (`$.customer.name`, `$.tags[2]`). */
  path: string;
  /** What is wrong there, as {@link findUnstorable} gives it (`is a string that holds U+0000 …`). */
  reason: string;
  /**
   * The record's JSON text exactly as in the body (an unpaired surrogate, which a body read off the
   * wire never holds raw, written as its `\uXXXX` escape); for a page without text,
   * JSON.stringify of the parsed record. Never holds a NUL byte: U+0000 is the six characters `\u0000`.
   */
  text: string;
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
}

/** Hooks for the exporter's own metrics; every one is optional. */
export interface ClientObserver {
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
 * records than pageSize, totalPages agreeing with totalRecords, a full page before the last; and
 * finds the records PostgreSQL jsonb cannot store (see {@link findUnstorable}), which are
 * quarantined rather than refused: one bad record must not stop its window on every run.
 *
 * @param body the parsed JSON of the response.
 * @param requestedPage the pageNumber sent, from 1.
 * @param url the request URL; only its origin and path appear in messages.
 * @param options.text the body's JSON text, when there is one: the page carries it and the records
 *   are stored from it (see {@link AnalyticsPage.text}), where jsonb keeps any number exactly, so
 *   numbers JSON.parse made infinite are storable. When the text shows that no string can hold
 *   U+0000 or an unpaired surrogate (no `\u0000`, no surrogate escape, no raw surrogate), only
 *   depth is checked record by record: a page's strings are most of its values. Only a page the
 *   pre-check does not clear, or with something nested too deep, is scanned for its records' text
 *   spans and given a new `text` (see {@link AnalyticsPage.text}); that scan also quarantines a
 *   record whose text holds an escape jsonb refuses in a member a duplicate key hid from JSON.parse.
 * @returns the page, records kept whole (the same objects), with `text` when given and
 *   `quarantined` when a record cannot be stored.
 * @throws {UpstreamError} `ERR_UPSTREAM_BODY`, retryable, naming what was wrong (reason
 *   `invalid_envelope` or `inconsistent_page`); {@link InvalidArgumentError} when `options.text`
 *   is not the JSON text of `body`. Never anything else.
 */
export function parsePage(body: unknown, requestedPage: number, url: URL, options: { text?: string } = {}): AnalyticsPage {
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
  if (page.data.length !== expectedLength) {
    const where = page.data.length === 0 && page.pageNumber < expectedPages ? `an empty page before the last (totalPages ${page.totalPages}): ` : '';
    throw bad(`${where}${page.data.length} records, expected ${expectedLength} of totalRecords ${page.totalRecords}`);
  }
  const { text } = options;
  const strings = text === undefined || MAY_HOLD_UNSTORABLE_STRING.test(text);
  const numbers = text === undefined;
  let found: Omit<QuarantinedRecord, 'text'>[] | undefined;
  for (let i = 0; i < page.data.length; i++) {
    const problem = findUnstorable(page.data[i], { strings, numbers });
    if (problem !== undefined) (found ??= []).push({ index: i, path: problem.path, reason: problem.problem });
  }
  if (text === undefined) {
    return found === undefined ? page : { ...page, quarantined: found.map((q) => ({ ...q, text: stringifyJson(page.data[q.index]) })) };
  }
  if (!strings && found === undefined) {
    // PostgreSQL parses the whole body: a field beside `data` must be storable as well. With no
    // string to fear, only depth can be wrong there, and the envelope is a few numbers.
    const { data: _records, ...envelope } = body as Record<string, unknown>;
    if (findUnstorable(envelope, { strings: false, numbers: false }) === undefined) return { ...page, text };
  }
  // Rare: store `{"data":[…]}` with every record's exact span but the unstorable ones, which also
  // leaves out the envelope and whatever a duplicate key hid from JSON.parse but not from PostgreSQL.
  const spans = dataElementSpans(text);
  if (spans === undefined || spans.length !== page.data.length) {
    throw new InvalidArgumentError(
      `${describeEndpointPath(url)}: page ${requestedPage}: the text given is not the JSON text of the body (its data array was not found whole)`,
    );
  }
  const byIndex = new Map(found?.map((q) => [q.index, q]));
  // A member overridden by a duplicate key is gone from the parsed record but not from its text.
  const escapes = strings ? unstorableEscapes(text, spans) : undefined;
  const quarantined: QuarantinedRecord[] = [];
  for (let i = 0; i < spans.length; i++) {
    const escape = escapes?.get(i);
    const q = byIndex.get(i) ?? (escape === undefined ? undefined : { index: i, path: '$', reason: HIDDEN_ESCAPE_PROBLEMS[escape] });
    if (q !== undefined) quarantined.push({ ...q, text: escapeLoneSurrogates(text.slice(spans[i]!.start, spans[i]!.end)) });
  }
  const storable = dataTextWithout(text, spans, new Set(quarantined.map((q) => q.index)));
  return quarantined.length === 0 ? { ...page, text: storable } : { ...page, text: storable, quarantined };
}

/** Problems of a record whose text holds an escape jsonb refuses that its parsed value does not show. */
const HIDDEN_ESCAPE_PROBLEMS: Record<UnstorableEscape, string> = {
  nul: 'has in its text a \\u0000 escape (U+0000), which PostgreSQL jsonb cannot store, in a member JSON.parse does not keep (a duplicate key)',
  surrogate: 'has in its text an unpaired UTF-16 surrogate escape, which PostgreSQL jsonb cannot store, in a member JSON.parse does not keep (a duplicate key)',
};

/** `E6 <origin><path>` for messages, without the query string. */
function describeEndpointPath(url: URL): string {
  return `E6 ${url.origin}${url.pathname}`;
}

/** A lone UTF-16 surrogate: a high one not followed by a low one, or a low one not preceded by a high one. */
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
const ANY_SURROGATE = /[\ud800-\udfff]/;
const PLAIN_KEY = /^[A-Za-z_$][\w$]*$/;
/** Longest path quoted in a message; a deep or long-keyed path is shortened in its middle. */
const MAX_PATH_CHARS = 160;

/** Why PostgreSQL jsonb cannot store this string as it is, or undefined when it can. */
function stringProblem(text: string): string | undefined {
  if (text.includes('\u0000')) return 'holds U+0000 (\\u0000), which PostgreSQL jsonb cannot store';
  if (ANY_SURROGATE.test(text) && LONE_SURROGATE.test(text)) return 'holds an unpaired UTF-16 surrogate, which PostgreSQL jsonb cannot store';
  return undefined;
}

/**
 * Finds the first value in an E6 record that PostgreSQL `jsonb` cannot store as it is:
 * a string (value or key) holding U+0000 or an unpaired surrogate, a number that is not finite
 * (JSON.parse turns `1e400` into Infinity, which JSON.stringify would write as null; checked only
 * with `numbers`, for records that are stored re-serialised rather than from E6's text), or nesting
 * deeper than {@link MAX_RECORD_DEPTH}.
 *
 * @returns the JSONPath-like location (`$.a.b[3]`, keys that are not identifiers quoted as JSON,
 *   shortened in the middle with `…` beyond 160 characters) and what is wrong there, or undefined
 *   when the whole record can be stored.
 */
export function findUnstorable(record: unknown, options: { strings?: boolean; numbers?: boolean } = {}): { path: string; problem: string } | undefined {
  const found = scan(record, 1, options.strings ?? true, options.numbers ?? true);
  if (found === undefined) return undefined;
  let path = '$';
  for (let i = found.keys.length - 1; i >= 0; i--) {
    const key = found.keys[i]!;
    path += typeof key === 'number' ? `[${key}]` : PLAIN_KEY.test(key) ? `.${key}` : `[${JSON.stringify(key)}]`;
  }
  if (path.length > MAX_PATH_CHARS) {
    // Cut between code points: half a surrogate pair in a message would be a new unpaired surrogate.
    const head = path.slice(0, MAX_PATH_CHARS - 41).replace(/[\ud800-\udbff]$/, '');
    const tail = path.slice(-40).replace(/^[\udc00-\udfff]/, '');
    path = `${head}…${tail}`;
  }
  return { path, problem: found.problem };
}

/**
 * Depth-first scan; keys are collected innermost first on the way back. Recursion is bounded by
 * MAX_DEPTH. `strings` false skips the string checks (the caller ruled them out on the text).
 */
function scan(value: unknown, depth: number, strings: boolean, numbers: boolean): { keys: (string | number)[]; problem: string } | undefined {
  if (typeof value === 'string') {
    if (!strings) return undefined;
    const problem = stringProblem(value);
    return problem === undefined ? undefined : { keys: [], problem: `is a string that ${problem}` };
  }
  if (typeof value === 'number') {
    return !numbers || Number.isFinite(value) ? undefined : { keys: [], problem: 'is a number beyond the range of a double (it would be stored as null)' };
  }
  if (value === null || typeof value !== 'object') return undefined;
  if (depth > MAX_RECORD_DEPTH) {
    return { keys: [], problem: `nests deeper than ${MAX_RECORD_DEPTH} levels of objects and arrays` };
  }
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = scan(value[i], depth + 1, strings, numbers);
      if (found !== undefined) {
        found.keys.push(i);
        return found;
      }
    }
    return undefined;
  }
  for (const key in value) {
    const keyProblem = strings ? stringProblem(key) : undefined;
    if (keyProblem !== undefined) return { keys: [key], problem: `has a key that ${keyProblem}` };
    const found = scan((value as Record<string, unknown>)[key], depth + 1, strings, numbers);
    if (found !== undefined) {
      found.keys.push(key);
      return found;
    }
  }
  return undefined;
}

/**
 * Turns one 2xx E6 response into a validated page, as {@link AnalyticsClient.fetchPage} does:
 * the content type (JSON, or none), the body as JSON, then {@link parsePage}.
 *
 * @param res the response's headers (only `content-type` is read) and its body as text.
 * @param requestedPage the pageNumber sent, from 1.
 * @param url the request URL; only its origin and path appear in messages.
 * @returns the page with the body's text (see {@link AnalyticsPage.text}) and its quarantined records.
 * @throws {UpstreamError} `ERR_UPSTREAM_BODY`, retryable, with reason `content_type`, `invalid_json`,
 *   `invalid_envelope` or `inconsistent_page`. Never anything else, whatever the body
 *   (test/unit/page-fuzz.test.ts).
 */
export function decodePage(res: Pick<RawResponse, 'headers' | 'body'>, requestedPage: number, url: URL): AnalyticsPage {
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
  return parsePage(json, requestedPage, url, { text: res.body });
}

/**
 * JSON text can give a string U+0000 or a lone surrogate only through a `\u0000` or surrogate escape
 * (raw control characters are invalid JSON), or a raw surrogate (never from UTF-8 off the wire).
 */
const MAY_HOLD_UNSTORABLE_STRING = /\\u0000|\\u[dD][89abAB]|\\u[dD][c-fC-F]|[\ud800-\udfff]/;

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
   * Builds a client, its token client and its dispatcher from the configuration.
   * Call {@link close} when done, to release keep-alive sockets.
   */
  static fromConfig(
    config: UpstreamConfig,
    deps: { log: Logger; observer?: ClientObserver; now?: () => number; random?: () => number; sleep?: RetryPolicy['sleep'] },
  ): AnalyticsClient {
    const dispatcher = createAgent({ timeoutMs: config.timeoutMs, tls: config.tls });
    const retry: RetryPolicy = {
      maxAttempts: config.maxAttempts,
      maxDelayMs: config.retryMaxDelayMs,
      ...(deps.random ? { random: deps.random } : {}),
      ...(deps.sleep ? { sleep: deps.sleep } : {}),
    };
    const tokens = new TokenClient({
      tokenUrl: config.tokenUrl,
      clientId: config.clientId,
      clientSecret: config.clientSecret,
      authMethod: config.tokenAuthMethod,
      scope: config.scope,
      dispatcher,
      retry,
      log: deps.log,
      timeoutMs: config.timeoutMs,
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
      ...(deps.observer ? { observer: deps.observer } : {}),
      ...(deps.now ? { now: deps.now } : {}),
    });
  }

  /** The token client, for `check`'s token step. */
  get tokens(): TokenClient {
    return this.#o.tokens;
  }

  /**
   * Fetches one E6 page.
   *
   * @param query startDate required; pageSize 1–1000 (default 500); pageNumber from 1.
   * @returns the validated page envelope with its records kept whole, the body's text (stored as
   *   sent), and the records PostgreSQL jsonb cannot store, quarantined (see {@link parsePage}).
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
    return this.#get('analytics', url, 'application/json', options.signal, (res) => decodePage(res, q.pageNumber, url));
  }

  /**
   * Fetches the E7 Prometheus text for a range.
   *
   * @returns the body as text; it is checked to be text (content type, no NUL, not HTML/JSON)
   *   but not parsed here.
   * @throws as {@link fetchPage}.
   */
  async fetchPrometheusText(query: PrometheusQuery = {}, options: RequestOptions = {}): Promise<string> {
    checkDate('startDate', query.startDate);
    checkDate('toDate', query.toDate);
    const url = new URL(this.#prometheusUrl);
    if (query.startDate !== undefined) url.searchParams.set('startDate', formatApiDate(query.startDate));
    if (query.toDate !== undefined) url.searchParams.set('toDate', formatApiDate(query.toDate));
    return this.#get('prometheus', url, 'text/plain;version=0.0.4, */*;q=0.1', options.signal, (res) => {
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

  async #get<T>(endpoint: Endpoint, url: URL, accept: string, signal: AbortSignal | undefined, parse: (res: RawResponse) => T): Promise<T> {
    const { tokens, retry, log, observer, dispatcher, timeoutMs } = this.#o;
    const once = async (token: string): Promise<RawResponse> => {
      const started = performance.now();
      try {
        const res = await send({
          dispatcher,
          endpoint,
          method: 'GET',
          url,
          headers: { authorization: `Bearer ${token}`, accept },
          ...(signal ? { signal } : {}),
          ...(timeoutMs !== undefined ? { timeoutMs } : {}),
        });
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
        onRetry: ({ attempt, error, delayMs }) => {
          observer?.onRetry?.({ endpoint, code: error.code, status: error.status, delayMs });
          log.warn(
            {
              endpoint,
              attempt,
              maxAttempts: retry.maxAttempts,
              delayMs,
              status: error.status,
              code: error.code,
              fault: failureReason(error),
              reason: error.message,
            },
            'upstream request failed; retrying',
          );
        },
      },
    );
  }
}
