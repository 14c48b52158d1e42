/**
 * `analytics-exporter migrate`: applies pending migrations, rebuilds records_hourly when
 * ROLLUP_DIMENSIONS changed, and exits (sync and serve also do both at start).
 */
import type { Command } from 'commander';
import { DataDirLockedError } from '../errors.js';
import { createLogger } from '../log.js';
import { EXIT_FAILURE, EXIT_OK } from './exit.js';
import { loadConfigForCommand } from './runtime.js';

/** Adds `migrate` to the program. */
export function registerMigrateCommand(program: Command): void {
  program
    .command('migrate')
    .description(
      'apply pending database migrations to DATABASE_SCHEMA, rebuild records_hourly if ROLLUP_DIMENSIONS changed, and exit (sync and serve do this at start too)',
    )
    .action(async (_options: unknown, command: Command) => {
      const config = loadConfigForCommand(command);
      if (config === undefined) return;
      // Loaded only to run: --help and bad configuration answer without pg and the migration runner.
      const [{ openDatabase }, { migrateDatabase }] = await Promise.all([import('../app/runtime.js'), import('../app/derived.js')]);
      const log = createLogger(config.logLevel, { format: config.logFormat });
      try {
        const db = await openDatabase(config, log, 1);
        try {
          const { applied, rollupRebuilt } = await migrateDatabase(db.pool, config, log);
          process.stdout.write(applied.length > 0 ? `applied: ${applied.join(', ')}\n` : `schema ${config.database.schema} is up to date\n`);
          if (rollupRebuilt) process.stdout.write('rebuilt records_hourly for ROLLUP_DIMENSIONS\n');
          process.exitCode = EXIT_OK;
        } finally {
          await db.close();
        }
      } catch (err) {
        if (err instanceof DataDirLockedError) log.error({ dataDir: err.dataDir, holder: err.holder ?? null }, err.message);
        else log.error({ err }, 'migrate failed');
        process.exitCode = EXIT_FAILURE;
      }
    });
}
