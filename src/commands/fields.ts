/** `analytics-exporter fields`: prints the field catalogue (record_fields) of DATABASE_SCHEMA. */
import type { Command } from 'commander';
import { selectSources } from '../app/sources.js';
import { runDatabaseCommand } from './common.js';

/** Adds `fields` to the program. */
export function registerFieldsCommand(program: Command): void {
  program
    .command('fields')
    .description('print the catalogue of record fields seen (types, records, first and last seen, example, records_typed column)')
    .option('--json', 'print JSON (one array of objects) instead of a table')
    .option(
      '--source <name>',
      "this configured source's fields only (repeatable; default: every source's, one row per source and field)",
      (name: string, names: string[] | undefined) => [...(names ?? []), name],
    )
    .addHelpText(
      'after',
      '\nExit status: 0 printed (an empty catalogue included), 1 the database failed, 2 bad usage, such as a --source that is not configured.',
    )
    .action(async (options: { json?: boolean; source?: string[] }, command: Command) => {
      const names = options.source ?? [];
      await runDatabaseCommand(
        command,
        'fields',
        async (pool, config, log) => {
          const { formatFieldsTable, listFields } = await import('../app/schema.js');
          const fields = await listFields(pool, config, log, names.length > 0 ? names : undefined);
          process.stdout.write(options.json ? `${JSON.stringify(fields, null, 2)}\n` : formatFieldsTable(fields));
        },
        // A misspelt name would print an empty catalogue and exit 0, as if the source had no records yet.
        (config) => void selectSources(config, names),
      );
    });
}
