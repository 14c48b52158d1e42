/**
 * How a command ends: its exit status, from what it ran into, by pure functions (one per command
 * that judges results: `sync`, `verify`, `state`, `check`; test/unit/exit-status.test.ts holds
 * their tables), and a failure logged at the level and with the status the failure table
 * (src/failures.ts) gives its class. The statuses themselves live there, beside the table.
 *
 * A command that runs several sources ends with the worst of their statuses
 * ({@link worstExitStatus}): bad usage, then a failure, then success.
 */
import { AbortedError, DataDirLockedError, InvalidArgumentError } from '../errors.js';
import { classifyFailure, EXIT_FAILURE, EXIT_OK, EXIT_USAGE, isDatabaseUnavailable, type ExitStatus } from '../failures.js';
import type { Logger } from '../log.js';
import type { SourceOutcome } from '../app/sync.js';
import type { AuditOutcome } from '../app/audit.js';
import type { UnderLock } from '../app/state.js';

export { EXIT_FAILURE, EXIT_OK, EXIT_USAGE, type ExitStatus } from '../failures.js';

/**
 * Logs what ended a command at its level (src/failures.ts, FAILURES) and returns the command's exit
 * status: a DATA_DIR held by another process with its holder and the way out (its message), anything
 * else as `what` with the error.
 *
 * @param what the log line, such as `serve could not start` or `migrate failed`.
 * @returns 1 for a failure of the run, 2 for bad usage or configuration. Never throws.
 */
export function reportFailure(log: Logger, err: unknown, what: string): ExitStatus {
  const { level, exitStatus } = classifyFailure(err);
  if (err instanceof DataDirLockedError) log[level]({ dataDir: err.dataDir, holder: err.holder ?? null }, err.message);
  else log[level]({ err }, what);
  return exitStatus;
}

/** The status of a command over several sources: 2 if any was bad usage, else 1 if any failed, else 0. */
export function worstExitStatus(statuses: readonly ExitStatus[]): ExitStatus {
  return statuses.includes(EXIT_USAGE) ? EXIT_USAGE : statuses.includes(EXIT_FAILURE) ? EXIT_FAILURE : EXIT_OK;
}

/** An exit status and the kind of ending that gave it, which says what the command reports about it. */
export interface CommandExit<Kind extends string> {
  status: ExitStatus;
  kind: Kind;
}

/**
 * How one source's `sync` ended, each kind reported by the command in its own way:
 * - `succeeded`, `interrupted` (the run's own log lines said it), `locked` (another sync holds the lock);
 * - `parked` (this run parked windows), `still_parked` (windows parked by earlier runs are still not loaded);
 * - `failed` (recorded as failed), `failed_database` (recorded, the database's connection lost under it);
 * - thrown before or outside the run: `usage` (a bad --from/--to), `stopped_before_start` (a signal
 *   while waiting for the lock or the database), `database_unavailable`, `error` (anything else).
 */
export type SyncExitKind =
  | 'succeeded'
  | 'locked'
  | 'parked'
  | 'still_parked'
  | 'interrupted'
  | 'failed'
  | 'failed_database'
  | 'usage'
  | 'stopped_before_start'
  | 'database_unavailable'
  | 'error';

/**
 * The exit status of one source's `sync` (README, sync): 0 when it succeeded with nothing parked,
 * found another run holding its lock, or was stopped by the signal the command received; 1 when
 * it failed, was interrupted by anything else, or parked a window or still has one parked; what
 * src/failures.ts gives a failure thrown before or outside the run (2 for bad usage).
 *
 * @param signalled whether the command received SIGINT or SIGTERM.
 */
export function syncExit(outcome: Pick<SourceOutcome, 'result' | 'error'>, signalled: boolean): CommandExit<SyncExitKind> {
  const { result } = outcome;
  if (result === undefined) return syncErrorExit(outcome.error, signalled);
  if (result.status === 'locked') return { status: EXIT_OK, kind: 'locked' };
  if (result.status === 'succeeded' && (result.parked ?? 0) > 0) return { status: EXIT_FAILURE, kind: 'parked' };
  // Parked by an earlier run and still not loaded: this run could not make the data exact
  // either, so it says so in its exit status as the parking run did (the gauge and the
  // alert AnalyticsSyncWindowsParked say it too), until the window is loaded.
  if (result.status === 'succeeded' && (result.parkedWindows ?? 0) > 0) return { status: EXIT_FAILURE, kind: 'still_parked' };
  if (result.status === 'succeeded') return { status: EXIT_OK, kind: 'succeeded' };
  // Interrupted: stopped cleanly, the open window rolled back, the committed ones are whole.
  if (result.status === 'interrupted') return { status: signalled ? EXIT_OK : EXIT_FAILURE, kind: 'interrupted' };
  // Failed, and recorded as failed: the connection may have died under the run (a restart while
  // it waited on E6) while the server was back to take the run's end.
  const lost = result.error !== undefined && isDatabaseUnavailable(result.error);
  return { status: EXIT_FAILURE, kind: lost ? 'failed_database' : 'failed' };
}

/**
 * The exit status of a `sync` that threw before or outside a run (for one source, or for the whole
 * command): a signal's abort is a clean stop (0); any other failure has its status in src/failures.ts.
 */
export function syncErrorExit(err: unknown, signalled: boolean): CommandExit<SyncExitKind> {
  const { exitStatus } = classifyFailure(err);
  if (err instanceof InvalidArgumentError) return { status: exitStatus, kind: 'usage' };
  // An abort no signal of ours asked for failed the run like any other error.
  if (err instanceof AbortedError && signalled) return { status: EXIT_OK, kind: 'stopped_before_start' };
  if (isDatabaseUnavailable(err)) return { status: exitStatus, kind: 'database_unavailable' };
  return { status: exitStatus, kind: 'error' };
}

/** How one source's `verify` ended: no difference left, some left, stopped by a signal, or failed. */
export type VerifyExitKind = 'clean' | 'differences_left' | 'stopped' | 'error';

/**
 * The exit status of one source's `verify` (README, The audit): 0 when no difference is left; 1
 * when one is (found without --repair, or its repair failed), or when a signal stopped it (a
 * difference may be left); a failure's status from src/failures.ts.
 *
 * @param signalled whether the command received SIGINT or SIGTERM.
 */
export function verifyExit(outcome: Pick<AuditOutcome, 'result' | 'error'>, signalled: boolean): CommandExit<VerifyExitKind> {
  const { result, error } = outcome;
  if (result !== undefined) return result.left.length === 0 ? { status: EXIT_OK, kind: 'clean' } : { status: EXIT_FAILURE, kind: 'differences_left' };
  // Nothing it found is known to be repaired: a difference may be left.
  if (error instanceof AbortedError && signalled) return { status: EXIT_FAILURE, kind: 'stopped' };
  return { status: classifyFailure(error).exitStatus, kind: 'error' };
}

/**
 * The exit status of a `state` subcommand whose work ran: 0 done; 1 when another process held the
 * source's sync lock (nothing was done); 2 when the work refused its arguments (`usage`: an
 * InvalidArgumentError, such as a watermark moved forward past unloaded windows without --force).
 * A failure of the database is runDatabaseCommand's (src/commands/common.ts).
 */
export function stateExitStatus(done: UnderLock<unknown> | 'usage'): ExitStatus {
  if (done === 'usage') return EXIT_USAGE;
  return done.locked ? EXIT_FAILURE : EXIT_OK;
}

/** The exit status of `check`: 2 when the configuration is bad, else 0 only when every step passed. */
export function checkExitStatus(check: { configuration: 'bad' } | { passed: boolean }): ExitStatus {
  if ('configuration' in check) return EXIT_USAGE;
  return check.passed ? EXIT_OK : EXIT_FAILURE;
}
