/**
 * `analytics-exporter simulate`: the command line of the simulator package (packages/simulator),
 * where it is installed. Listed always; the package is loaded only when `simulate` is named.
 */
import type { Command } from 'commander';
import { importSimulator, SIMULATOR_PACKAGE } from '../demo.js';
import { EXIT_USAGE } from './exit.js';

const SIMULATE_DESCRIPTION = 'run the demo simulator of the token endpoint (E0) and analytics API (E6, E7) with demo data, until SIGINT/SIGTERM';

/** Adds `simulate`; without `configure` ({@link loadSimulateCommand}) it is only listed. */
export function registerSimulateCommand(program: Command, configure?: (command: Command) => void): void {
  const command = program.command('simulate').description(SIMULATE_DESCRIPTION);
  configure?.(command);
}

/** The simulator package's flags, help and action; where it is not installed, an action that exits 2 saying so. */
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
