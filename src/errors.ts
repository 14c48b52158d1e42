/**
 * Typed errors. Every error this project throws on purpose is an {@link ExporterError}
 * with a stable `code` (safe to match on, to log and to use as a metric label) and,
 * where the failure came from somewhere else, a `cause`.
 *
 * Messages never carry secrets: callers build them from names, statuses and
 * masked values only (see {@link maskSecret}); {@link redactSecrets} (src/redact.ts) masks what
 * an upstream echoed into one.
 */
import { redactSecrets } from './redact.js';

/** Stable error codes. Adding one is fine; renaming one breaks alert rules and log queries. */
export type ErrorCode =
  | 'ERR_CONFIG'
  | 'ERR_TOKEN_REQUEST'
  | 'ERR_TOKEN_RESPONSE'
  | 'ERR_UPSTREAM_HTTP'
  | 'ERR_UPSTREAM_NETWORK'
  | 'ERR_UPSTREAM_TIMEOUT'
  | 'ERR_UPSTREAM_BODY'
  | 'ERR_UPSTREAM_LIMIT'
  | 'ERR_INVALID_ARGUMENT'
  | 'ERR_DATABASE'
  | 'ERR_DATA_DIR_LOCKED'
  | 'ERR_INCONSISTENT_WINDOW'
  | 'ERR_WEB_CONFIG'
  | 'ERR_ABORTED';

/**
 * Why an upstream request or a sync run failed, as a bounded metric label value and a log field;
 * finer than {@link ErrorCode} (every body error shares `ERR_UPSTREAM_BODY`, but a truncated body
 * and a page that contradicts itself are different faults to an operator).
 *
 * - `network`, `timeout`, `http_<status>`: transport and status faults;
 * - `invalid_json` (truncated or not JSON), `content_type` (not JSON or text), `invalid_envelope`
 *   (valid JSON of the wrong shape), `inconsistent_page` (a page contradicting itself: totalPages vs
 *   totalRecords, an empty or short page before the last, more records than pageSize, another page
 *   number), `response_too_large`, `content_encoding` (a body in a Content-Encoding the client cannot
 *   decode: unknown, or not valid in the coding it names), `invalid_body` (any other body fault);
 * - `limit`: an E7 text over one of the source's limits (Prometheus's sample_limit, label_limit,
 *   label_value_length_limit: UPSTREAM_SAMPLE_LIMIT and the two beside it);
 * - `token`: no token could be had (E0), for a request or run that needed one;
 * - `secret_file`: a token request (E0) not sent because CLIENT_SECRET_FILE could not be read or was empty;
 * - `inconsistent_window`: the two reads of an instant holding more than a page kept disagreeing (SYNC_WINDOW_ATTEMPTS);
 * - `database`: a query that failed, or the database unreachable or its connection lost, whether
 *   our {@link DatabaseError} or pg's and Node's own error (`ECONNREFUSED`, "Connection terminated");
 * - `aborted`, `other`.
 *
 * Which error gets which reason is the table FAILURES of src/failures.ts.
 */
export type FailureReason =
  | 'network'
  | 'timeout'
  | `http_${number}`
  | 'invalid_json'
  | 'content_type'
  | 'invalid_envelope'
  | 'inconsistent_page'
  | 'response_too_large'
  | 'invalid_body'
  | 'limit'
  | 'content_encoding'
  | 'token'
  | 'secret_file'
  | 'inconsistent_window'
  | 'database'
  | 'aborted'
  | 'other';

export interface ExporterErrorOptions {
  cause?: unknown;
  /** HTTP status of the response that caused the error, when there was one. */
  status?: number;
  /** Whether trying the same request again may succeed (network faults, 429, 500, 502–504, bad bodies). */
  retryable?: boolean;
  /** The server's Retry-After, in milliseconds from now, when it sent one. */
  retryAfterMs?: number;
  /** Finer than `code`, for metrics and logs; failureReason (src/failures.ts) derives one when absent. */
  reason?: FailureReason;
}

export class ExporterError extends Error {
  readonly code: ErrorCode;
  readonly status: number | undefined;
  readonly retryable: boolean;
  readonly retryAfterMs: number | undefined;
  /** The fault behind the error, when the thrower knew it better than `code` says (see failureReason in src/failures.ts). */
  readonly reason: FailureReason | undefined;

  constructor(code: ErrorCode, message: string, options: ExporterErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.code = code;
    this.status = options.status;
    this.retryable = options.retryable ?? false;
    this.retryAfterMs = options.retryAfterMs;
    this.reason = options.reason;
  }
}

/** A configuration value broke its rule. The CLI exits 2 on it. */
export class ConfigError extends ExporterError {
  /** The environment variable (or `--flag`) that was wrong. */
  readonly variable: string;

  constructor(variable: string, message: string, options: ExporterErrorOptions = {}) {
    super('ERR_CONFIG', message, options);
    this.variable = variable;
  }
}

/** A caller passed an argument that breaks the reference's rules (E6 query parameters). */
export class InvalidArgumentError extends ExporterError {
  constructor(message: string) {
    super('ERR_INVALID_ARGUMENT', message);
  }
}

/** Which upstream endpoint of the reference an error belongs to. */
export type Endpoint = 'token' | 'analytics' | 'prometheus';

/**
 * The identity host (E0) refused or failed the token request: a network error,
 * a non-2xx status (401 for a wrong client id or secret), or a body that is not
 * a Bearer token.
 */
export class TokenError extends ExporterError {
  readonly endpoint: Endpoint = 'token';
}

/**
 * An analytics API call (E6, E7) failed after the retries it was allowed:
 * `ERR_UPSTREAM_HTTP` (status set), `ERR_UPSTREAM_NETWORK`, `ERR_UPSTREAM_TIMEOUT`
 * or `ERR_UPSTREAM_BODY` (the body broke the documented shape).
 */
export class UpstreamError extends ExporterError {
  readonly endpoint: Endpoint;

  constructor(code: ErrorCode, endpoint: Endpoint, message: string, options: ExporterErrorOptions = {}) {
    super(code, message, options);
    this.endpoint = endpoint;
  }
}

/** The limits an E7 text is read under, by the names Prometheus's scrape configuration gives them. */
export type UpstreamLimitName = 'sample_limit' | 'label_limit' | 'label_value_length_limit';

/**
 * An E7 text (`GET /analytics/prometheus`) went over one of its source's limits while it was read:
 * more sample lines than sample_limit (UPSTREAM_SAMPLE_LIMIT), a sample with more labels than
 * label_limit (UPSTREAM_LABEL_LIMIT), or a label value longer than label_value_length_limit
 * (UPSTREAM_LABEL_VALUE_LENGTH_LIMIT, in bytes). The read is abandoned there, as Prometheus fails
 * a scrape over its limits; not retried (the same text would break the same limit).
 */
export class UpstreamLimitError extends UpstreamError {
  constructor(
    /** Which limit: Prometheus's name for it. */
    readonly limit: UpstreamLimitName,
    /** The limit's value (samples, labels per sample, or bytes per label value). */
    readonly value: number,
    message: string,
  ) {
    super('ERR_UPSTREAM_LIMIT', 'prometheus', message, { reason: 'limit' });
  }
}

/** A database operation failed: the message says which and carries the PostgreSQL SQLSTATE where there is one; `cause` is pg's error. */
export class DatabaseError extends ExporterError {
  constructor(message: string, options: ExporterErrorOptions = {}) {
    super('ERR_DATABASE', message, { ...options, reason: 'database' });
  }
}

/**
 * The embedded database could not be opened: its folder (DATA_DIR) or a file in it could not be
 * created, opened or locked. The message names the folder and the errno code (`EROFS`, `EACCES`).
 */
export class DatabaseOpenError extends DatabaseError {}

/**
 * The two reads of an instant (a part of SYNC_MIN_SPLIT holding more than a page) kept
 * disagreeing (SYNC_WINDOW_ATTEMPTS): E6's order within it is not stable, so nothing of its window
 * is committed, and the window is parked (src/sync/run/park.ts).
 */
export class InconsistentWindowError extends ExporterError {
  constructor(message: string) {
    super('ERR_INCONSISTENT_WINDOW', message, { reason: 'inconsistent_window' });
  }
}

/** A web configuration file (WEB_CONFIG_FILE) that cannot be used; `path` names the key (`tls_server_config.cert_file`), or is empty for the whole file. */
export class WebConfigError extends ExporterError {
  constructor(
    readonly path: string,
    message: string,
  ) {
    super('ERR_WEB_CONFIG', message);
  }
}

/**
 * Another process holds the embedded database's folder (DATA_DIR): one process per embedded
 * database. The CLI exits 1 on it, naming the holder and the way out.
 */
export class DataDirLockedError extends ExporterError {
  constructor(
    readonly dataDir: string,
    /** What the lock file says of the process holding it; undefined when it says nothing readable. */
    readonly holder: { pid: number; command: string; since: string } | undefined,
  ) {
    const who = holder === undefined ? 'another process' : `process ${holder.pid} (${holder.command}), since ${holder.since},`;
    super(
      'ERR_DATA_DIR_LOCKED',
      `the embedded database in ${dataDir} is in use by ${who} and serves one process at a time: ` +
        'stop that process, or set DATABASE_URL to a PostgreSQL server to run several processes on one database',
    );
  }
}

/** The operation was cancelled through its AbortSignal (shutdown, scrape timeout). */
export class AbortedError extends ExporterError {
  constructor(message = 'operation aborted', options: ExporterErrorOptions = {}) {
    super('ERR_ABORTED', message, options);
  }
}

/** Turns anything thrown into an Error, so edges can log and count it uniformly. */
export function coerceError(value: unknown): Error {
  if (value instanceof Error) return value;
  if (typeof value === 'string') return new Error(value);
  try {
    return new Error(`non-error thrown: ${JSON.stringify(value)}`);
  } catch {
    return new Error(`non-error thrown: ${String(value)}`);
  }
}

/**
 * Masks a secret for display: keeps nothing of it but its length class, so a
 * message can say a value was given without leaking any character of it.
 */
export function maskSecret(value: string | undefined): string {
  if (value === undefined) return '(unset)';
  if (value.length === 0) return '(empty)';
  return '***';
}

/**
 * A URL as messages, logs and `check`'s output show it: scheme, host, port and path only. The user
 * info (`user:password@`), the query and the fragment are left out: each may hold a credential
 * (a STATISTICS_URL `https://user:password@host/` is sent as given, but never shown).
 *
 * @returns `https://statistics.example.com/api/`, whatever user info the URL carries.
 */
export function displayUrl(url: URL): string {
  return `${url.protocol}//${url.host}${url.pathname}`;
}

export { REDACTED, clearSecrets, redactSecrets, registerSecret, secretForms } from './redact.js';

/** One line per error in the `cause` chain: "message ← cause message ← …", for CLI output; secrets masked ({@link redactSecrets}). */
export function describeError(err: unknown): string {
  const parts: string[] = [];
  let current: unknown = err;
  for (let depth = 0; current !== undefined && current !== null && depth < 5; depth++) {
    const e = coerceError(current);
    const code = (e as { code?: unknown }).code;
    const text = e.message || e.name;
    parts.push(typeof code === 'string' && !text.includes(code) ? `${text} (${code})` : text);
    current = (e as { cause?: unknown }).cause;
  }
  return redactSecrets(parts.join(' ← '));
}

/** Longest error text {@link storableText} keeps, in UTF-16 code units (at most 12 KiB of UTF-8). */
export const MAX_STORED_TEXT_LENGTH = 4000;

/** A lone surrogate: a high one not followed by a low one, or a low one not preceded by a high one. */
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

/**
 * Error text as a PostgreSQL `text` column always takes it, for what the bookkeeping writes (the
 * ledger's `sync_runs.error`): such a write must never fail on the text and so mask the error it
 * records. An error's message can hold anything its cause quoted (JSON.parse quotes the bytes of a
 * gzip body, NUL included), and PostgreSQL refuses U+0000 and text that is not valid UTF-8.
 *
 * The messages it is given are built without secrets; a secret an upstream echoed into one is
 * masked here all the same ({@link redactSecrets}), before the text is cut.
 *
 * @param text any string.
 * @param maxLength the longest result, in UTF-16 code units; default {@link MAX_STORED_TEXT_LENGTH}.
 * @returns `text` with secrets masked, each U+0000 and each lone surrogate replaced by U+FFFD, and, when longer than
 *   `maxLength`, cut there (never inside a surrogate pair) with a marker saying how long it was;
 *   `text` itself when there is nothing to change. Never throws.
 */
export function storableText(text: string, maxLength = MAX_STORED_TEXT_LENGTH): string {
  const clean = redactSecrets(text).replaceAll('\u0000', '\ufffd').replace(LONE_SURROGATE, '\ufffd');
  if (clean.length <= maxLength) return clean;
  const marker = `… [cut, ${clean.length} characters in all]`;
  let cut = Math.max(0, maxLength - marker.length);
  if (cut > 0 && /[\ud800-\udbff]/.test(clean[cut - 1]!)) cut--;
  // The marker is ASCII but for the ellipsis: cutting it to a tiny maxLength splits no pair.
  return `${clean.slice(0, cut)}${marker}`.slice(0, maxLength);
}
