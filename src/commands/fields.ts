/** `analytics-exporter fields`: prints the field catalogue (record_fields) of DATABASE_SCHEMA. */
import type { Command } from 'commander';
import { runDatabaseCommand } from './runtime.js';

/** Adds `fields` to the program. */
export function registerFieldsCommand(program: Command): void {
  program
    .command('fields')
    .description('print the catalogue of record fields seen (types, records, first and last seen, example, records_typed column)')
    .option('--json', 'print JSON (one array of objects) instead of a table')
    .option(
      '--source <name>',
      "this source's fields only (repeatable; default: every source's, one row per source and field)",
      (name: string, names: string[]) => [...names, name],
      [],
    )
    .action(async (options: { json?: boolean; source: string[] }, command: Command) => {
      await runDatabaseCommand(command, 'fields', async (pool, config, log) => {
        const { formatFieldsTable, listFields } = await import('../app/derived.js');
        const fields = await listFields(pool, config, log, options.source.length > 0 ? options.source : undefined);
        process.stdout.write(options.json ? `${JSON.stringify(fields, null, 2)}\n` : formatFieldsTable(fields));
      });
    });
}
