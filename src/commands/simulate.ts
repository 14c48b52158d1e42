/**
 * `analytics-exporter simulate`: the simulator is a package of its own (packages/simulator,
 * @analytics-exporter/simulator, with its own program `analytics-simulator`); this command runs
 * the same command line where the package is installed (a development install). This module names
 * the command, so that the command list shows it, and loads the package's command line only when a
 * command line names `simulate` (see main in src/cli.ts).
 */
import type { Command } from 'commander';
import { importSimulator, SIMULATOR_PACKAGE } from '../demo.js';
import { EXIT_USAGE } from './exit.js';

const SIMULATE_DESCRIPTION = 'run the demo simulator of the token endpoint (E0) and analytics API (E6, E7) with demo data, until SIGINT/SIGTERM';

/**
 * Adds `simulate` to `program`.
 *
 * @param configure gives it its flags, help and action ({@link loadSimulateCommand}); without it
 *   the command is only listed.
 */
export function registerSimulateCommand(program: Command, configure?: (command: Command) => void): void {
  const command = program.command('simulate').description(SIMULATE_DESCRIPTION);
  configure?.(command);
}

/**
 * The simulator package's command line (its flags, help and action) for `simulate`; where the
 * package is not installed (a production install, the image), an action that says so on stderr
 * and sets exit status 2.
 */
export async function loadSimulateCommand(): Promise<(command: Command) => void> {
  const simulator = await importSimulator();
  if (simulator !== undefined) return simulator.configureSimulateCommand;
  return (command) => {
    command.allowUnknownOption().allowExcessArguments();
    command.action(() => {
      process.stderr.write(
        `analytics-exporter simulate: the demo simulator (${SIMULATOR_PACKAGE}) is not installed: it is a development dependency (npm install without --omit=dev); the image runs it from its own build target (docker build --target simulator)\n`,
      );
      process.exitCode = EXIT_USAGE;
    });
  };
}
