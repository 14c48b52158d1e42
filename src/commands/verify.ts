/**
 * `analytics-exporter verify [--source NAME]... [--from ISO] [--to ISO] [--repair]`: compares each
 * ledger window with what E6 holds now and, with `--repair`, loads those that differ again. It
 * serves no metrics: its log lines and exit status (docs/commands.md) say what it found, and one
 * line per source on stdout sums it up.
 */
import type { Command } from 'commander';
import { z } from 'zod';
import { InvalidArgumentError } from '../errors.js';
import { DRAIN_TIMEOUT_MS } from '../app/drain.js';
import { createLogger, type Logger } from '../log.js';
import { selectSources } from '../app/sources.js';
import type { AuditOutcome } from '../app/audit.js';
import { EXIT_FAILURE, EXIT_USAGE, reportFailure, verifyExit, worstExitStatus, type CommandExit, type VerifyExitKind } from './exit.js';
import { loadConfigForCommand } from './common.js';
import { handleShutdownSignals, type Shutdown } from './shutdown.js';
import { parseIsoOption } from './sync.js';

/** SIGINT/SIGTERM for `verify`: the first aborts `controller`, then exits 1 (a difference may be left) after `drainTimeoutMs`. */
export function handleVerifySignals(controller: AbortController, log: Logger, drainTimeoutMs = DRAIN_TIMEOUT_MS): Shutdown {
  return handleShutdownSignals({
    log,
    stopping: 'stopping: the comparison ends without repairs, and a repair under way rolls back its current window (send the signal again to exit at once)',
    stop: () => controller.abort(),
    bound: {
      ms: drainTimeoutMs,
      exitCode: EXIT_FAILURE,
      level: 'warn',
      message:
        'the audit did not stop in time (it waits on a request that cannot be cancelled); exiting without it: the database rolls back an open window, repaired windows are kept, differences may be left',
    },
    forced: 'second signal: exiting at once; an open window is rolled back by the database',
  });
}

/** As commander hands them over, dates parsed. */
const verifyOptions = z
  .object({
    from: z.date().optional(),
    to: z.date().optional(),
    repair: z.boolean().optional(),
    source: z.array(z.string()).optional(),
  })
  .refine((o) => o.from === undefined || o.to === undefined || o.from < o.to, {
    error: (issue) => {
      const o = issue.input as { from: Date; to: Date };
      return `--from ${o.from.toISOString()} must be before --to ${o.to.toISOString()}`;
    },
  });

/** Adds `verify` to the program. */
export function registerVerifyCommand(program: Command): void {
  program
    .command('verify')
    .description('compare the stored windows with what E6 holds now (by counts, bisecting what differs down to windows); --repair loads those again')
    .option('--from <iso>', 'audit the windows from this instant (default: every window still kept)', parseIsoOption)
    .option('--to <iso>', 'audit the windows before this instant (default: the last one loaded)', parseIsoOption)
    .option('--repair', 'load the windows that differ again, exactly as sync would (SYNC_SHRINK honoured)')
    .option('--source <name>', 'verify this configured source only (repeatable; default: every source)', (name: string, names: string[] | undefined) => [
      ...(names ?? []),
      name,
    ])
    .addHelpText(
      'after',
      '\nExit status: 0 no difference left; 1 a difference left (found without --repair, a parked window, or a repair that failed, parked it again or was stopped by a signal),\nor E6 or the database failed: run it again to finish; 2 bad usage.',
    )
    .action(async (raw: unknown, command: Command) => {
      const parsed = verifyOptions.safeParse(raw);
      if (!parsed.success) {
        process.stderr.write(`analytics-exporter verify: ${parsed.error.issues.map((i) => i.message).join('; ')}\n`);
        process.exitCode = EXIT_USAGE;
        return;
      }
      const options = parsed.data;
      const config = loadConfigForCommand(command, true);
      if (config === undefined) return;
      try {
        selectSources(config, options.source);
      } catch (err) {
        if (!(err instanceof InvalidArgumentError)) throw err;
        process.stderr.write(`analytics-exporter verify: ${err.message}\n`);
        process.exitCode = EXIT_USAGE;
        return;
      }
      const { auditSources } = await import('../app/audit.js');
      const log = createLogger(config.logLevel, { format: config.logFormat });
      const controller = new AbortController();
      const signals = handleVerifySignals(controller, log);
      try {
        const outcomes = await auditSources(config, log, {
          ...(options.source ? { sources: options.source } : {}),
          ...(options.from ? { from: options.from } : {}),
          ...(options.to ? { to: options.to } : {}),
          repair: options.repair ?? false,
          signal: controller.signal,
        });
        const statuses = outcomes.map((outcome) => {
          const exit = verifyExit(outcome, signals.received() !== undefined);
          reportVerifyExit(exit, outcome);
          process.stdout.write(`${summariseAudit(outcome)}\n`);
          return exit.status;
        });
        process.exitCode = worstExitStatus(statuses);
      } catch (err) {
        process.exitCode = reportFailure(log, err, 'verify failed');
      } finally {
        signals.dispose();
      }
    });
}

/** One line for stdout: `source NAME: W windows compared with E6, D differ (R repaired, L left)`, or why none. */
function summariseAudit({ source, result, error }: AuditOutcome): string {
  // The error's own words went to the log, masked; stdout is not.
  if (result === undefined) return `source ${source}: not verified (${error === undefined ? 'stopped' : 'failed, see the log'})`;
  const { windows, drifted, left } = result;
  const differ = drifted.length === 0 ? 'none differ' : `${drifted.length} differ (${drifted.length - left.length} repaired, ${left.length} left)`;
  return `source ${source}: ${windows} windows compared with E6, ${differ}`;
}

/** Says what one source's ending means, in its log; the audit's own lines said what it found. */
function reportVerifyExit(exit: CommandExit<VerifyExitKind>, { log: about, error }: AuditOutcome): void {
  if (exit.kind === 'stopped') about.warn('verify stopped by a signal before it finished; run it again');
  else if (exit.kind === 'error') reportFailure(about, error, 'verify failed');
}
