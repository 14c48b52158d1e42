/**
 * The one-shot sync application: opens the database (migrating it) and the upstream, runs one
 * sync and closes both. The command (src/commands/sync.ts) parses flags, handles signals and
 * progress, and maps the outcome to an exit status.
 */
import type { Config } from '../config.js';
import { migrate } from '../db/migrate.js';
import type { Logger } from '../log.js';
import { runSync, type SyncObserver, type SyncOptions, type SyncResult } from '../sync/run.js';
import { openDatabase, openUpstream } from './runtime.js';

/**
 * Runs one sync of the configured source into the configured database.
 *
 * @returns the run's outcome ({@link runSync}).
 * @throws as {@link openDatabase} (a held DATA_DIR, a database that cannot be opened), the
 *   migrations, or {@link runSync} (bad `from`/`to`, the lock wait aborted, the database lost).
 */
export async function syncOnce(
  config: Config,
  log: Logger,
  options: Pick<SyncOptions, 'from' | 'to' | 'wait' | 'signal'> & { observer?: SyncObserver },
): Promise<SyncResult> {
  const db = await openDatabase(config, log, 2);
  try {
    await migrate(db.pool, config.database.schema, log);
    const upstream = await openUpstream(config, log);
    try {
      const { observer, ...runOptions } = options;
      return await runSync(
        { pool: db.pool, client: upstream.client, config: config.sources[0]!.sync, schema: config.database.schema, log, ...(observer ? { observer } : {}) },
        runOptions,
      );
    } finally {
      await upstream.close();
    }
  } finally {
    await db.close();
  }
}
