/**
 * Typed errors, one class per failure, each with a stable `code` and, where it came from elsewhere,
 * a `cause`; what a failure means outside its thrower is the table of src/failures.ts. Callers use
 * `instanceof`, never the code. Messages never carry secrets. See docs/design/failures.md.
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
  | 'ERR_PAGES_REPEAT'
  | 'ERR_WEB_CONFIG'
  | 'ERR_ABORTED'
  | 'ERR_PAGING_LIMIT'
  | 'ERR_WINDOW_BUDGET';

/** What a body broke, chosen by the thrower of an {@link UpstreamBodyError}. */
export type BodyReason = 'invalid_json' | 'content_type' | 'invalid_envelope' | 'inconsistent_page' | 'content_encoding' | 'invalid_body';

/** The `reason` label of every metric counting failures (docs/metrics.md), and a log field. */
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
  | 'pages_repeat'
  | 'paging_limit'
  | 'window_budget'
  | 'database'
  | 'aborted'
  | 'other';

export interface ExporterErrorOptions {
  cause?: unknown;
  /** Of the response that caused the error. */
  status?: number;
  /** Whether the same request again may succeed. */
  retryable?: boolean;
  /** The server's Retry-After, from now. */
  retryAfterMs?: number;
}

/** The base of every error thrown on purpose; never thrown itself. */
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
    /** Or `--flag`. */
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

/** WEB_CONFIG_FILE cannot be used; `path` names the key, empty for the whole file. */
export class WebConfigError extends ExporterError {
  readonly code = 'ERR_WEB_CONFIG';

  constructor(
    readonly path: string,
    message: string,
  ) {
    super(message);
  }
}

/** token: E0, analytics: E6, prometheus: E7. */
export type Endpoint = 'token' | 'analytics' | 'prometheus';

/** A request to the platform failed; the subclass says how. */
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

/** No answer: socket, DNS, TLS, or a connection closed mid-body. */
export class UpstreamNetworkError extends UpstreamError {
  readonly code = 'ERR_UPSTREAM_NETWORK';
}

/** No answer in time: UPSTREAM_TIMEOUT for a connect, the headers or the body, or serve's scrape budget. */
export class UpstreamTimeoutError extends UpstreamError {
  readonly code = 'ERR_UPSTREAM_TIMEOUT';
}

/** A body that breaks the documented shape; one class with a {@link BodyReason}, not six. */
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

/** A body over UPSTREAM_MAX_BODY (received or decoded), or an E6 instant over it at one record a page. Not retried. */
export class ResponseTooLargeError extends UpstreamError {
  readonly code = 'ERR_UPSTREAM_BODY';
}

/** Prometheus's names of the scrape limits. */
export type UpstreamLimitName = 'sample_limit' | 'label_limit' | 'label_value_length_limit';

/** An E7 text went over one of its source's limits while read: the read is abandoned there, as Prometheus would. Not retried. */
export class UpstreamLimitError extends UpstreamError {
  readonly code = 'ERR_UPSTREAM_LIMIT';

  constructor(
    readonly limit: UpstreamLimitName,
    /** Samples, labels per sample, or bytes per label value. */
    readonly value: number,
    message: string,
  ) {
    super('prometheus', message);
  }
}

/** No token could be had (E0), its retries spent. */
export abstract class TokenError extends UpstreamError {
  constructor(message: string, options: ExporterErrorOptions = {}) {
    super('token', message, options);
  }
}

/** The token request was refused, not answered, or not sent (CLIENT_SECRET_FILE unreadable or empty). */
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

/** A database operation failed: the message says which, with the SQLSTATE; `cause` is pg's error. */
export class DatabaseError extends ExporterError {
  readonly code = 'ERR_DATABASE';
}

/**
 * PostgreSQL ended the session, or canceled its statement (57014), for a reason of its own: a
 * timeout setting (`setting`), an administrator, a shutdown. The server is not unreachable.
 */
export class SessionEndedError extends DatabaseError {
  constructor(
    /** The SQLSTATE the server sent (25P03). */
    readonly sqlstate: string,
    /** Its condition name (idle_in_transaction_session_timeout, admin_shutdown). */
    readonly condition: string,
    /** The server setting that ended it; undefined when none did. */
    readonly setting: string | undefined,
    message: string,
    options: ExporterErrorOptions = {},
  ) {
    super(message, options);
  }
}

/** DATA_DIR or a file in it could not be created, opened or locked; the message names the errno code. */
export class DatabaseOpenError extends DatabaseError {}

/** DATABASE_SCHEMA lacks shipped migrations a command needs (MIGRATE=off, or a command that only reads). */
export class PendingMigrationsError extends DatabaseError {
  constructor(
    readonly schema: string,
    readonly pending: readonly string[],
  ) {
    super(
      `schema ${schema} has ${pending.length} pending migration${pending.length === 1 ? '' : 's'} (${pending.join(', ')}): ` +
        "apply them with 'analytics-exporter migrate' as the schema's owner (docs/deploy.md, Database roles)",
    );
  }
}

/** The database refuses writes: default_transaction_read_only, or a hot standby; the message ends in `[25006]`. */
export class ReadOnlyDatabaseError extends DatabaseError {}

/** DATABASE_URL's server connections are shared between clients (transaction or statement pooling): the locks would guard nothing. */
export class SharedServersError extends DatabaseError {}

/** Another process holds DATA_DIR: one process per embedded database. */
export class DataDirLockedError extends ExporterError {
  readonly code = 'ERR_DATA_DIR_LOCKED';

  constructor(
    readonly dataDir: string,
    /** What the lock file says; undefined when nothing readable. */
    readonly holder: { pid: number; command: string; since: string } | undefined,
  ) {
    const who = holder === undefined ? 'another process' : `process ${holder.pid} (${holder.command}), since ${holder.since},`;
    super(
      `the embedded database in ${dataDir} is in use by ${who} and serves one process at a time: ` +
        'stop that process, or set DATABASE_URL to a PostgreSQL server to run several processes on one database',
    );
  }
}

/** The two reads of an instant kept disagreeing (SYNC_WINDOW_ATTEMPTS): its window is parked, nothing committed. */
export class InconsistentWindowError extends ExporterError {
  readonly code: 'ERR_INCONSISTENT_WINDOW' | 'ERR_PAGES_REPEAT' = 'ERR_INCONSISTENT_WINDOW';

  constructor(message: string) {
    super(message);
  }
}

/** E6's pages of an instant copy earlier pages at two page sizes: `pageNumber` is not honoured. */
export class RepeatedPagesError extends InconsistentWindowError {
  override readonly code = 'ERR_PAGES_REPEAT';
}

/** E6 refuses (HTTP 4xx) or answers empty a page past an offset of an instant no finer split divides: its window is parked. */
export class PagingLimitError extends ExporterError {
  readonly code = 'ERR_PAGING_LIMIT';

  constructor(message: string, options: { cause?: unknown } = {}) {
    super(message, options);
  }
}

/** A window spent SYNC_WINDOW_MAX_REQUESTS E6 requests in one run without being read: it is parked. */
export class WindowBudgetError extends ExporterError {
  readonly code = 'ERR_WINDOW_BUDGET';

  constructor(message: string) {
    super(message);
  }
}

/** Cancelled through its AbortSignal. */
export class AbortedError extends ExporterError {
  readonly code = 'ERR_ABORTED';

  constructor(message = 'operation aborted', options: ExporterErrorOptions = {}) {
    super(message, options);
  }
}

/** Anything thrown as an Error. */
export function coerceError(value: unknown): Error {
  if (value instanceof Error) return value;
  if (typeof value === 'string') return new Error(value);
  try {
    return new Error(`non-error thrown: ${JSON.stringify(value)}`);
  } catch {
    return new Error(`non-error thrown: ${String(value)}`);
  }
}

/** A secret for display: whether it is unset, empty or given, nothing of its characters. */
export function maskSecret(value: string | undefined): string {
  if (value === undefined) return '(unset)';
  if (value.length === 0) return '(empty)';
  return '***';
}

/** A URL as output shows it: scheme, host, port, path; user info, query and fragment may hold credentials. */
export function displayUrl(url: URL): string {
  return `${url.protocol}//${url.host}${url.pathname}`;
}

export { redactSecrets, registerSecret } from './redact.js';

/** The `cause` chain on one line, "message ← cause message ← …", secrets masked. */
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

/** In UTF-16 code units (at most 12 KiB of UTF-8). */
export const MAX_STORED_TEXT_LENGTH = 4000;

const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

/**
 * Error text a PostgreSQL `text` column always takes (`sync_runs.error`), so recording an error
 * never fails on it: secrets masked, U+0000 and lone surrogates as U+FFFD, cut at `maxLength`
 * (UTF-16 code units, never inside a pair) with a marker saying how long it was. Never throws.
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
