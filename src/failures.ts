/**
 * What a failure means outside the code that threw it: its metric reason, the exit status of the
 * command it ends, and its log level, in one table ({@link FAILURES}) keyed by the classes of
 * errors.ts. Errors we did not make are `database` when they are the database's, else `other`. See
 * docs/design/failures.md.
 */
import {
  AbortedError,
  ConfigError,
  DataDirLockedError,
  DatabaseError,
  DatabaseOpenError,
  PendingMigrationsError,
  ReadOnlyDatabaseError,
  ExporterError,
  InconsistentWindowError,
  InvalidArgumentError,
  RepeatedPagesError,
  PagingLimitError,
  ResponseTooLargeError,
  SessionEndedError,
  TokenBodyError,
  TokenRequestError,
  TokenResponseError,
  UpstreamBodyError,
  UpstreamHttpError,
  UpstreamLimitError,
  UpstreamNetworkError,
  UpstreamTimeoutError,
  WebConfigError,
  WindowBudgetError,
  type FailureReason,
} from './errors.js';

/** Exit statuses of every command (docs/commands.md). */
export const EXIT_OK = 0;
/** The run failed: upstream, database, or a check that did not pass. */
export const EXIT_FAILURE = 1;
/** Bad usage or configuration: a flag or variable broke its rule. */
export const EXIT_USAGE = 2;
export type ExitStatus = typeof EXIT_OK | typeof EXIT_FAILURE | typeof EXIT_USAGE;

/** What {@link classifyFailure} says of an error. */
export interface Failure {
  reason: FailureReason;
  exitStatus: ExitStatus;
  /** Where it ends what was asked: `warn` for what was asked to stop or is survived. */
  level: 'error' | 'warn';
  /**
   * A fault of one sync window's own (its data, its size, E6's answers for it), concluded after the
   * reader's attempts: the window is parked and the run goes on. Never an outage (network, token,
   * database), which fails the run and leaves the window for the next.
   */
  windowLocal: boolean;
}

type ErrorClass<E extends ExporterError> = abstract new (...args: never[]) => E;

/** One row; `reason` and `windowLocal` may read the error, where the thrower chose it. */
function row<E extends ExporterError>(
  cls: ErrorClass<E>,
  reason: FailureReason | ((err: E) => FailureReason),
  exitStatus: ExitStatus,
  level: Failure['level'] = 'error',
  windowLocal: boolean | ((err: E) => boolean) = false,
): [ErrorClass<ExporterError>, (err: ExporterError) => Failure] {
  return [
    cls,
    (err) => ({
      reason: typeof reason === 'function' ? reason(err as E) : reason,
      exitStatus,
      level,
      windowLocal: typeof windowLocal === 'function' ? windowLocal(err as E) : windowLocal,
    }),
  ];
}

/** Every failure of ours by class. */
const FAILURES: ReadonlyMap<ErrorClass<ExporterError>, (err: ExporterError) => Failure> = new Map([
  row(ConfigError, 'other', EXIT_USAGE),
  row(InvalidArgumentError, 'other', EXIT_USAGE),
  // At start it becomes a ConfigError; on a reload serve keeps the previous configuration.
  row(WebConfigError, 'other', EXIT_USAGE, 'warn'),
  row(TokenRequestError, 'token', EXIT_FAILURE),
  row(TokenResponseError, 'token', EXIT_FAILURE),
  row(TokenBodyError, 'invalid_body', EXIT_FAILURE),
  row(UpstreamHttpError, (err) => `http_${err.status}`, EXIT_FAILURE),
  row(UpstreamNetworkError, 'network', EXIT_FAILURE),
  row(UpstreamTimeoutError, 'timeout', EXIT_FAILURE),
  row(UpstreamBodyError, (err) => err.reason, EXIT_FAILURE),
  // An E6 answer over the cap even at one record a page (oversize.ts) is its window's; a body of one response is retried by the client.
  row(ResponseTooLargeError, 'response_too_large', EXIT_FAILURE, 'error', (err) => err.endpoint === 'analytics'),
  // Serve survives it (the source reads 0); the source's read fails.
  row(UpstreamLimitError, 'limit', EXIT_FAILURE, 'warn'),
  row(InconsistentWindowError, 'inconsistent_window', EXIT_FAILURE, 'error', true),
  row(RepeatedPagesError, 'pages_repeat', EXIT_FAILURE, 'error', true),
  row(PagingLimitError, 'paging_limit', EXIT_FAILURE, 'error', true),
  row(WindowBudgetError, 'window_budget', EXIT_FAILURE, 'error', true),
  // Asked for, so a warning, but what was asked did not finish (sync stopped by its signal exits 0 itself).
  row(AbortedError, 'aborted', EXIT_FAILURE, 'warn'),
  row(DataDirLockedError, 'database', EXIT_FAILURE),
  row(DatabaseError, 'database', EXIT_FAILURE),
  row(DatabaseOpenError, 'database', EXIT_FAILURE),
  row(PendingMigrationsError, 'database', EXIT_FAILURE),
  row(ReadOnlyDatabaseError, 'database', EXIT_FAILURE),
  // Not unavailable (isDatabaseUnavailable) unless a shutdown ended it: a setting did, or an administrator.
  row(SessionEndedError, 'database', EXIT_FAILURE),
]);

/** The row of the nearest class with one; for an error we did not make, `database` or `other`, 1, `error`. Never throws. */
export function classifyFailure(err: unknown): Failure {
  if (err instanceof ExporterError) {
    for (let cls: unknown = err.constructor; cls !== ExporterError && typeof cls === 'function'; cls = Object.getPrototypeOf(cls)) {
      const failure = FAILURES.get(cls as ErrorClass<ExporterError>);
      if (failure !== undefined) return failure(err);
    }
  }
  return { reason: isDatabaseFault(err) ? 'database' : 'other', exitStatus: EXIT_FAILURE, level: 'error', windowLocal: false };
}

/** The {@link FailureReason} of anything thrown. */
export function failureReason(err: unknown): FailureReason {
  return classifyFailure(err).reason;
}

/**
 * Whether `err`, or its `cause` chain, says the database is unreachable or the connection lost; a
 * query error is not. An error of ours other than {@link DatabaseError} ends the walk: its socket
 * cause is a platform host's.
 */
export function isDatabaseUnavailable(err: unknown): boolean {
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

/** PostgreSQL errors carry them as `code`. */
const SQLSTATE = /^[0-9A-Z]{5}$/;
const UNREACHABLE_NETWORK_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ENOTFOUND', 'EAI_AGAIN', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'EPIPE']);
/** SQLSTATEs of a server shutting down, restarting or starting up: admin_shutdown, crash_shutdown, cannot_connect_now. */
const UNAVAILABLE_SQLSTATES = new Set(['57P01', '57P02', '57P03']);
/** pg's own messages for a connection that broke or never opened, which carry no code. */
const CONNECTION_LOST_MESSAGE = /Connection terminated|connection timeout|timeout exceeded when trying to connect|not queryable|Client was closed/i;

/** Whether an error we did not make is the database's: a lost connection, or a SQLSTATE (a query error). */
function isDatabaseFault(err: unknown): boolean {
  if (isDatabaseUnavailable(err)) return true;
  const code = (err as { code?: unknown } | null | undefined)?.code;
  return typeof code === 'string' && SQLSTATE.test(code);
}
