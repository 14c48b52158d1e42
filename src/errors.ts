/**
 * Typed errors: one class per failure. Each carries its stable `code` (safe to match on, to log and
 * to alert on) and, where the failure came from somewhere else, a `cause`; what a failure means
 * outside the code that threw it (metric reason, exit status, log level) is one table keyed by
 * class, FAILURES in src/failures.ts. Callers tell failures apart with `instanceof`, never by code.
 *
 * Messages never carry secrets: callers build them from names, statuses and masked values only
 * (see {@link maskSecret}); {@link redactSecrets} (src/redact.ts) masks what an upstream echoed into one.
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
 * What a body broke, chosen by the thrower of an {@link UpstreamBodyError}: `invalid_json` (cut
 * short or not JSON), `content_type`, `invalid_envelope` (JSON of the wrong shape),
 * `inconsistent_page` (a page contradicting itself), `content_encoding` (a coding the client does
 * not decode, or bytes not valid in it), `invalid_body` (anything else).
 */
export type BodyReason = 'invalid_json' | 'content_type' | 'invalid_envelope' | 'inconsistent_page' | 'content_encoding' | 'invalid_body';

/**
 * Why a request or a run failed: the `reason` label of every metric counting failures, and a log
 * field. Which failure has which is the table FAILURES of src/failures.ts; `secret_file` is counted
 * by the token client itself (a token request not sent: CLIENT_SECRET_FILE unreadable or empty).
 */
export type FailureReason =
  | 'network'
  | 'timeout'
  | `http_${number}`
  | BodyReason
  | 'response_too_large'
  | 'limit'
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
}

/** The base of every error this project throws on purpose; never thrown as it is. */
export abstract class ExporterError extends Error {
  abstract readonly code: ErrorCode;
  readonly status: number | undefined;
  readonly retryable: boolean;
  readonly retryAfterMs: number | undefined;

  constructor(message: string, options: ExporterErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.status = options.status;
    this.retryable = options.retryable ?? false;
    this.retryAfterMs = options.retryAfterMs;
  }
}

/** A configuration value broke its rule. The CLI exits 2 on it. */
export class ConfigError extends ExporterError {
  readonly code = 'ERR_CONFIG';

  constructor(
    /** The environment variable (or `--flag`) that was wrong. */
    readonly variable: string,
    message: string,
    options: ExporterErrorOptions = {},
  ) {
    super(message, options);
  }
}

/** A caller passed an argument that breaks the reference's rules (E6 query parameters). */
export class InvalidArgumentError extends ExporterError {
  readonly code = 'ERR_INVALID_ARGUMENT';

  constructor(message: string) {
    super(message);
  }
}

/** A web configuration file (WEB_CONFIG_FILE) that cannot be used; `path` names the key (`tls_server_config.cert_file`), or is empty for the whole file. */
export class WebConfigError extends ExporterError {
  readonly code = 'ERR_WEB_CONFIG';

  constructor(
    readonly path: string,
    message: string,
  ) {
    super(message);
  }
}

/** Which upstream endpoint of the reference an error belongs to. */
export type Endpoint = 'token' | 'analytics' | 'prometheus';

/** A request to the platform (E0, E6, E7) failed; the subclass says how. */
export abstract class UpstreamError extends ExporterError {
  constructor(
    readonly endpoint: Endpoint,
    message: string,
    options: ExporterErrorOptions = {},
  ) {
    super(message, options);
  }
}

/** The upstream answered a status other than 2xx; retryable for 429, 500, 502–504. */
export class UpstreamHttpError extends UpstreamError {
  readonly code = 'ERR_UPSTREAM_HTTP';
  declare readonly status: number;

  constructor(endpoint: Endpoint, status: number, message: string, options: Omit<ExporterErrorOptions, 'status'> = {}) {
    super(endpoint, message, { ...options, status });
  }
}

/** No answer: a socket, DNS or TLS failure, or a connection closed in the middle of the body. */
export class UpstreamNetworkError extends UpstreamError {
  readonly code = 'ERR_UPSTREAM_NETWORK';
}

/** No answer in time: UPSTREAM_TIMEOUT for a connect, the headers or the body, or serve's scrape budget. */
export class UpstreamTimeoutError extends UpstreamError {
  readonly code = 'ERR_UPSTREAM_TIMEOUT';
}

/**
 * A body that breaks the documented shape. Its {@link BodyReason} is the thrower's: the six share
 * a code, a retry rule and every catch site, so they are one class with a field, not six.
 */
export class UpstreamBodyError extends UpstreamError {
  readonly code = 'ERR_UPSTREAM_BODY';

  constructor(
    endpoint: Endpoint,
    readonly reason: BodyReason,
    message: string,
    options: ExporterErrorOptions = {},
  ) {
    super(endpoint, message, options);
  }
}

/**
 * A body over UPSTREAM_MAX_BODY, as received or once decoded, or an E6 instant over it even at one
 * record a page (src/sync/read/oversize.ts). Not retried: the same answer would be as large.
 */
export class ResponseTooLargeError extends UpstreamError {
  readonly code = 'ERR_UPSTREAM_BODY';
}

/** The limits an E7 text is read under, by the names Prometheus's scrape configuration gives them. */
export type UpstreamLimitName = 'sample_limit' | 'label_limit' | 'label_value_length_limit';

/**
 * An E7 text went over one of its source's limits while it was read: sample_limit
 * (UPSTREAM_SAMPLE_LIMIT), label_limit (UPSTREAM_LABEL_LIMIT) or label_value_length_limit
 * (UPSTREAM_LABEL_VALUE_LENGTH_LIMIT, in bytes). The read is abandoned there, as Prometheus fails
 * a scrape over its limits; not retried (the same text would break the same limit).
 */
export class UpstreamLimitError extends UpstreamError {
  readonly code = 'ERR_UPSTREAM_LIMIT';

  constructor(
    /** Which limit: Prometheus's name for it. */
    readonly limit: UpstreamLimitName,
    /** The limit's value (samples, labels per sample, or bytes per label value). */
    readonly value: number,
    message: string,
  ) {
    super('prometheus', message);
  }
}

/** No token could be had (E0), its retries spent: what the token client throws. */
export abstract class TokenError extends UpstreamError {
  constructor(message: string, options: ExporterErrorOptions = {}) {
    super('token', message, options);
  }
}

/**
 * The token request failed: refused (a status, 401 for a wrong client id or secret), not answered
 * (network, timeout), or not sent (CLIENT_SECRET_FILE unreadable or empty).
 */
export class TokenRequestError extends TokenError {
  readonly code = 'ERR_TOKEN_REQUEST';
}

/** The identity host answered 2xx with a body that is not a Bearer token. */
export class TokenResponseError extends TokenError {
  readonly code = 'ERR_TOKEN_RESPONSE';
}

/** The identity host's answer could not be read: over UPSTREAM_MAX_BODY, or in a coding the client does not decode. */
export class TokenBodyError extends TokenError {
  readonly code = 'ERR_UPSTREAM_BODY';
}

/** A database operation failed: the message says which and carries the PostgreSQL SQLSTATE where there is one; `cause` is pg's error. */
export class DatabaseError extends ExporterError {
  readonly code = 'ERR_DATABASE';
}

/**
 * The embedded database could not be opened: its folder (DATA_DIR) or a file in it could not be
 * created, opened or locked. The message names the folder and the errno code (`EROFS`, `EACCES`).
 */
export class DatabaseOpenError extends DatabaseError {}

/**
 * Another process holds the embedded database's folder (DATA_DIR): one process per embedded
 * database. The CLI exits 1 on it, naming the holder and the way out.
 */
export class DataDirLockedError extends ExporterError {
  readonly code = 'ERR_DATA_DIR_LOCKED';

  constructor(
    readonly dataDir: string,
    /** What the lock file says of the process holding it; undefined when it says nothing readable. */
    readonly holder: { pid: number; command: string; since: string } | undefined,
  ) {
    const who = holder === undefined ? 'another process' : `process ${holder.pid} (${holder.command}), since ${holder.since},`;
    super(
      `the embedded database in ${dataDir} is in use by ${who} and serves one process at a time: ` +
        'stop that process, or set DATABASE_URL to a PostgreSQL server to run several processes on one database',
    );
  }
}

/**
 * The two reads of an instant (a slice of SYNC_MIN_SPLIT holding more than a page) kept
 * disagreeing (SYNC_WINDOW_ATTEMPTS): E6's order within it is not stable, so nothing of its window
 * is committed, and the window is parked (src/sync/run/park.ts).
 */
export class InconsistentWindowError extends ExporterError {
  readonly code = 'ERR_INCONSISTENT_WINDOW';

  constructor(message: string) {
    super(message);
  }
}

/** The operation was cancelled through its AbortSignal (shutdown, scrape timeout). */
export class AbortedError extends ExporterError {
  readonly code = 'ERR_ABORTED';

  constructor(message = 'operation aborted', options: ExporterErrorOptions = {}) {
    super(message, options);
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

export { redactSecrets, registerSecret } from './redact.js';

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
