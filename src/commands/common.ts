/**
 * What every command shares: the configuration as a command loads it (exit 2 on a broken rule or
 * an unreadable file a setting names) and the body of the one-shot database commands.
 */
import type { Command } from 'commander';
import { loadConfig, type Config } from '../config.js';
import type { Pool } from '../db/pool.js';
import { readDatabaseTls } from '../db/tls.js';
import { requireDemoSimulator } from '../demo.js';
import { databaseSecrets } from '../config/database-url.js';
import { ConfigError, InvalidArgumentError, registerSecret } from '../errors.js';
import { createLogger, type Logger } from '../log.js';
import { EXIT_OK, EXIT_USAGE, reportFailure, type ExitStatus } from './exit.js';
import { readClientFiles } from '../upstream/files.js';
import { configOverrides } from './options.js';

/**
 * {@link loadConfig}'s configuration, its secrets registered for masking, and every file a setting
 * names read once by the module that uses it, so a bad one stops the start as a broken rule.
 *
 * @param overrides values from CLI flags, keyed by environment variable name.
 * @throws {ConfigError} for the first broken rule, then for the first file that cannot be used.
 */
export function loadCommandConfig(env: NodeJS.ProcessEnv, overrides: Record<string, string | undefined>): Config {
  const config = loadConfig(env, overrides);
  registerConfigSecrets(config, env);
  for (const source of config.sources) if (source.upstream !== undefined) readClientFiles(source.upstream);
  if (config.database.url !== undefined) readDatabaseTls(config.database.tls);
  return config;
}

/**
 * Registers `config`'s secrets for masking in all output (src/redact.ts): client secrets (a
 * CLIENT_SECRET_FILE's where it is read), passwords in the URLs and DATABASE_URL, PGPASSWORD.
 */
function registerConfigSecrets(config: Config, env: NodeJS.ProcessEnv): void {
  const secrets: string[] = [];
  for (const { upstream } of config.sources) {
    if (upstream === undefined) continue;
    secrets.push(upstream.clientSecret ?? '');
    for (const url of [upstream.statisticsUrl, upstream.tokenUrl]) secrets.push(...databaseSecrets(url.href));
  }
  if (config.database.url !== undefined) secrets.push(...databaseSecrets(config.database.url));
  secrets.push(env.PGPASSWORD ?? '');
  for (const secret of secrets) registerSecret(secret);
}

/**
 * {@link loadCommandConfig} for a command; on a broken rule prints it, sets exit status 2 and
 * returns undefined. `upstream`: without STATISTICS_URL, the demo simulator must be installed.
 */
export function loadConfigForCommand(command: Command, upstream = false): Config | undefined {
  try {
    const config = loadCommandConfig(process.env, configOverrides(command));
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
 * The body of a one-shot database command: loads the configuration, opens the database with one
 * connection, runs `work` and sets its exit status (0 when none), or the failure's, logged as
 * `<what> failed`. The application layer is loaded only here, so --help answers without pg.
 *
 * @param checkUsage runs before anything is opened; its {@link InvalidArgumentError} is exit 2.
 * @param open `locks`: the command takes advisory locks or writes (a pooler sharing servers is refused).
 */
export async function runDatabaseCommand(
  command: Command,
  what: string,
  work: (pool: Pool, config: Config, log: Logger) => Promise<ExitStatus | void>,
  checkUsage?: (config: Config) => void,
  open: { locks?: boolean } = {},
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
    const db = await openDatabase(config, log, 1, undefined, open);
    try {
      process.exitCode = (await work(db.pool, config, log)) ?? EXIT_OK;
    } finally {
      await db.close();
    }
  } catch (err) {
    process.exitCode = reportFailure(log, err, `${what} failed`);
  }
}
