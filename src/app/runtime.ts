/**
 * What every long-running command opens and closes, as the application layer: the database
 * (DATABASE_URL or the embedded one) and the upstream client (the platform or the demo simulator).
 */
import { setTimeout as delay } from 'node:timers/promises';
import type { Config, SourceConfig, UpstreamConfig } from '../config.js';
import type { DataDirLock } from '../db/datadir-lock.js';
import { createPool, type Pool } from '../db/pool.js';
import { requireOwnSessions } from '../db/pooler.js';
import { SharedServersError } from '../errors.js';
import { PLAIN_TLS, readDatabaseTls } from '../db/tls.js';
import { startDemoUpstream } from '../demo.js';
import type { Logger } from '../log.js';
import { PgStore } from '../sync/store/pg/store.js';
import { AnalyticsClient, type ClientObserver } from '../upstream/analytics.js';
import { clockSkewBoundMs } from '../upstream/clock.js';

export { DRAIN_TIMEOUT_MS } from './drain.js';

export interface Database {
  pool: Pool;
  /** DATABASE_SCHEMA's tables. */
  store: PgStore;
  embedded: boolean;
  close(): Promise<void>;
}

/** What the command opening the database does with it. */
export interface OpenOptions {
  /** Takes advisory locks or writes: a DATABASE_URL behind transaction or statement pooling is refused. */
  locks?: boolean;
}

/**
 * DATABASE_URL, or the embedded database under DATA_DIR when it is unset.
 * @param lock DATA_DIR when the caller locked it already; otherwise the embedded database locks it.
 * @throws {DataDirLockedError} when another process holds DATA_DIR; {@link DatabaseOpenError}
 *   (`ERR_DATABASE`) when the embedded database cannot be opened; `DatabaseError` for a pooler
 *   sharing server connections when `options.locks` (src/db/pooler.ts).
 */
export async function openDatabase(config: Config, log: Logger, maxConnections = 4, lock?: DataDirLock, options: OpenOptions = {}): Promise<Database> {
  if (config.database.url !== undefined) {
    const target = { url: config.database.url, tls: readDatabaseTls(config.database.tls) };
    if (options.locks === true) await requireOwnSessions(target, log);
    const pool = createPool(target, log, { max: maxConnections });
    return { pool, store: storeOf(pool, config, log), embedded: false, close: () => pool.end() };
  }
  // Loaded here, so that a process with DATABASE_URL never loads PGlite.
  const { startEmbeddedDatabase } = await import('../db/embedded.js');
  const embedded = await startEmbeddedDatabase(config.database.dataDir, log, lock);
  // A loopback port of this process: nothing to encrypt, and PGlite speaks no TLS.
  const pool = createPool({ url: embedded.url, tls: PLAIN_TLS }, log, { max: Math.min(maxConnections, 4) });
  return {
    pool,
    store: storeOf(pool, config, log),
    embedded: true,
    close: async () => {
      await pool.end().catch(() => undefined);
      await embedded.close();
    },
  };
}

/** How long `serve` waits for the pooling probe before it starts anyway (its opening probes again). */
const SERVE_PROBE_WAIT_MS = 3_000;

/**
 * For `serve` before it starts: DATABASE_URL behind transaction or statement pooling refused at
 * once. A database not reached within {@link SERVE_PROBE_WAIT_MS} is left to serve's own opening.
 * @throws {SharedServersError} naming the pooling mode and the fix.
 */
export async function refuseSharedServers(config: Config, log: Logger): Promise<void> {
  if (config.database.url === undefined) return;
  const probe = requireOwnSessions({ url: config.database.url, tls: readDatabaseTls(config.database.tls) }, log).then(
    () => undefined,
    (err: unknown) => (err instanceof SharedServersError ? err : undefined),
  );
  const refused = await Promise.race([probe, delay(SERVE_PROBE_WAIT_MS, undefined, { ref: false })]);
  if (refused !== undefined) throw refused;
}

export function storeOf(pool: Pool, config: Config, log: Logger): PgStore {
  const lockWaits = { watch: config.database.url !== undefined, timeoutMs: config.database.lockTimeoutMs };
  return new PgStore({ pool, schema: config.database.schema, tables: config.tables, log, lockWaits });
}

export interface Upstream {
  client: AnalyticsClient;
  demo: boolean;
  close(): Promise<void>;
}

/** The source's platform, or the in-process demo simulator for the source without STATISTICS_URL. */
export async function openSourceUpstream(source: SourceConfig, log: Logger, observer?: ClientObserver): Promise<Upstream> {
  const demo = source.upstream === undefined ? await startDemoUpstream(log, source.demo) : undefined;
  const client = AnalyticsClient.fromConfig(source.upstream ?? demo!.config, {
    log,
    clockSkewBoundMs: clockSkewBoundMs(source.sync.settleMs),
    ...(observer ? { observer } : {}),
  });
  return {
    client,
    demo: demo !== undefined,
    close: async () => {
      await client.close();
      await demo?.close();
    },
  };
}

export interface SourceClient {
  source: SourceConfig;
  client: AnalyticsClient;
}

export interface Upstreams {
  /** In configuration order. */
  sources: SourceClient[];
  demo: boolean;
  close(): Promise<void>;
}

/**
 * One client per source, each with its own token cache and request budget (E0, Limits); the demo
 * simulator started once. @throws when the demo simulator cannot start; clients connect lazily.
 */
export async function openUpstreams(config: Config, log: Logger, observerFor?: (source: string) => ClientObserver): Promise<Upstreams> {
  const demoSource = config.sources.find((source) => source.upstream === undefined);
  const demo = demoSource === undefined ? undefined : await startDemoUpstream(log, demoSource.demo);
  const sources = config.sources.map((source) => ({
    source,
    client: sourceClient(source, source.upstream ?? demo!.config, log, observerFor?.(source.name)),
  }));
  return {
    sources,
    demo: demo !== undefined,
    close: async () => {
      await Promise.allSettled(sources.map(({ client }) => client.close()));
      await demo?.close();
    },
  };
}

/** Its own token cache, connections, request budget (E0, Limits) and clock watch; also serve's reload. Connects lazily. */
export function sourceClient(source: Pick<SourceConfig, 'name' | 'sync'>, upstream: UpstreamConfig, log: Logger, observer?: ClientObserver): AnalyticsClient {
  const client = AnalyticsClient.fromConfig(upstream, {
    log: log.child({ source: source.name }),
    clockSkewBoundMs: clockSkewBoundMs(source.sync.settleMs),
    ...(observer ? { observer } : {}),
  });
  // Without a request budget nothing reports a pace: the gauge says 0, as documented.
  if (upstream.rateLimit === undefined) observer?.onRateLimit?.(0);
  return client;
}
