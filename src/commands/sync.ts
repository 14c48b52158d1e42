/**
 * `analytics-exporter sync [--source NAME]... [--from ISO] [--to ISO] [--wait]`: one ETL run of
 * each source (or of those named), for cron or a Kubernetes CronJob. Exit 0 when every source
 * succeeded, found another run holding its lock, or stopped cleanly by SIGINT/SIGTERM (current
 * window rolled back, committed windows intact); 1 when any failed, parked a window it could not
 * load (src/sync/run/park.ts: the run went on, but its data is not exact) or still has a window an
 * earlier run parked, after all finished; 2 bad usage (an unknown --source); 130/143 when a
 * second signal forces the exit.
 */
import { InvalidArgumentError as CommanderArgumentError, type Command } from 'commander';
import { AbortedError, InvalidArgumentError } from '../errors.js';
import { classifyFailure, isDatabaseUnavailable } from '../failures.js';
import { createLogger, type Logger } from '../log.js';
import { DRAIN_TIMEOUT_MS } from '../app/drain.js';
import { EXIT_FAILURE, EXIT_OK, EXIT_USAGE, reportFailure } from './exit.js';
import { loadConfigForCommand } from './common.js';
import { parseIsoDate } from '../time.js';
import { handleShutdownSignals, type Shutdown } from './shutdown.js';
import { BarAwareStream, formatRunSummary, progressBar } from './progress.js';
import { selectSources } from '../app/sources.js';
import type { SourceOutcome } from '../app/sync.js';

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
    .option('--source <name>', 'sync this configured source only (repeatable; default: every source)', (name: string, names: string[] | undefined) => [
      ...(names ?? []),
      name,
    ])
    .addHelpText(
      'after',
      '\nExit status: 0 done, another sync holds the lock, or stopped cleanly by SIGINT/SIGTERM (the open window rolled back);\n1 a source failed, parked a window it could not load, or has one parked by an earlier run (after every source finished); 2 bad usage; 130/143 when a second signal forces the exit.',
    )
    .action(async (options: { from?: Date; to?: Date; wait?: boolean; source?: string[] }, command: Command) => {
      const config = loadConfigForCommand(command, true);
      if (config === undefined) return;
      // Bad usage is refused before anything is opened (runSync checks the same again).
      let sources;
      try {
        sources = selectSources(config, options.source);
      } catch (err) {
        if (!(err instanceof InvalidArgumentError)) throw err;
        process.stderr.write(`analytics-exporter sync: ${err.message}\n`);
        process.exitCode = EXIT_USAGE;
        return;
      }
      const latest = Date.now() - Math.max(...sources.map((s) => s.sync.settleMs));
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
      const [{ syncSources }, { describeConfiguredDatabase }] = await Promise.all([import('../app/sync.js'), import('../db/pool.js')]);
      // On a terminal, log lines go above the progress bar (src/commands/progress.ts).
      const terminal = new BarAwareStream(process.stderr);
      const log = createLogger(config.logLevel, { format: config.logFormat, destination: terminal });
      const controller = new AbortController();
      const signals = handleSignals(controller, log);
      const progress = process.stderr.isTTY ? await progressBar(terminal) : undefined;
      /** Reports what stopped a run (or the whole command) and gives its exit status (src/failures.ts). */
      const errorExitCode = (err: unknown, about: Logger): number => {
        const { exitStatus, level } = classifyFailure(err);
        if (err instanceof InvalidArgumentError) {
          process.stderr.write(`analytics-exporter sync: ${err.message}\n`);
          return exitStatus;
        }
        // Stopped by our signal before a run started: while --wait waited for the lock, or while the
        // database was opened and migrated. Nothing was started, nothing to roll back. (An abort no
        // signal of ours asked for fails the run like any other error.)
        if (err instanceof AbortedError && signals.received() !== undefined) {
          about[level](
            { schema: config.database.schema },
            options.wait === true
              ? 'stopped while waiting for another sync to release the lock; nothing was loaded'
              : 'stopped by a signal before the run started; nothing was loaded',
          );
          return EXIT_OK;
        }
        if (isDatabaseUnavailable(err)) {
          const database = describeConfiguredDatabase(config.database);
          about[level]({ database, err }, `sync failed: the database ${database} is unreachable or closed the connection (windows committed before are kept)`);
          return exitStatus;
        }
        return reportFailure(about, err, 'sync failed');
      };
      /** One source's exit status; its lines carry `source`. */
      const outcomeExitCode = ({ result, error, log: about }: SourceOutcome): number => {
        if (result === undefined) return errorExitCode(error, about);
        if (result.status === 'locked') {
          about.info({ schema: config.database.schema }, 'another sync holds the lock for this source; nothing to do (use --wait to wait for it)');
          return EXIT_OK;
        }
        if (result.status === 'succeeded' && (result.parked ?? 0) > 0) {
          about.warn({ parked: result.parked }, 'sync parked windows it could not load (see the warnings above); exit status 1');
          return EXIT_FAILURE;
        }
        // Parked by an earlier run and still not loaded: this run could not make the data exact
        // either, so it says so in its exit status as the parking run did (the gauge and the
        // alert AnalyticsSyncWindowsParked say it too), until the window is loaded.
        if (result.status === 'succeeded' && (result.parkedWindows ?? 0) > 0) {
          about.warn(
            { parkedWindows: result.parkedWindows },
            'windows parked by earlier runs are still not loaded (sync_windows status parked; load them with sync --from/--to once the cause is fixed); exit status 1',
          );
          return EXIT_FAILURE;
        }
        if (result.status === 'succeeded') return EXIT_OK;
        // Interrupted: stopped cleanly, the open window rolled back, the committed ones are whole.
        if (result.status === 'interrupted') return signals.received() !== undefined ? EXIT_OK : EXIT_FAILURE;
        // Failed, and recorded as failed: the connection died under the run (a restart while it
        // waited on E6) but the server was back to take the run's end. Name the database as when
        // it stays down.
        if (result.error !== undefined && isDatabaseUnavailable(result.error)) {
          const database = describeConfiguredDatabase(config.database);
          about.error({ database }, `sync failed: the database ${database} is unreachable or closed the connection (windows committed before are kept)`);
        }
        return EXIT_FAILURE;
      };
      let code = EXIT_FAILURE;
      // Should an operation of the run never settle with nothing left to wake it (no socket, no
      // timer), Node would exit with status 0 as if the run had succeeded; a cron job must see a
      // failure instead.
      const unfinished = (): void => {
        log.error('sync stopped before finishing: an operation never settled and nothing was left to wait on (windows committed before are kept)');
        process.exitCode = EXIT_FAILURE;
      };
      process.once('beforeExit', unfinished);
      try {
        const outcomes = await syncSources(config, log, {
          sources: sources.map((s) => s.name),
          ...(options.from ? { from: options.from } : {}),
          ...(options.to ? { to: options.to } : {}),
          wait: options.wait ?? false,
          signal: controller.signal,
          ...(progress ? { observer: () => progress.observer } : {}),
        });
        progress?.stop();
        const several = outcomes.length > 1;
        const codes = outcomes.map((outcome) => {
          const { result } = outcome;
          // The summary is command output for the person at the terminal, under the last log line
          // on stderr; without a terminal, the run's last log line is the summary.
          if (progress !== undefined && result !== undefined && result.status !== 'locked' && config.logLevel !== 'silent') {
            terminal.write(`${several ? `${outcome.source}: ` : ''}${formatRunSummary(result)}\n`);
          }
          return outcomeExitCode(outcome);
        });
        // Bad usage first, then any failure: the status says the worst of what happened.
        code = codes.includes(EXIT_USAGE) ? EXIT_USAGE : codes.includes(EXIT_FAILURE) ? EXIT_FAILURE : EXIT_OK;
      } catch (err) {
        progress?.stop();
        code = errorExitCode(err, log);
      } finally {
        process.off('beforeExit', unfinished);
        signals.dispose();
      }
      process.exitCode = code;
    });
}
