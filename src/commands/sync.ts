/**
 * `analytics-exporter sync [--source NAME]... [--from ISO] [--to ISO] [--wait]`: one ETL run of
 * each source, for cron or a Kubernetes CronJob; its exit statuses are in docs/commands.md.
 */
import { InvalidArgumentError as CommanderArgumentError, type Command } from 'commander';
import type { Config, SourceConfig } from '../config.js';
import { InvalidArgumentError } from '../errors.js';
import { classifyFailure } from '../failures.js';
import { createLogger, type Logger } from '../log.js';
import { DRAIN_TIMEOUT_MS } from '../app/drain.js';
import { EXIT_FAILURE, EXIT_OK, EXIT_USAGE, reportFailure, syncErrorExit, syncExit, worstExitStatus, type CommandExit, type SyncExitKind } from './exit.js';
import { loadConfigForCommand } from './common.js';
import { parseIsoDate } from '../time.js';
import { handleShutdownSignals, type Shutdown } from './shutdown.js';
import { BarAwareStream, progressBar } from './progress.js';
import { formatSourceSummary } from './format/sync.js';
import { selectSources } from '../app/sources.js';
import type { SourceOutcome } from '../app/sync.js';

/** Parses `--from`/`--to`: ISO 8601 with a zone; an impossible date is refused. */
export function parseIsoOption(value: string): Date {
  const date = parseIsoDate(value);
  if (date === undefined) {
    throw new CommanderArgumentError(`must be an ISO 8601 date-time with a zone, such as 2026-11-01T00:00:00Z; got ${JSON.stringify(value)}`);
  }
  return date;
}

/** SIGINT/SIGTERM for `sync`: the first aborts `controller`, then exits 0 after `drainTimeoutMs` if still running. */
function handleSignals(controller: AbortController, log: Logger, drainTimeoutMs = DRAIN_TIMEOUT_MS): Shutdown {
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

/** As commander hands them over, dates parsed. */
interface SyncOptions {
  from?: Date;
  to?: Date;
  wait?: boolean;
  source?: string[];
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
    .action(runSyncCommand);
}

/**
 * The sources `sync` runs, or why its command line is bad usage (runSync checks again): an unknown
 * --source, a --to after now minus SYNC_SETTLE, a --from not before the range's end. `now`: epoch ms.
 */
function syncUsage(config: Config, options: SyncOptions, now = Date.now()): { sources: SourceConfig[] } | { usage: string } {
  let sources: SourceConfig[];
  try {
    sources = selectSources(config, options.source);
  } catch (err) {
    if (!(err instanceof InvalidArgumentError)) throw err;
    return { usage: err.message };
  }
  const latest = now - Math.max(...sources.map((s) => s.sync.settleMs));
  const end = options.to?.getTime() ?? latest;
  if (options.to !== undefined && options.to.getTime() > latest) {
    return {
      usage: `--to ${options.to.toISOString()} is later than now minus SYNC_SETTLE (${new Date(latest).toISOString()}); windows in the future would be committed empty`,
    };
  }
  if (options.from !== undefined && options.from.getTime() >= end) {
    return {
      usage: `--from ${options.from.toISOString()} must be before the end of the range ${new Date(end).toISOString()} (--to, or now minus SYNC_SETTLE)`,
    };
  }
  return { sources };
}

/** Bad usage refused before anything is opened, then every source's run, each ending reported, the worst status set. */
async function runSyncCommand(options: SyncOptions, command: Command): Promise<void> {
  const config = loadConfigForCommand(command, true);
  if (config === undefined) return;
  const checked = syncUsage(config, options);
  if ('usage' in checked) {
    process.stderr.write(`analytics-exporter sync: ${checked.usage}\n`);
    process.exitCode = EXIT_USAGE;
    return;
  }
  // Loaded only for a run: --help and bad usage answer without undici, pg, prom-client.
  const [{ syncSources }, { describeConfiguredDatabase }] = await Promise.all([import('../app/sync.js'), import('../db/pool.js')]);
  const terminal = new BarAwareStream(process.stderr);
  const log = createLogger(config.logLevel, { format: config.logFormat, destination: terminal });
  const controller = new AbortController();
  const signals = handleSignals(controller, log);
  const progress = process.stderr.isTTY ? await progressBar(terminal) : undefined;
  const report: SyncReport = { schema: config.database.schema, database: () => describeConfiguredDatabase(config.database), wait: options.wait ?? false };
  // For the person at a terminal; without one, the run's last log line is the summary.
  const summaries = progress !== undefined && config.logLevel !== 'silent';
  let code: number = EXIT_FAILURE;
  // An operation that never settles with nothing left to wake it would make Node exit 0: a cron job must see 1.
  const unfinished = (): void => {
    log.error('sync stopped before finishing: an operation never settled and nothing was left to wait on (windows committed before are kept)');
    process.exitCode = EXIT_FAILURE;
  };
  process.once('beforeExit', unfinished);
  try {
    const outcomes = await syncSources(config, log, {
      sources: checked.sources.map((s) => s.name),
      ...(options.from ? { from: options.from } : {}),
      ...(options.to ? { to: options.to } : {}),
      wait: options.wait ?? false,
      signal: controller.signal,
      ...(progress ? { observer: () => progress.observer } : {}),
    });
    progress?.stop();
    const statuses = outcomes.map((outcome) => {
      const { result } = outcome;
      if (summaries && result !== undefined && result.status !== 'locked') terminal.write(formatSourceSummary(outcome.source, result, outcomes.length > 1));
      const exit = syncExit(outcome, signals.received() !== undefined);
      reportSyncExit(exit, outcome, report);
      return exit.status;
    });
    code = worstExitStatus(statuses);
  } catch (err) {
    progress?.stop();
    const exit = syncErrorExit(err, signals.received() !== undefined);
    reportSyncExit(exit, { log, error: err }, report);
    code = exit.status;
  } finally {
    process.off('beforeExit', unfinished);
    signals.dispose();
  }
  process.exitCode = code;
}

/** What the lines about a sync's ending name. */
interface SyncReport {
  schema: string;
  /** `host:port/database`, or the embedded database's folder. */
  database: () => string;
  wait: boolean;
}

/** Says what one ending means, in `outcome.log` or on stderr for bad usage; a run that ended by itself said so already. */
function reportSyncExit(exit: CommandExit<SyncExitKind>, outcome: Pick<SourceOutcome, 'log' | 'result'> & { error?: unknown }, report: SyncReport): void {
  const { log: about, result, error } = outcome;
  const ran = result !== undefined && result.status !== 'locked' ? result : undefined;
  const unreachable = (database: string) => `sync failed: the database ${database} is unreachable or closed the connection (windows committed before are kept)`;
  switch (exit.kind) {
    case 'locked':
      return about.info({ schema: report.schema }, 'another sync holds the lock for this source; nothing to do (use --wait to wait for it)');
    case 'parked':
      return about.warn({ parked: ran?.parked }, 'sync parked windows it could not load (see the warnings above); exit status 1');
    case 'short':
      return about.warn(
        { short: ran?.short },
        "sync stored short windows: E6's count claims records it does not serve (see the warnings above); exit status 1",
      );
    case 'still_parked':
      return about.warn(
        { parkedWindows: ran?.parkedWindows },
        'windows parked by earlier runs are still not loaded (sync_windows status parked; load them with sync --from/--to once the cause is fixed); exit status 1',
      );
    case 'failed_database': {
      const database = report.database();
      return about.error({ database }, unreachable(database));
    }
    case 'usage':
      process.stderr.write(`analytics-exporter sync: ${(error as Error).message}\n`);
      return;
    case 'stopped_before_start':
      return about[classifyFailure(error).level](
        { schema: report.schema },
        report.wait
          ? 'stopped while waiting for another sync to release the lock; nothing was loaded'
          : 'stopped by a signal before the run started; nothing was loaded',
      );
    case 'database_unavailable': {
      const database = report.database();
      return about[classifyFailure(error).level]({ database, err: error }, unreachable(database));
    }
    case 'error':
      reportFailure(about, error, 'sync failed');
      return;
    case 'succeeded':
    case 'interrupted':
    case 'failed':
      return;
  }
}
