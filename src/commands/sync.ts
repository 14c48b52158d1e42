/**
 * `analytics-exporter sync [--from ISO] [--to ISO] [--wait]`: one ETL run, for cron or a
 * Kubernetes CronJob. Exit 0 success, another run holds the lock, or stopped cleanly by
 * SIGINT/SIGTERM (current window rolled back, committed windows intact); 1 failure; 2 bad usage;
 * 130/143 when a second signal forces the exit.
 */
import { InvalidArgumentError as CommanderArgumentError, type Command } from 'commander';
import { AbortedError, DataDirLockedError, InvalidArgumentError } from '../errors.js';
import { createLogger, type Logger } from '../log.js';
import { DRAIN_TIMEOUT_MS } from '../app/drain.js';
import { EXIT_FAILURE, EXIT_OK, EXIT_USAGE } from './exit.js';
import { loadConfigForCommand } from './runtime.js';
import { parseIsoDate } from '../time.js';
import { handleShutdownSignals, type Shutdown } from './shutdown.js';
import { BarAwareStream, formatRunSummary, progressBar } from './progress.js';

/** Parses `--from`/`--to`: ISO 8601 date-time with a zone ({@link parseIsoDate}); an impossible date is refused. */
export function parseIsoOption(value: string): Date {
  const date = parseIsoDate(value);
  if (date === undefined) {
    throw new CommanderArgumentError(`must be an ISO 8601 date-time with a zone, such as 2026-11-01T00:00:00Z; got ${JSON.stringify(value)}`);
  }
  return date;
}

/**
 * SIGINT/SIGTERM for a one-shot sync: the first signal aborts `controller` (the run rolls back its
 * current window and stops) and exits 0 after `drainTimeoutMs` if the run has not stopped by then;
 * a second signal exits at once with 128 + its number.
 */
export function handleSignals(controller: AbortController, log: Logger, drainTimeoutMs = DRAIN_TIMEOUT_MS): Shutdown {
  return handleShutdownSignals({
    log,
    stopping: 'stopping: rolling back the current window (send the signal again to exit at once)',
    stop: () => controller.abort(),
    bound: {
      ms: drainTimeoutMs,
      exitCode: EXIT_OK,
      level: 'warn',
      message:
        'the run did not stop in time (it waits on a request that cannot be cancelled); exiting without it: the database rolls back the open window, committed windows are kept',
    },
    forced: 'second signal: exiting at once; the open window is rolled back by the database',
  });
}

/** Adds `sync` to the program. */
export function registerSyncCommand(program: Command): void {
  program
    .command('sync')
    .description('one ETL run: page E6 into PostgreSQL, exactly once, from the watermark (or --from) to now minus SYNC_SETTLE (or --to)')
    .option('--from <iso>', 'start of the range (default: watermark minus SYNC_LOOKBACK, or SYNC_START_DATE on a first run)', parseIsoOption)
    .option('--to <iso>', 'end of the range (default: now minus SYNC_SETTLE)', parseIsoOption)
    .option('--wait', 'wait for a sync holding the lock instead of exiting 0 at once')
    .addHelpText(
      'after',
      '\nExit status: 0 done, another sync holds the lock, or stopped cleanly by SIGINT/SIGTERM (the open window rolled back);\n1 failed; 2 bad usage; 130/143 when a second signal forces the exit.',
    )
    .action(async (options: { from?: Date; to?: Date; wait?: boolean }, command: Command) => {
      const config = loadConfigForCommand(command);
      if (config === undefined) return;
      // Bad usage is refused before anything is opened (runSync checks the same again).
      const latest = Date.now() - config.sources[0]!.sync.settleMs;
      const usage =
        options.to !== undefined && options.to.getTime() > latest
          ? `--to ${options.to.toISOString()} is later than now minus SYNC_SETTLE (${new Date(latest).toISOString()}); windows in the future would be committed empty`
          : options.from !== undefined && options.from.getTime() >= (options.to?.getTime() ?? latest)
            ? `--from ${options.from.toISOString()} must be before the end of the range ${new Date(options.to?.getTime() ?? latest).toISOString()} (--to, or now minus SYNC_SETTLE)`
            : undefined;
      if (usage !== undefined) {
        process.stderr.write(`analytics-exporter sync: ${usage}\n`);
        process.exitCode = EXIT_USAGE;
        return;
      }
      // The application layer (undici, pg, prom-client) is loaded only for a run: --help and bad
      // usage answer without it.
      const [{ syncOnce }, { describeConfiguredDatabase, isDatabaseUnavailable }] = await Promise.all([import('../app/sync.js'), import('../db/pool.js')]);
      // On a terminal, log lines go above the progress bar (src/commands/progress.ts).
      const terminal = new BarAwareStream(process.stderr);
      const log = createLogger(config.logLevel, { format: config.logFormat, destination: terminal });
      const controller = new AbortController();
      const signals = handleSignals(controller, log);
      const progress = process.stderr.isTTY ? await progressBar(terminal) : undefined;
      let code = EXIT_FAILURE;
      try {
        const result = await syncOnce(config, log, {
          ...(options.from ? { from: options.from } : {}),
          ...(options.to ? { to: options.to } : {}),
          wait: options.wait ?? false,
          signal: controller.signal,
          ...(progress ? { observer: progress.observer } : {}),
        });
        progress?.stop();
        // The summary is command output for the person at the terminal, under the last log line
        // on stderr; without a terminal, the run's last log line is the summary.
        if (progress !== undefined && result.status !== 'locked' && config.logLevel !== 'silent') terminal.write(`${formatRunSummary(result)}\n`);
        if (result.status === 'locked') {
          log.info({ schema: config.database.schema }, 'another sync holds the lock for this schema; nothing to do (use --wait to wait for it)');
          code = EXIT_OK;
        } else if (result.status === 'succeeded') {
          code = EXIT_OK;
        } else if (result.status === 'interrupted') {
          // Stopped cleanly: the open window rolled back, the committed ones are whole.
          code = signals.received() !== undefined ? EXIT_OK : EXIT_FAILURE;
        }
      } catch (err) {
        progress?.stop();
        if (err instanceof InvalidArgumentError) {
          process.stderr.write(`analytics-exporter sync: ${err.message}\n`);
          code = EXIT_USAGE;
        } else if (err instanceof AbortedError && signals.received() !== undefined) {
          // The signal came while --wait waited for the lock: nothing was started, nothing to roll back.
          log.warn({ schema: config.database.schema }, 'stopped while waiting for another sync to release the lock; nothing was loaded');
          code = EXIT_OK;
        } else if (err instanceof DataDirLockedError) {
          log.error({ dataDir: err.dataDir, holder: err.holder ?? null }, err.message);
          code = EXIT_FAILURE;
        } else if (isDatabaseUnavailable(err)) {
          const database = describeConfiguredDatabase(config.database);
          log.error({ database, err }, `sync failed: the database ${database} is unreachable or closed the connection (windows committed before are kept)`);
          code = EXIT_FAILURE;
        } else {
          log.error({ err }, 'sync failed');
          code = EXIT_FAILURE;
        }
      } finally {
        signals.dispose();
      }
      process.exitCode = code;
    });
}
