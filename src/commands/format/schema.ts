/** What `migrate` and `rollup rebuild` print. Pure text. */

/** `applied: 001_init, 002_…` or `schema <schema> is up to date`, then a line when the rollup tables were rebuilt; with newlines. */
export function formatMigration(schema: string, migration: { applied: readonly string[]; rollupRebuilt: boolean }): string {
  const applied = migration.applied.length > 0 ? `applied: ${migration.applied.join(', ')}\n` : `schema ${schema} is up to date\n`;
  return migration.rollupRebuilt ? `${applied}rebuilt the rollup tables for the ROLLUP_* settings\n` : applied;
}

/** One line per rollup table: `rebuilt records_hourly: 120 rows`, or `dropped …: not configured` for a table without settings (undefined rows). */
export function formatRollupRebuild(rows: { hourly: number | undefined; distinct: number | undefined }): string {
  const line = (table: string, n: number | undefined) => (n === undefined ? `dropped ${table}: not configured\n` : `rebuilt ${table}: ${n} rows\n`);
  return line('records_hourly', rows.hourly) + line('records_hourly_distinct', rows.distinct);
}
