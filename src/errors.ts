/**
 * Typed errors. Every error this project throws on purpose is an {@link ExporterError}
 * with a stable `code` (safe to match on, to log and to use as a metric label) and,
 * where the failure came from somewhere else, a `cause`.
 *
 * Messages never carry secrets: callers build them from names, statuses and
 * masked values only (see {@link maskSecret}).
 */

/** Stable error codes. Adding one is fine; renaming one breaks alert rules and log queries. */
export type ErrorCode =
  | 'ERR_CONFIG'
  | 'ERR_TOKEN_REQUEST'
  | 'ERR_TOKEN_RESPONSE'
  | 'ERR_UPSTREAM_HTTP'
  | 'ERR_UPSTREAM_NETWORK'
  | 'ERR_UPSTREAM_TIMEOUT'
  | 'ERR_UPSTREAM_BODY'
  | 'ERR_INVALID_ARGUMENT'
  | 'ERR_DATABASE'
  | 'ERR_ABORTED';

export interface ExporterErrorOptions {
  cause?: unknown;
  /** HTTP status of the response that caused the error, when there was one. */
  status?: number;
  /** Whether trying the same request again may succeed (network faults, 429, 502–504, bad bodies). */
  retryable?: boolean;
  /** The server's Retry-After, in milliseconds from now, when it sent one. */
  retryAfterMs?: number;
}

export class ExporterError extends Error {
  readonly code: ErrorCode;
  readonly status: number | undefined;
  readonly retryable: boolean;
  readonly retryAfterMs: number | undefined;

  constructor(code: ErrorCode, message: string, options: ExporterErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.code = code;
    this.status = options.status;
    this.retryable = options.retryable ?? false;
    this.retryAfterMs = options.retryAfterMs;
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

/** One line per error in the `cause` chain: "message ← cause message ← …", for CLI output. */
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
  return parts.join(' ← ');
}
