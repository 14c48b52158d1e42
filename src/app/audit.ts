/**
 * The one-shot audit application (`verify`): opens the database (migrating it), audits each chosen
 * source in turn with its own upstream client and logger (src/sync/audit/source.ts auditSource), and
 * closes everything. The command (src/commands/verify.ts) parses flags, handles signals and maps
 * the outcomes to an exit status.
 */
import type { Config } from '../config.js';
import { coerceError } from '../errors.js';
import type { Logger } from '../log.js';
import { sourceSyncDeps } from '../sync/run/context.js';
import { auditSource, type AuditOptions, type AuditResult } from '../sync/audit/source.js';
import { migrateDatabase } from './schema.js';
import { openDatabase, openSourceUpstream } from './runtime.js';
import { selectSources } from './sources.js';

/** One source's audit: its result, or what stopped it (E6 or the database failing, a signal). */
export interface AuditOutcome {
  source: string;
  log: Logger;
  result?: AuditResult;
  error?: Error;
}

/**
 * Audits each source of `options.sources` (default: all), one after the other; a failing source
 * does not stop the others.
 *
 * @returns one outcome per source, in configuration order.
 * @throws {InvalidArgumentError} for an unknown `--source` name, before anything is opened; as
 *   openDatabase or the migrations.
 */
export async function auditSources(config: Config, log: Logger, options: Omit<AuditOptions, 'now'> & { sources?: readonly string[] }): Promise<AuditOutcome[]> {
  const sources = selectSources(config, options.sources);
  // One connection for the comparison's lock, one for a repair run.
  const db = await openDatabase(config, log, 2);
  try {
    await migrateDatabase(db.pool, config, log, options.signal ? { signal: options.signal } : {});
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
