/**
 * `verify`: each chosen source audited in turn with its own upstream client and logger. The
 * command maps the outcomes to an exit status. Design: docs/design/audit.md.
 */
import type { Config } from '../config.js';
import { coerceError } from '../errors.js';
import type { Logger } from '../log.js';
import { sourceSyncDeps } from '../sync/run/context.js';
import { auditSource, type AuditOptions, type AuditResult } from '../sync/audit/source.js';
import { requireMigrated } from '../db/migrate.js';
import { migrateDatabase } from './schema.js';
import { openDatabase, openSourceUpstream } from './runtime.js';
import { selectSources } from './sources.js';

/** `error`: E6 or the database failing, a signal. */
export interface AuditOutcome {
  source: string;
  log: Logger;
  result?: AuditResult;
  error?: Error;
}

/**
 * A failing source does not stop the others. @returns one outcome per source, in configuration order.
 * @throws {InvalidArgumentError} for an unknown `--source`, before anything is opened; as openDatabase or the migrations
 *   ({@link PendingMigrationsError} without `repair` when one is pending).
 */
export async function auditSources(config: Config, log: Logger, options: Omit<AuditOptions, 'now'> & { sources?: readonly string[] }): Promise<AuditOutcome[]> {
  const sources = selectSources(config, options.sources);
  // One connection for the comparison's lock, one for a repair run, one for its lock-wait watch.
  const db = await openDatabase(config, log, 3, undefined, { locks: options.repair === true });
  try {
    // Without --repair it reads only: no migration, no rollup rebuild.
    if (options.repair) await migrateDatabase(db.pool, config, log, options.signal ? { signal: options.signal } : {});
    else await requireMigrated(db.pool, config.database.schema);
    const { sources: _names, ...auditOptions } = options;
    const outcomes: AuditOutcome[] = [];
    for (const source of sources) {
      const sourceLog = log.child({ source: source.name });
      try {
        const upstream = await openSourceUpstream(source, sourceLog);
        try {
          const deps = sourceSyncDeps(config, source, { store: db.store.forSource(source.name, sourceLog), client: upstream.client, log: sourceLog });
          outcomes.push({ source: source.name, log: sourceLog, result: await auditSource(deps, auditOptions) });
        } finally {
          await upstream.close();
        }
      } catch (err) {
        outcomes.push({ source: source.name, log: sourceLog, error: coerceError(err) });
      }
    }
    return outcomes;
  } finally {
    await db.close();
  }
}
