/** `analytics-exporter rollup rebuild`: rebuilds records_hourly from records for ROLLUP_DIMENSIONS. */
import type { Command } from 'commander';
import { DataDirLockedError } from '../errors.js';
import { createLogger } from '../log.js';
import { EXIT_FAILURE, EXIT_OK } from './exit.js';
import { loadConfigForCommand } from './runtime.js';

/** Adds `rollup` and its subcommand `rebuild` to the program. */
export function registerRollupCommand(program: Command): void {
  const rollup = program.command('rollup').description('the hourly rollup records_hourly');
  rollup
    .command('rebuild')
    .description('rebuild records_hourly from records for ROLLUP_DIMENSIONS (waits for a running sync of the schema)')
    .action(async (_options: unknown, command: Command) => {
      const config = loadConfigForCommand(command);
      if (config === undefined) return;
      // Loaded only to run: --help and bad configuration answer without pg.
      const [{ openDatabase }, { rebuildRollup }] = await Promise.all([import('../app/runtime.js'), import('../app/derived.js')]);
      const log = createLogger(config.logLevel, { format: config.logFormat });
      try {
        const db = await openDatabase(config, log, 1);
        try {
          const rows = await rebuildRollup(db.pool, config, log);
          process.stdout.write(`rebuilt records_hourly: ${rows} rows\n`);
          process.exitCode = EXIT_OK;
        } finally {
          await db.close();
        }
      } catch (err) {
        if (err instanceof DataDirLockedError) log.error({ dataDir: err.dataDir, holder: err.holder ?? null }, err.message);
        else log.error({ err }, 'rollup rebuild failed');
        process.exitCode = EXIT_FAILURE;
      }
    });
}
