/**
 * How a command ends on a failure: logged at the level and with the exit status the failure table
 * (src/failures.ts) gives its class. The statuses themselves live there, beside the table.
 */
import { DataDirLockedError } from '../errors.js';
import { classifyFailure, type ExitStatus } from '../failures.js';
import type { Logger } from '../log.js';

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
