/**
 * How a command ends: its exit status by pure functions, one per command that judges results
 * (their tables: test/unit/exit-status.test.ts; the statuses: docs/commands.md), and a failure
 * logged at its level (src/failures.ts). Over several sources, the worst status wins.
 */
import { AbortedError, DataDirLockedError, InvalidArgumentError } from '../errors.js';
import { classifyFailure, EXIT_FAILURE, EXIT_OK, EXIT_USAGE, isDatabaseUnavailable, type ExitStatus } from '../failures.js';
import type { Logger } from '../log.js';
import type { SourceOutcome } from '../app/sync.js';
import type { AuditOutcome } from '../app/audit.js';
import type { UnderLock } from '../app/state.js';

export { EXIT_FAILURE, EXIT_OK, EXIT_USAGE, type ExitStatus } from '../failures.js';

/**
 * Logs what ended a command at its level, as `what` (`migrate failed`) with the error, and returns
 * the exit status (1, or 2 for bad usage). Never throws.
 */
export function reportFailure(log: Logger, err: unknown, what: string): ExitStatus {
  const { level, exitStatus } = classifyFailure(err);
  if (err instanceof DataDirLockedError) log[level]({ dataDir: err.dataDir, holder: err.holder ?? null }, err.message);
  else log[level]({ err }, what);
  return exitStatus;
}

/** 2 if any was bad usage, else 1 if any failed, else 0. */
export function worstExitStatus(statuses: readonly ExitStatus[]): ExitStatus {
  return statuses.includes(EXIT_USAGE) ? EXIT_USAGE : statuses.includes(EXIT_FAILURE) ? EXIT_FAILURE : EXIT_OK;
}

/** An exit status and the kind of ending, which says what the command reports. */
export interface CommandExit<Kind extends string> {
  status: ExitStatus;
  kind: Kind;
}

/**
 * How one source's `sync` ended: `parked` by this run or `still_parked` by earlier ones; `short`:
 * windows this run stored although E6 counted more;
 * `failed_database`: recorded as failed, the connection lost under it. Thrown before or outside
 * the run: `usage` to `error`; `stopped_before_start` is a signal while waiting.
 */
export type SyncExitKind =
  | 'succeeded'
  | 'locked'
  | 'parked'
  | 'short'
  | 'still_parked'
  | 'interrupted'
  | 'failed'
  | 'failed_database'
  | 'usage'
  | 'stopped_before_start'
  | 'database_unavailable'
  | 'error';

/** The exit status of one source's `sync`; `signalled`: the command received SIGINT or SIGTERM. */
export function syncExit(outcome: Pick<SourceOutcome, 'result' | 'error'>, signalled: boolean): CommandExit<SyncExitKind> {
  const { result } = outcome;
  if (result === undefined) return syncErrorExit(outcome.error, signalled);
  if (result.status === 'locked') return { status: EXIT_OK, kind: 'locked' };
  if (result.status === 'succeeded' && (result.parked ?? 0) > 0) return { status: EXIT_FAILURE, kind: 'parked' };
  if (result.status === 'succeeded' && (result.short ?? 0) > 0) return { status: EXIT_FAILURE, kind: 'short' };
  // This run could not make the data exact either: it says so, as the parking run did.
  if (result.status === 'succeeded' && (result.parkedWindows ?? 0) > 0) return { status: EXIT_FAILURE, kind: 'still_parked' };
  if (result.status === 'succeeded') return { status: EXIT_OK, kind: 'succeeded' };
  if (result.status === 'interrupted') return { status: signalled ? EXIT_OK : EXIT_FAILURE, kind: 'interrupted' };
  // The connection may have died under the run while the server was back to record its end.
  const lost = result.error !== undefined && isDatabaseUnavailable(result.error);
  return { status: EXIT_FAILURE, kind: lost ? 'failed_database' : 'failed' };
}

/** A `sync` that threw before or outside a run: a signal's abort is a clean stop (0). */
export function syncErrorExit(err: unknown, signalled: boolean): CommandExit<SyncExitKind> {
  const { exitStatus } = classifyFailure(err);
  if (err instanceof InvalidArgumentError) return { status: exitStatus, kind: 'usage' };
  if (err instanceof AbortedError && signalled) return { status: EXIT_OK, kind: 'stopped_before_start' };
  if (isDatabaseUnavailable(err)) return { status: exitStatus, kind: 'database_unavailable' };
  return { status: exitStatus, kind: 'error' };
}

export type VerifyExitKind = 'clean' | 'differences_left' | 'stopped' | 'error';

/** The exit status of one source's `verify`: a signal's stop is 1, as a difference may be left. */
export function verifyExit(outcome: Pick<AuditOutcome, 'result' | 'error'>, signalled: boolean): CommandExit<VerifyExitKind> {
  const { result, error } = outcome;
  if (result !== undefined) return result.left.length === 0 ? { status: EXIT_OK, kind: 'clean' } : { status: EXIT_FAILURE, kind: 'differences_left' };
  if (error instanceof AbortedError && signalled) return { status: EXIT_FAILURE, kind: 'stopped' };
  return { status: classifyFailure(error).exitStatus, kind: 'error' };
}

/** A `state` subcommand whose work ran: 1 when the source's lock was held, 2 when the work refused its arguments. */
export function stateExitStatus(done: UnderLock<unknown> | 'usage'): ExitStatus {
  if (done === 'usage') return EXIT_USAGE;
  return done.locked ? EXIT_FAILURE : EXIT_OK;
}

/** `check`: 2 for a bad configuration, else 0 only when every step passed. */
export function checkExitStatus(check: { configuration: 'bad' } | { passed: boolean }): ExitStatus {
  if ('configuration' in check) return EXIT_USAGE;
  return check.passed ? EXIT_OK : EXIT_FAILURE;
}
