#!/usr/bin/env node
/** Command-line entry: argument parsing and dispatch to commands. Exit 0 success, 1 failure, 2 bad usage. */
import { realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Command, CommanderError } from 'commander';
import { EXIT_USAGE } from './commands/exit.js';
import { registerCheckCommand } from './commands/check.js';
import { addSettingOptions, commandsFirstHelp, MORE_SETTINGS_HELP } from './commands/options.js';
import { registerFieldsCommand } from './commands/fields.js';
import { registerMigrateCommand } from './commands/migrate.js';
import { registerRollupCommand } from './commands/rollup.js';
import { registerServeCommand } from './commands/serve.js';
import { registerStateCommand } from './commands/state.js';
import { loadSimulateCommand, registerSimulateCommand } from './commands/simulate.js';
import { registerSyncCommand } from './commands/sync.js';
import { registerVerifyCommand } from './commands/verify.js';
import { limitHeapGrowth } from './heap.js';
import { clearSecrets, maskWrites } from './redact.js';
import { VERSION } from './version.js';

/** Builds the program (tests drive it in-process); without `configureSimulate`, `simulate` is only listed. */
export function buildProgram(configureSimulate?: (command: Command) => void): Command {
  const program = new Command('analytics-exporter')
    .description('Prometheus exporter and exactly-once PostgreSQL ETL for the forms platform analytics API')
    .configureHelp({ showGlobalOptions: true, sortSubcommands: true, formatHelp: commandsFirstHelp })
    .showHelpAfterError('(run with --help for usage)')
    .exitOverride();
  addSettingOptions(program);
  program.version(VERSION);
  program.addHelpText(
    'after',
    [
      '',
      MORE_SETTINGS_HELP,
      'Secrets have no flag (command lines show in ps): set CLIENT_SECRET or CLIENT_SECRET_FILE.',
      '',
      'Exit status: 0 success, 1 failure, 2 bad usage or configuration.',
    ].join('\n'),
  );

  registerCheckCommand(program);
  registerSimulateCommand(program, configureSimulate);
  registerSyncCommand(program);
  registerVerifyCommand(program);
  registerServeCommand(program);
  registerMigrateCommand(program);
  registerRollupCommand(program);
  registerFieldsCommand(program);
  registerStateCommand(program);
  for (const sub of program.commands) {
    for (const command of [sub, ...sub.commands]) command.exitOverride().addHelpText('after', `\n${MORE_SETTINGS_HELP}`);
  }
  return program;
}

/** Runs the CLI on `argv` (without node and script), stdout and stderr masked first. Resolves with the exit status. */
export async function main(argv: string[]): Promise<number> {
  // An in-process run starts with no secret registered, as a process does.
  clearSecrets();
  maskWrites(process.stdout);
  maskWrites(process.stderr);
  // The simulator is loaded only for a command line that may run it.
  const program = buildProgram(argv.includes('simulate') ? await loadSimulateCommand() : undefined);
  try {
    await program.parseAsync(argv, { from: 'user' });
    return typeof process.exitCode === 'number' ? process.exitCode : 0;
  } catch (err) {
    if (err instanceof CommanderError) {
      return err.exitCode === 0 ? 0 : EXIT_USAGE;
    }
    throw err;
  }
}

/** Whether this file is the entry point, directly or through the npm bin symlink. */
function isEntryPoint(): boolean {
  const script = process.argv[1];
  if (script === undefined) return false;
  try {
    return realpathSync(script) === fileURLToPath(import.meta.url);
  } catch {
    return false;
  }
}

if (isEntryPoint()) {
  limitHeapGrowth();
  // `analytics-exporter --help | head` closes the pipe early: that is the reader's choice, not an error.
  for (const stream of [process.stdout, process.stderr]) {
    stream.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code === 'EPIPE') process.exit(process.exitCode ?? 0);
      throw err;
    });
  }
  main(process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code;
    },
    (err: unknown) => {
      process.stderr.write(`analytics-exporter: unexpected error: ${(err as Error)?.stack ?? String(err)}\n`);
      process.exitCode = 1;
    },
  );
}
