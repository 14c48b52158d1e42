/**
 * What every command shares: the configuration as a command loads it (exit status 2 on a broken
 * rule or a file a setting names that cannot be read) and the body of the one-shot database
 * commands. What a command then opens lives in the application layer, src/app/runtime.ts.
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
 * The configuration a command runs with: {@link loadConfig}'s, then every file a setting names
 * read once by the module that uses it (each source's secret and TLS files, src/upstream/files.ts;
 * the database's TLS files, src/db/tls.ts), so that a missing, empty or unreadable one stops the
 * start before anything runs, named as a broken rule of its setting. Those modules read the files
 * again when they use them. Every secret the configuration holds is registered to be masked in
 * all output ({@link registerConfigSecrets}).
 *
 * @param env usually `process.env`.
 * @param overrides values from CLI flags, keyed by environment variable name.
 * @throws {ConfigError} for the first broken rule, then for the first file that cannot be used,
 *   in the order of the sources and, within one, of the settings; the database's last.
 */
export function loadCommandConfig(env: NodeJS.ProcessEnv, overrides: Record<string, string | undefined>): Config {
  const config = loadConfig(env, overrides);
  registerConfigSecrets(config, env);
  for (const source of config.sources) if (source.upstream !== undefined) readClientFiles(source.upstream);
  if (config.database.url !== undefined) readDatabaseTls(config.database.tls);
  return config;
}

/**
 * Registers the secrets of `config` to be masked, in all their forms, in every log line, message,
 * stored error text and served metric (src/redact.ts): each source's client secret (CLIENT_SECRET,
 * or CONFIG_FILE's `client_secret`; a CLIENT_SECRET_FILE's is registered where it is read), the
 * password in the user info of STATISTICS_URL and AUTH_URL, DATABASE_URL's passwords
 * ({@link databaseSecrets}) and PGPASSWORD.
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
 * Loads the configuration for a command ({@link loadCommandConfig}); on a broken rule prints it to
 * stderr, sets exit status 2 and returns undefined.
 *
 * @param upstream the command talks to the upstream: without STATISTICS_URL the demo simulator
 *   must be installed ({@link requireDemoSimulator}).
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
 * The body of a command that does one thing on the database and exits (migrate, rollup rebuild,
 * fields): loads the configuration (exit 2 on a broken rule), opens the configured database with
 * one connection, runs `work`, closes it, and sets exit status `work`'s (0 when it returns none), or the failure's (1; 2 for bad
 * usage, src/failures.ts) with it logged as `<what> failed` (a DATA_DIR held by another process
 * named with its holder). The application
 * layer is loaded only here, so --help and bad configuration answer without pg.
 *
 * @param checkUsage checks the command's arguments against the configuration before anything is
 *   opened; an {@link InvalidArgumentError} it throws is printed on stderr with exit status 2.
 */
export async function runDatabaseCommand(
  command: Command,
  what: string,
  work: (pool: Pool, config: Config, log: Logger) => Promise<ExitStatus | void>,
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
      process.exitCode = (await work(db.pool, config, log)) ?? EXIT_OK;
    } finally {
      await db.close();
    }
  } catch (err) {
    process.exitCode = reportFailure(log, err, `${what} failed`);
  }
}
