/**
 * The configuration as a command loads it (exit status 2 on a broken rule). What a command then
 * opens lives in the application layer, src/app/runtime.ts.
 */
import type { Command } from 'commander';
import { loadConfig, type Config } from '../config.js';
import type { Pool } from '../db/pool.js';
import { requireDemoSimulator } from '../demo.js';
import { ConfigError, DataDirLockedError, InvalidArgumentError } from '../errors.js';
import { createLogger, type Logger } from '../log.js';
import { EXIT_FAILURE, EXIT_OK, EXIT_USAGE } from './exit.js';
import { configOverrides } from './options.js';

/**
 * Loads the configuration for a command; on a broken rule prints it to stderr, sets exit
 * status 2 and returns undefined.
 *
 * @param upstream the command talks to the upstream: without STATISTICS_URL the demo simulator
 *   must be installed ({@link requireDemoSimulator}).
 */
export function loadConfigForCommand(command: Command, upstream = false): Config | undefined {
  try {
    const config = loadConfig(process.env, configOverrides(command));
    if (upstream) requireDemoSimulator(config);
    return config;
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    process.stderr.write(`analytics-exporter: invalid configuration: ${err.message}\n`);
    process.exitCode = EXIT_USAGE;
    return undefined;
  }
}

/**
 * The body of a command that does one thing on the database and exits (migrate, rollup rebuild,
 * fields): loads the configuration (exit 2 on a broken rule), opens the configured database with
 * one connection, runs `work`, closes it, and sets exit status 0, or 1 with the failure logged as
 * `<what> failed` (a DATA_DIR held by another process named with its holder). The application
 * layer is loaded only here, so --help and bad configuration answer without pg.
 *
 * @param checkUsage checks the command's arguments against the configuration before anything is
 *   opened; an {@link InvalidArgumentError} it throws is printed on stderr with exit status 2.
 */
export async function runDatabaseCommand(
  command: Command,
  what: string,
  work: (pool: Pool, config: Config, log: Logger) => Promise<void>,
  checkUsage?: (config: Config) => void,
): Promise<void> {
  const config = loadConfigForCommand(command);
  if (config === undefined) return;
  try {
    checkUsage?.(config);
  } catch (err) {
    if (!(err instanceof InvalidArgumentError)) throw err;
    process.stderr.write(`analytics-exporter ${what}: ${err.message}\n`);
    process.exitCode = EXIT_USAGE;
    return;
  }
  const { openDatabase } = await import('../app/runtime.js');
  const log = createLogger(config.logLevel, { format: config.logFormat });
  try {
    const db = await openDatabase(config, log, 1);
    try {
      await work(db.pool, config, log);
      process.exitCode = EXIT_OK;
    } finally {
      await db.close();
    }
  } catch (err) {
    if (err instanceof DataDirLockedError) log.error({ dataDir: err.dataDir, holder: err.holder ?? null }, err.message);
    else log.error({ err }, `${what} failed`);
    process.exitCode = EXIT_FAILURE;
  }
}
