/** `analytics-exporter fields`: prints the field catalogue (record_fields) of DATABASE_SCHEMA. */
import type { Command } from 'commander';
import { DataDirLockedError } from '../errors.js';
import { createLogger } from '../log.js';
import { EXIT_FAILURE, EXIT_OK } from './exit.js';
import { loadConfigForCommand } from './runtime.js';

/** Adds `fields` to the program. */
export function registerFieldsCommand(program: Command): void {
  program
    .command('fields')
    .description('print the catalogue of record fields seen (types, records, first and last seen, example, records_typed column)')
    .option('--json', 'print JSON (one array of objects) instead of a table')
    .action(async (options: { json?: boolean }, command: Command) => {
      const config = loadConfigForCommand(command);
      if (config === undefined) return;
      // Loaded only to run: --help and bad configuration answer without pg.
      const [{ openDatabase }, { formatFieldsTable, listFields }] = await Promise.all([import('../app/runtime.js'), import('../app/derived.js')]);
      const log = createLogger(config.logLevel, { format: config.logFormat });
      try {
        const db = await openDatabase(config, log, 1);
        try {
          const fields = await listFields(db.pool, config, log);
          process.stdout.write(options.json ? `${JSON.stringify(fields, null, 2)}\n` : formatFieldsTable(fields));
          process.exitCode = EXIT_OK;
        } finally {
          await db.close();
        }
      } catch (err) {
        if (err instanceof DataDirLockedError) log.error({ dataDir: err.dataDir, holder: err.holder ?? null }, err.message);
        else log.error({ err }, 'fields failed');
        process.exitCode = EXIT_FAILURE;
      }
    });
}
