/** `analytics-exporter migrate`: applies pending migrations and rebuilds the rollup tables if their settings changed. */
import type { Command } from 'commander';
import { runDatabaseCommand } from './common.js';
import { formatMigration } from './format/schema.js';

/** Adds `migrate` to the program. */
export function registerMigrateCommand(program: Command): void {
  program
    .command('migrate')
    .description(
      'apply pending database migrations to DATABASE_SCHEMA, rebuild records_hourly and records_hourly_distinct if their ROLLUP_* settings changed, and exit (sync and serve do this at start too, unless MIGRATE=off)',
    )
    .addHelpText('after', '\nExit status: 0 done (the list of migrations applied on stdout), 1 the database failed, 2 bad configuration.')
    .action(async (_options: unknown, command: Command) => {
      await runDatabaseCommand(
        command,
        'migrate',
        async (pool, config, log) => {
          const { migrateDatabase } = await import('../app/schema.js');
          process.stdout.write(formatMigration(config.database.schema, await migrateDatabase(pool, config, log, { migrate: 'auto' })));
        },
        undefined,
        { locks: true },
      );
    });
}
