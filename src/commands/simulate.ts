/**
 * `analytics-exporter simulate`: the built-in simulator is a program of its own (src/simulator/,
 * its command line in src/simulator/cli.ts). This module only names the command, so that the
 * command list shows it; the CLI loads the simulator and its flags when a command line names
 * `simulate` (see main in src/cli.ts).
 */
import type { Command } from 'commander';

export const SIMULATE_DESCRIPTION = 'run the built-in simulator of the token endpoint (E0) and analytics API (E6, E7) with demo data, until SIGINT/SIGTERM';

/**
 * Adds `simulate` to `program`.
 *
 * @param configure gives it its flags, help and action (`configureSimulateCommand` of
 *   src/simulator/cli.ts); without it the command is only listed.
 */
export function registerSimulateCommand(program: Command, configure?: (command: Command) => void): void {
  const command = program.command('simulate').description(SIMULATE_DESCRIPTION);
  configure?.(command);
}
