/**
 * `serve` as an object with a lifecycle: the HTTP server and each source's schedules in one
 * process, the database opened in the background and its health tracked; with nothing configured,
 * the demo simulator and the embedded database. States: starting, migrating, ready, stopping,
 * stopped. Each resource goes on a {@link TeardownStack} as it is acquired, so a stop at any moment
 * releases exactly what is held, in reverse. See docs/design/serve-lifecycle.md.
 */
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { DataDirLockedError, PendingMigrationsError } from '../errors.js';
import { requireMigrated } from '../db/migrate.js';
import { lockDataDir, type DataDirLock } from '../db/datadir-lock.js';
import { isDatabaseUnavailable } from '../failures.js';
import type { Logger } from '../log.js';
import { ExporterMetrics } from '../metrics/registry.js';
import type { SyncScheduler } from './cron.js';
import type { Config } from '../config.js';
import { settledWithin } from '../settle.js';
import { DRAIN_TIMEOUT_MS, openDatabase, openUpstreams, type Database, type SourceClient } from '../app/runtime.js';
import { ServeDatabase } from './database.js';
import { createMetricsServer } from './http.js';
import { E7Scraper } from './scrape.js';
import { ServeSources, type ReloadResult } from './sources.js';
import { nextState, type ServeState } from './lifecycle-state.js';
import { TeardownStack } from './teardown.js';
import { readWebConfigSetting, WebConfigSource, type WebConfig } from './web/webconfig.js';

export type { ServeState } from './lifecycle-state.js';
export type { ReloadResult } from './sources.js';

/** How long requests in flight get at a stop before their connections are cut. */
const HTTP_DRAIN_TIMEOUT_MS = 3_000;
/** Bound on closing the upstream clients and the database at shutdown, each. */
const CLOSE_TIMEOUT_MS = 2_000;

/** A running `serve`. */
export interface RunningServer {
  url: string;
  readonly state: ServeState;
  /** The first source's sync schedule. */
  scheduler: SyncScheduler;
  /** Every source's sync schedule, by source name. */
  schedulers: ReadonlyMap<string, SyncScheduler>;
  metrics: ExporterMetrics;
  /**
   * Reads CONFIG_FILE again and applies its sources after earlier reloads; `trigger` (`SIGHUP`,
   * `http`) is logged. Never throws; a 503 while starting or stopping.
   */
  reload(trigger: string): Promise<ReloadResult>;
  /**
   * Stops accepting connections, aborts the sync (its open window rolls back) and closes
   * everything, each within its bound. Idempotent. `drained: false`: something was still busy at
   * its bound and finishes in the background; a process should exit rather than wait.
   */
  stop(): Promise<{ drained: boolean }>;
}

/**
 * MIGRATE=off: a pending migration stops the start (exit 1), as it does every other command's. A
 * database that cannot be opened or read is left to /readyz and the health tracker.
 * @throws {PendingMigrationsError}
 */
async function refusePendingMigrations(opening: Promise<Database>, schema: string): Promise<void> {
  const db = await opening.catch(() => undefined);
  if (db === undefined) return;
  await requireMigrated(db.pool, schema).catch((err: unknown) => {
    if (err instanceof PendingMigrationsError) throw err;
  });
}

/** `serve`'s lifecycle. Most callers want {@link startServe}. */
export class Serve implements RunningServer {
  readonly metrics: ExporterMetrics;
  readonly schedulers = new Map<string, SyncScheduler>();
  readonly #config: Config;
  readonly #log: Logger;
  readonly #teardown: TeardownStack;
  #state: ServeState = 'starting';
  #url: string | undefined;
  #stopping: Promise<{ drained: boolean }> | undefined;
  readonly #load: () => Config;
  #sources: ServeSources | undefined;

  /** @param load reads the configuration again for a reload; default: the start's, so a reload changes nothing. */
  constructor(config: Config, log: Logger, load: () => Config = () => config) {
    this.#config = config;
    this.#load = load;
    this.#log = log;
    this.metrics = new ExporterMetrics({ cacheTtlMs: config.serve.cacheTtlMs });
    this.#teardown = new TeardownStack({
      onError: (resource, err) => log.warn({ resource, err }, `closing ${resource} failed`),
    });
  }

  get state(): ServeState {
    return this.#state;
  }

  /** The base URL served, `http(s)://host:port`. @throws before the server listens. */
  get url(): string {
    if (this.#url === undefined) throw new Error('serve is not listening yet');
    return this.#url;
  }

  get scheduler(): SyncScheduler {
    return this.schedulers.get((this.#sources?.sources ?? this.#config.sources)[0]!.name)!;
  }

  /** Resources held, oldest first (for tests). */
  get held(): string[] {
    return this.#teardown.held;
  }

  /**
   * Acquires everything and starts serving; the database opens and migrates in the background.
   * Call once. Faults after the start show in /metrics and /readyz, never as throws.
   *
   * @throws {ConfigError} (WEB_CONFIG_FILE), {@link DataDirLockedError}, the listen error, or an
   *   Error when {@link stop} came first; what was acquired is released first.
   */
  async start(): Promise<void> {
    try {
      await this.#start();
    } catch (err) {
      await this.stop();
      throw err;
    }
  }

  async #start(): Promise<void> {
    const config = this.#config;
    const log = this.#log;
    const metrics = this.metrics;
    const teardown = this.#teardown;
    this.#stopIfAsked();
    const web = readWebConfigSetting(config.serve.webConfigFile);
    // First: a second process on the embedded database stops here, before serving anything.
    const lock = this.#lockDataDir();
    const upstreams = await openUpstreams(config, log, (source) => metrics.clientObserver(source));
    teardown.add('upstream clients', () => upstreams.close(), { timeoutMs: CLOSE_TIMEOUT_MS });
    this.#stopIfAsked();
    const scraper = this.#newScraper(upstreams.sources);
    // A connection per source whose run may be going, and room for /readyz and the health probe.
    const poolMax = Math.max(4, config.sources.length + 2);
    const opening: Promise<Database> = lock instanceof Error ? Promise.reject(lock) : openDatabase(config, log, poolMax, lock);
    teardown.add(
      'database',
      () =>
        opening.then(
          (db) => db.close(),
          () => undefined,
        ),
      { timeoutMs: CLOSE_TIMEOUT_MS },
    );
    if (config.database.migrate === 'off') await refusePendingMigrations(opening, config.database.schema);
    const database: ServeDatabase = new ServeDatabase({
      config,
      log,
      metrics,
      opening,
      onMigrated: () => this.#enter('ready'),
      onRecovered: () => {
        for (const source of sources.sources) if (source.sync.schedule !== undefined) void this.schedulers.get(source.name)?.trigger('database-recovered');
      },
      sources: () => sources.sources,
    });
    teardown.add('database health', () => database.health.stop());
    const sources: ServeSources = new ServeSources({
      config,
      log,
      metrics,
      database,
      scraper,
      initial: upstreams.sources,
      schedulers: this.schedulers,
      load: this.#load,
      // The embedded database multiplexes onto one backend whatever the pool.
      poolMax: config.database.url === undefined ? Infinity : poolMax,
    });
    // The clients a reload opened close before those of the start (and the demo simulator).
    teardown.add('reloaded upstream clients', () => sources.closeClients(), { timeoutMs: CLOSE_TIMEOUT_MS });
    const server = await this.#listen(scraper, database, sources, web);
    this.#stopIfAsked();
    this.#url = serverUrl(server, web);
    this.#logServing(upstreams.demo, web);
    this.#enter('migrating');
    this.#sources = sources;
    this.#startSyncs(database, sources);
  }

  /** Every source's E7 reads, for /metrics and /probe. @throws as {@link E7Scraper}'s constructor. */
  #newScraper(sources: readonly SourceClient[]): E7Scraper {
    const config = this.#config;
    const metrics = this.metrics;
    return new E7Scraper({
      sources: sources.map(({ source, client }) => ({ name: source.name, labels: source.labels, client, limits: source.limits })),
      metrics,
      windowMs: config.serve.metricsWindowMs,
      cacheTtlMs: config.serve.cacheTtlMs,
      prefix: config.serve.upstreamPrefix,
      // Names and types decide a collision: no collection per source read.
      ownFamilies: () => Promise.resolve(metrics.familyShapes()),
      log: this.#log,
    });
  }

  /** The HTTP server on METRICS_LISTEN; it and the sync schedules stop as one entry. @throws the listen error. */
  async #listen(scraper: E7Scraper, database: ServeDatabase, sources: ServeSources, web: WebConfig | undefined): Promise<Server> {
    const { serve } = this.#config;
    const log = this.#log;
    const server = createMetricsServer({
      metrics: this.metrics,
      scraper,
      readiness: () => database.readiness(),
      reload: () => this.reload('http'),
      defaultScrapeTimeoutMs: serve.scrapeTimeoutMs,
      connections: { perClient: serve.maxConnectionsPerClient, total: serve.maxConnections },
      ...(web ? { web: this.#watchWebConfig(web) } : {}),
      healthWithoutAuth: serve.healthWithoutAuth,
      authFailureBudget: serve.authFailureBudget,
      log,
    });
    await listen(server, serve.port, serve.host);
    this.#teardown.add('http server and sync schedules', async () => {
      const [synced] = await Promise.all([sources.stop(DRAIN_TIMEOUT_MS), closeServer(server, HTTP_DRAIN_TIMEOUT_MS)]);
      if (synced) return true;
      // The stuck run holds a pooled client and an upstream request: closing would wait for them too.
      log.warn(
        { drainTimeoutMs: DRAIN_TIMEOUT_MS },
        'the sync did not stop in time (it waits on a request that cannot be cancelled); stopping without it: the database rolls back its open window, committed windows are kept',
      );
      return false;
    });
    return server;
  }

  reload(trigger: string): Promise<ReloadResult> {
    const sources = this.#sources;
    if (sources === undefined || this.#state === 'stopping' || this.#state === 'stopped') {
      return Promise.resolve({ ok: false, status: 503, message: `serve is ${this.#state}: nothing reloaded` });
    }
    return sources.reload(trigger);
  }

  /** Locks DATA_DIR for the embedded database; an error other than "held by another process" is served as a database that cannot be opened. */
  #lockDataDir(): DataDirLock | Error | undefined {
    if (this.#config.database.url !== undefined) return undefined;
    let lock: DataDirLock;
    try {
      lock = lockDataDir(this.#config.database.dataDir);
    } catch (err) {
      if (err instanceof DataDirLockedError) throw err;
      // EROFS, EACCES: database_up 0, /readyz says why.
      return err instanceof Error ? err : new Error(String(err));
    }
    // Released by the embedded database when it closes; here too for a start that stops before it opens.
    this.#teardown.add('data-dir lock', () => lock.release());
    return lock;
  }

  /** The first sync of each scheduled source starts now, so a newcomer sees records within seconds; then on the schedule. */
  #startSyncs(database: ServeDatabase, sources: ServeSources): void {
    if (sources.start('startup')) return;
    database.migrated().catch((err: unknown) => {
      // A stop closes the pool under the migration: no fault of the database.
      if (this.#state === 'stopping' || this.#state === 'stopped') {
        this.#log.info({ database: database.target }, 'database migration stopped by the shutdown; the next start completes it');
        return;
      }
      this.#log.error({ database: database.target, err }, 'database migration failed');
      if (isDatabaseUnavailable(err)) database.health.unreachable(err);
    });
  }

  /** The web configuration, read again when it changes, each change logged and counted. */
  #watchWebConfig(web: WebConfig): WebConfigSource {
    const log = this.#log;
    const file = web.origin.file;
    for (const warning of web.warnings) log.warn({ file }, warning);
    const recordReload = this.metrics.trackWebConfigReloads();
    return new WebConfigSource(web, (reload) => {
      recordReload(reload.ok);
      if (reload.ok) {
        log.info({ file }, 'WEB_CONFIG_FILE changed: the new configuration is in use for new connections and requests');
        for (const warning of reload.config.warnings) log.warn({ file }, warning);
      } else {
        log.warn(
          { file, err: reload.error },
          `WEB_CONFIG_FILE changed but cannot be used, so the last good configuration stays in use: ${reload.error.message}`,
        );
      }
    });
  }

  #logServing(demo: boolean, web: WebConfig | undefined): void {
    const config = this.#config;
    const url = this.url;
    this.#log.info(
      {
        metrics: `${url}/metrics`,
        sources: config.sources.map((source) => source.name),
        schedule:
          config.sources.length === 1
            ? (config.sources[0]!.sync.schedule ?? 'off')
            : Object.fromEntries(config.sources.map((s) => [s.name, s.sync.schedule ?? 'off'])),
        demo,
        embeddedDatabase: config.database.url === undefined,
        tls: web?.tls?.clientAuth ?? 'off',
        basicAuth: Object.keys(web?.users ?? {}).length > 0,
      },
      `serving ${url}/metrics`,
    );
  }

  /** A stop that came while starting: what was acquired so far is being released; starting goes no further. */
  #stopIfAsked(): void {
    if (this.#teardown.releasing) throw new Error('serve was stopped while starting');
  }

  /** The one place the state changes; a transition the table does not allow (a migration ending after the stop) is ignored. */
  #enter(next: ServeState): void {
    const state = nextState(this.#state, next);
    if (state !== this.#state) this.#log.debug({ from: this.#state, to: state }, 'serve state');
    this.#state = state;
  }

  stop(): Promise<{ drained: boolean }> {
    return (this.#stopping ??= (async () => {
      this.#enter('stopping');
      const result = await this.#teardown.release();
      this.#enter('stopped');
      return result;
    })());
  }
}

/** Starts everything `serve` runs (tests start it in-process). @throws as {@link Serve.start}. */
export async function startServe(config: Config, log: Logger, load?: () => Config): Promise<RunningServer> {
  const serve = new Serve(config, log, load);
  await serve.start();
  return serve;
}

function listen(server: Server, port: number, host: string): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
}

/** No new connections; idle keep-alive ones close now, busy ones get `drainMs` to finish their request, then are cut. */
async function closeServer(server: Server, drainMs: number): Promise<void> {
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  server.closeIdleConnections();
  if (!(await settledWithin(closed, drainMs))) server.closeAllConnections();
}

function serverUrl(server: Server, web: WebConfig | undefined): string {
  const address = server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  const scheme = web?.tls ? 'https' : 'http';
  return `${scheme}://${host === '0.0.0.0' || host === '[::]' ? '127.0.0.1' : host}:${address.port}`;
}
