/**
 * The configuration as a command loads it (exit status 2 on a broken rule). What a command then
 * opens lives in the application layer, src/app/runtime.ts.
 */
import type { Command } from 'commander';
import { loadConfig, type Config } from '../config.js';
import { ConfigError } from '../errors.js';
import { EXIT_USAGE } from './exit.js';
import { configOverrides } from './options.js';

/**
 * Loads the configuration for a command; on a broken rule prints it to stderr, sets exit
 * status 2 and returns undefined.
 */
export function loadConfigForCommand(command: Command): Config | undefined {
  try {
    return loadConfig(process.env, configOverrides(command));
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    process.stderr.write(`analytics-exporter: invalid configuration: ${err.message}\n`);
    process.exitCode = EXIT_USAGE;
    return undefined;
  }
}
