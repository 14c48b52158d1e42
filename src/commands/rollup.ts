/** `analytics-exporter rollup rebuild`: rebuilds records_hourly and records_hourly_distinct from records for the ROLLUP_* settings. */
import type { Command } from 'commander';
import { runDatabaseCommand } from './common.js';
import { formatRollupRebuild } from './format/schema.js';

/** Adds `rollup` and its subcommand `rebuild` to the program. */
export function registerRollupCommand(program: Command): void {
  const rollup = program.command('rollup').description('the rollup tables records_hourly and records_hourly_distinct (with records_daily_distinct)');
  rollup
    .command('rebuild')
    .description(
      'rebuild records_hourly and records_hourly_distinct from records for ROLLUP_DIMENSIONS and ROLLUP_DISTINCT (waits for a running sync of the schema)',
    )
    .addHelpText('after', '\nExit status: 0 rebuilt (rows per table on stdout), 1 the database failed, 2 bad configuration.')
    .action(async (_options: unknown, command: Command) => {
      await runDatabaseCommand(
        command,
        'rollup rebuild',
        async (pool, config, log) => {
          const { rebuildRollup } = await import('../app/schema.js');
          process.stdout.write(formatRollupRebuild(await rebuildRollup(pool, config, log)));
        },
        undefined,
        { locks: true },
      );
    });
}
