#!/usr/bin/env node
/**
 * `analytics-simulator`: the simulator as a program of its own (the exporter's `simulate` runs the
 * same command line). Exit status: 0 after a clean stop, 1 when it cannot listen, 2 for bad usage.
 */
import { Command, CommanderError, Option } from 'commander';
import { configureSimulateCommand } from './cli.js';
import { EXIT_FAILURE, EXIT_USAGE } from './exit.js';
import { LOG_FORMATS, LOG_LEVELS } from './log.js';

const program = new Command('analytics-simulator')
  .description('simulator of the platform token endpoint (E0) and analytics API (E6, E7) with demo data, until SIGINT/SIGTERM')
  .showHelpAfterError('(run with --help for usage)')
  .exitOverride()
  .addOption(new Option('--log-level <level>', 'pino level (default info) [env LOG_LEVEL]').choices(LOG_LEVELS))
  .addOption(new Option('--log-format <format>', 'auto (pretty on a terminal), json or pretty [env LOG_FORMAT]').choices(LOG_FORMATS));
configureSimulateCommand(program);

// `analytics-simulator --help | head` closes the pipe early: that is the reader's choice, not an error.
for (const stream of [process.stdout, process.stderr]) {
  stream.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code === 'EPIPE') process.exit(process.exitCode ?? 0);
    throw err;
  });
}

program.parseAsync(process.argv).catch((err: unknown) => {
  if (err instanceof CommanderError) {
    // Help ends the parse through the same path with exit code 0.
    process.exitCode = err.exitCode === 0 ? 0 : EXIT_USAGE;
    return;
  }
  process.stderr.write(`analytics-simulator: unexpected error: ${(err as Error)?.stack ?? String(err)}\n`);
  process.exitCode = EXIT_FAILURE;
});
