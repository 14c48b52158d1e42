/** `analytics-exporter rollup rebuild`: rebuilds records_hourly from records for ROLLUP_DIMENSIONS. */
import type { Command } from 'commander';
import { runDatabaseCommand } from './runtime.js';

/** Adds `rollup` and its subcommand `rebuild` to the program. */
export function registerRollupCommand(program: Command): void {
  const rollup = program.command('rollup').description('the hourly rollup records_hourly');
  rollup
    .command('rebuild')
    .description('rebuild records_hourly from records for ROLLUP_DIMENSIONS (waits for a running sync of the schema)')
    .action(async (_options: unknown, command: Command) => {
      await runDatabaseCommand(command, 'rollup rebuild', async (pool, config, log) => {
        const { rebuildRollup } = await import('../app/derived.js');
        const rows = await rebuildRollup(pool, config, log);
        process.stdout.write(`rebuilt records_hourly: ${rows} rows\n`);
      });
    });
}
