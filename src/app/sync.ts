/**
 * `sync`: one run of each chosen source, at most SYNC_SOURCE_CONCURRENCY at once, each with its own
 * upstream client and logger, then RETENTION once. The command maps the outcomes to an exit status.
 * Design: docs/design/sync-run.md.
 */
import type { Config } from '../config.js';
import { coerceError } from '../errors.js';
import type { Logger } from '../log.js';
import { sourceSyncDeps } from '../sync/run/context.js';
import { applyRetention, runSync, type SyncObserver, type SyncOptions, type SyncResult } from '../sync/run/run.js';
import type { PgStore } from '../sync/store/pg/store.js';
import { migrateDatabase } from './schema.js';
import { openDatabase, openSourceUpstream } from './runtime.js';
import { selectSources } from './sources.js';

export interface SourceOutcome {
  source: string;
  log: Logger;
  result?: SyncResult;
  /** Thrown outside the run: a bad --from/--to, the lock wait aborted, the database lost. */
  error?: Error;
}

/** At most `limit` at once, results in the items' order. `fn` must not reject. */
async function mapBounded<T, R>(items: readonly T[], limit: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const i = next++;
      results[i] = await fn(items[i]!);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return results;
}

/**
 * A failing source neither stops nor delays the others.
 * @returns one outcome per source, in configuration order.
 * @throws {InvalidArgumentError} for an unknown `--source`, before anything is opened; as
 *   {@link openDatabase} or the migrations.
 */
export async function syncSources(
  config: Config,
  log: Logger,
  options: Pick<SyncOptions, 'from' | 'to' | 'wait' | 'signal'> & { sources?: readonly string[]; observer?: (source: string) => SyncObserver | undefined },
): Promise<SourceOutcome[]> {
  const sources = selectSources(config, options.sources);
  const concurrency = Math.min(config.syncSourceConcurrency, sources.length);
  const db = await openDatabase(config, log, concurrency + 1, undefined, { locks: true });
  try {
    // The rollup before the sources start, rather than their first runs contending for its lock.
    await migrateDatabase(db.pool, config, log, options.signal ? { signal: options.signal } : {});
    const { observer: observerOf, sources: _names, ...runOptions } = options;
    const outcomes = await mapBounded(sources, concurrency, async (source): Promise<SourceOutcome> => {
      const sourceLog = log.child({ source: source.name });
      const observer = observerOf?.(source.name);
      try {
        const upstream = await openSourceUpstream(source, sourceLog);
        try {
          const store = db.store.forSource(source.name, sourceLog, (wait) => observer?.lockWaited?.(wait));
          const deps = sourceSyncDeps(config, source, { store, client: upstream.client, log: sourceLog, observer });
          const result = await runSync(deps, { ...runOptions, retention: false });
          return { source: source.name, log: sourceLog, result };
        } finally {
          await upstream.close();
        }
      } catch (err) {
        return { source: source.name, log: sourceLog, error: coerceError(err) };
      }
    });
    await retentionAfter({ store: db.store, config, log, signal: options.signal }, outcomes);
    return outcomes;
  } finally {
    await db.close();
  }
}

/** Unless none ran or a signal interrupted one. Never throws: a failure is logged. */
async function retentionAfter(
  on: { store: PgStore; config: Config; log: Logger; signal: AbortSignal | undefined },
  outcomes: readonly SourceOutcome[],
): Promise<void> {
  const { store, config, log, signal } = on;
  const retentionMs = config.tables.retentionMs;
  const ran = outcomes.flatMap((o) => (o.result !== undefined && o.result.status !== 'locked' ? [o.result] : []));
  if (retentionMs === undefined || ran.length === 0 || ran.some((r) => r.status === 'interrupted') || signal?.aborted) return;
  const schema = config.database.schema;
  try {
    await store.session((session) =>
      applyRetention(
        { schema, log },
        { lock: (name, lock, fn) => session.lock(name, lock, fn), maintenance: session.maintenance() },
        { runIds: ran.map((r) => r.runId), cutoff: Date.now() - retentionMs },
        { wait: true, ...(signal ? { signal } : {}) },
      ),
    );
  } catch (err) {
    log.warn({ err: coerceError(err) }, 'retention could not run; nothing was dropped, the next run tries again');
  }
}
