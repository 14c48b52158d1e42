/**
 * What a failure means outside the code that threw it: the reason metrics count it under
 * (`sync_errors_total{reason}`, `upstream_errors_total{reason}`, `upstream_attempt_failures_total{reason}`),
 * the exit status a command ends with, and the level it is logged at where it ends a command.
 * One table, {@link FAILURES}, holds the three for every error class of errors.ts and for the
 * errors thrown at us by pg and Node; metrics, health and the commands all read it.
 *
 * A lost database connection is one failure wherever it surfaces: pg's own error (`ECONNREFUSED`,
 * "Connection terminated unexpectedly", SQLSTATE 57P01 when the server shuts down), or an error
 * whose cause is one, is `database_unavailable`, counted as `database`, before a run could record
 * anything or after.
 */
import {
  AbortedError,
  ConfigError,
  DataDirLockedError,
  DatabaseError,
  DatabaseOpenError,
  ExporterError,
  InconsistentWindowError,
  InvalidArgumentError,
  TokenError,
  UpstreamError,
  UpstreamLimitError,
  WebConfigError,
  type FailureReason,
} from './errors.js';

/** Exit statuses shared by every command (documented in `--help` and docs/commands.md). */
export const EXIT_OK = 0;
/** The run failed: upstream, database, or a check that did not pass. */
export const EXIT_FAILURE = 1;
/** Bad usage or configuration: a flag or variable broke its rule. */
export const EXIT_USAGE = 2;
export type ExitStatus = typeof EXIT_OK | typeof EXIT_FAILURE | typeof EXIT_USAGE;

/** The kinds of failure {@link FAILURES} tells apart: one per error class, plus pg's and Node's errors. */
export type FailureKind =
  | 'config'
  | 'invalid_argument'
  | 'web_config'
  | 'token'
  | 'upstream_limit'
  | 'upstream'
  | 'inconsistent_window'
  | 'aborted'
  | 'data_dir_locked'
  | 'database_unavailable'
  | 'database_open'
  | 'database'
  | 'exporter'
  | 'other';

/** One row of {@link FAILURES}. */
export interface FailureRow {
  /** The class whose instances are this kind; undefined for errors we did not make, told by their code or message. */
  readonly class: (abstract new (...args: never[]) => Error) | undefined;
  /**
   * The metric label; `code` derives it from the error's `code` and `status` (`network`, `timeout`,
   * `http_503`, `invalid_body`, …, `other` for a code that is not ours). An {@link ExporterError}'s
   * own `reason` (set by the thrower, who knew the fault better) comes before either.
   */
  readonly reason: FailureReason | 'code';
  readonly exitStatus: ExitStatus;
  /** The level the failure is logged at where it ends what was asked: `warn` for what was asked to stop or is survived. */
  readonly level: 'error' | 'warn';
}

/**
 * Every kind of failure with its reason, exit status and level. A class's row comes before its
 * base class's, in the order {@link classifyFailure} tries them.
 */
export const FAILURES: Readonly<Record<FailureKind, FailureRow>> = {
  /** A setting broke its rule (at start: the process never ran). */
  config: { class: ConfigError, reason: 'other', exitStatus: EXIT_USAGE, level: 'error' },
  /** An argument broke a rule: a flag (--source, --from), an E6 query parameter. */
  invalid_argument: { class: InvalidArgumentError, reason: 'other', exitStatus: EXIT_USAGE, level: 'error' },
  /** WEB_CONFIG_FILE cannot be used: at start it becomes a ConfigError; on a reload serve keeps the previous configuration. */
  web_config: { class: WebConfigError, reason: 'other', exitStatus: EXIT_USAGE, level: 'warn' },
  /**
   * A token request (E0) failed: `token` once its retries are spent (ERR_TOKEN_REQUEST,
   * ERR_TOKEN_RESPONSE), for whatever needed the token; one attempt's transport fault by its code
   * (`network`, `timeout`), as the token client counts its attempts.
   */
  token: { class: TokenError, reason: 'code', exitStatus: EXIT_FAILURE, level: 'error' },
  /** An E7 text over one of its source's limits (sample_limit, label_limit, label_value_length_limit): serve survives it, the source's read fails. */
  upstream_limit: { class: UpstreamLimitError, reason: 'limit', exitStatus: EXIT_FAILURE, level: 'warn' },
  /** An E6 or E7 request failed after its retries: network, timeout, a status, a body. */
  upstream: { class: UpstreamError, reason: 'code', exitStatus: EXIT_FAILURE, level: 'error' },
  /** The two reads of an instant kept disagreeing (SYNC_WINDOW_ATTEMPTS). */
  inconsistent_window: { class: InconsistentWindowError, reason: 'inconsistent_window', exitStatus: EXIT_FAILURE, level: 'error' },
  /**
   * Cancelled through its AbortSignal (shutdown, scrape timeout): asked for, so a warning, but what
   * was asked did not finish. A command that stopped on a signal it received says so and exits 0 (sync).
   */
  aborted: { class: AbortedError, reason: 'aborted', exitStatus: EXIT_FAILURE, level: 'warn' },
  /** The embedded database is held by another process: this one has no database. */
  data_dir_locked: { class: DataDirLockedError, reason: 'database', exitStatus: EXIT_FAILURE, level: 'error' },
  /**
   * The database is unreachable or the connection to it was lost: refused or timed-out connects,
   * a server shutting down or restarting (SQLSTATE 57P01–57P03), a connection exception (class
   * 08), a connection pg saw break; pg's error itself or one in the `cause` chain of a
   * DatabaseError or an error of no class of ours.
   */
  database_unavailable: { class: undefined, reason: 'database', exitStatus: EXIT_FAILURE, level: 'error' },
  /** The embedded database's folder (DATA_DIR) or a file in it could not be created, opened or locked. */
  database_open: { class: DatabaseOpenError, reason: 'database', exitStatus: EXIT_FAILURE, level: 'error' },
  /** A database operation failed (a query error: syntax, constraint, lock timeout), ours or pg's raw error with its SQLSTATE. */
  database: { class: DatabaseError, reason: 'database', exitStatus: EXIT_FAILURE, level: 'error' },
  /** Any other error of ours, by its code. */
  exporter: { class: ExporterError, reason: 'code', exitStatus: EXIT_FAILURE, level: 'error' },
  /** Anything else: a bug, an error of a library; `other` unless it carries one of our codes. */
  other: { class: undefined, reason: 'code', exitStatus: EXIT_FAILURE, level: 'error' },
};

/** What {@link classifyFailure} says of an error: its kind and that kind's row, with the reason resolved. */
export interface Failure {
  kind: FailureKind;
  reason: FailureReason;
  exitStatus: ExitStatus;
  level: 'error' | 'warn';
}

/**
 * The kind of anything thrown and what it means (see {@link FAILURES}). A class is never matched
 * by its name, only by `instanceof`; pg's and Node's errors by their `code` and message.
 *
 * @returns never throws; `other` for a value that is not an error at all.
 */
export function classifyFailure(err: unknown): Failure {
  const kind = kindOf(err);
  const row = FAILURES[kind];
  const own = err instanceof ExporterError ? err.reason : undefined;
  return { kind, reason: own ?? (row.reason === 'code' ? reasonOfCode(err) : row.reason), exitStatus: row.exitStatus, level: row.level };
}

/**
 * The {@link FailureReason} of anything thrown (see {@link classifyFailure}): the one label of a
 * failure in every metric that counts failures by reason. A failed token request (E0) counts as
 * `token` for whatever needed the token; the token request's own attempts are classified by its
 * client.
 */
export function failureReason(err: unknown): FailureReason {
  return classifyFailure(err).reason;
}

/**
 * Whether `err` says the database is unreachable or the connection to it was lost (the
 * `database_unavailable` row of {@link FAILURES}). Query errors (syntax, constraint, lock
 * timeout) are not, and neither is an upstream failure (E0, E6, E7): an error of ours other than
 * {@link DatabaseError} ends the walk of the `cause` chain, because its socket cause (ECONNREFUSED
 * from a platform host that is down) says nothing about the database.
 */
export function isDatabaseUnavailable(err: unknown): boolean {
  return kindOf(err) === 'database_unavailable';
}

function kindOf(err: unknown): FailureKind {
  // Every class of ours but DatabaseError says what failed whatever its cause.
  if (err instanceof ExporterError && !(err instanceof DatabaseError)) {
    if (err instanceof ConfigError) return 'config';
    if (err instanceof InvalidArgumentError) return 'invalid_argument';
    if (err instanceof WebConfigError) return 'web_config';
    if (err instanceof TokenError) return 'token';
    if (err instanceof UpstreamLimitError) return 'upstream_limit';
    if (err instanceof UpstreamError) return 'upstream';
    if (err instanceof InconsistentWindowError) return 'inconsistent_window';
    if (err instanceof AbortedError) return 'aborted';
    if (err instanceof DataDirLockedError) return 'data_dir_locked';
    return 'exporter';
  }
  if (lostConnection(err)) return 'database_unavailable';
  if (err instanceof DatabaseOpenError) return 'database_open';
  if (err instanceof DatabaseError) return 'database';
  const code = (err as { code?: unknown } | null | undefined)?.code;
  return typeof code === 'string' && SQLSTATE.test(code) ? 'database' : 'other';
}

/** SQLSTATE codes are five characters of digits and capital letters (PostgreSQL errors carry them as `code`). */
const SQLSTATE = /^[0-9A-Z]{5}$/;
/** Socket errors meaning the server cannot be reached or the connection to it broke. */
const UNREACHABLE_NETWORK_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ENOTFOUND', 'EAI_AGAIN', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'EPIPE']);
/** SQLSTATEs of a server shutting down, restarting or starting up: admin_shutdown, crash_shutdown, cannot_connect_now. */
const UNAVAILABLE_SQLSTATES = new Set(['57P01', '57P02', '57P03']);
/** pg's own messages for a connection that broke or never opened (they carry no code). */
const CONNECTION_LOST_MESSAGE = /Connection terminated|connection timeout|timeout exceeded when trying to connect|not queryable|Client was closed/i;

/** A lost or refused connection in `err` or its `cause` chain, up to the first error of ours that is not a DatabaseError. */
function lostConnection(err: unknown): boolean {
  let current: unknown = err;
  for (let depth = 0; current !== undefined && current !== null && depth < 5; depth++) {
    if (current instanceof ExporterError && !(current instanceof DatabaseError)) return false;
    const e = current as { code?: unknown; message?: unknown; cause?: unknown };
    const code = typeof e.code === 'string' ? e.code : '';
    if (UNREACHABLE_NETWORK_CODES.has(code) || UNAVAILABLE_SQLSTATES.has(code) || /^08[0-9A-Z]{3}$/.test(code)) return true;
    if (typeof e.message === 'string' && CONNECTION_LOST_MESSAGE.test(e.message)) return true;
    current = e.cause;
  }
  return false;
}

/** The reason our {@link ErrorCode}s name, for an error whose class does not fix one. */
function reasonOfCode(err: unknown): FailureReason {
  const e = err as { code?: unknown; status?: unknown } | null | undefined;
  if (e === null || e === undefined || typeof e !== 'object') return 'other';
  switch (e.code) {
    case 'ERR_TOKEN_REQUEST':
    case 'ERR_TOKEN_RESPONSE':
      return 'token';
    case 'ERR_UPSTREAM_TIMEOUT':
      return 'timeout';
    case 'ERR_UPSTREAM_NETWORK':
      return 'network';
    case 'ERR_UPSTREAM_HTTP':
      return typeof e.status === 'number' ? `http_${e.status}` : 'other';
    case 'ERR_UPSTREAM_BODY':
      return 'invalid_body';
    case 'ERR_UPSTREAM_LIMIT':
      return 'limit';
    case 'ERR_ABORTED':
      return 'aborted';
    case 'ERR_DATABASE':
      return 'database';
    case 'ERR_INCONSISTENT_WINDOW':
      return 'inconsistent_window';
    default:
      return 'other';
  }
}
