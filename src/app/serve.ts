/**
 * The serve application: the HTTP server (/metrics, /probe, /healthz, /readyz, /) and the sync schedule in
 * one process, with the database opened in the background, its health tracked and the metrics'
 * bookkeeping. With nothing configured it runs on the demo simulator and the embedded database,
 * so `npm start` shows data within seconds. The command (src/commands/serve.ts) only starts it
 * and maps signals and failures to exit statuses.
 */
import type { AddressInfo } from 'node:net';
import { DataDirLockedError, describeError } from '../errors.js';
import { lockDataDir, type DataDirLock } from '../db/datadir-lock.js';
import type { Logger } from '../log.js';
import { pendingMigrations } from '../db/migrate.js';
import { migrateDatabase } from './derived.js';
import { ExporterMetrics } from '../metrics/registry.js';
import { UpstreamMetrics } from '../metrics/upstream.js';
import { createMetricsServer, type Readiness } from '../server.js';
import { WebConfigSource } from '../webconfig.js';
import { runSync } from '../sync/run.js';
import { SyncScheduler } from '../sync/schedule.js';
import { readWatermark, Tables } from '../sync/store.js';
import { describeConfiguredDatabase, withClient } from '../db/pool.js';
import { isDatabaseUnavailable } from '../failures.js';
import { DatabaseHealth } from '../db/health.js';
import type { Config } from '../config.js';
import { settledWithin, withTimeout } from '../settle.js';
import { DRAIN_TIMEOUT_MS, openDatabase, openUpstreams, type Database, type Upstreams } from './runtime.js';

/** How long /readyz waits for the database before answering 503. */
const READINESS_TIMEOUT_MS = 3_000;
/** How long requests in flight (a scrape waiting on the upstream) get to finish before their connections are cut. */
const HTTP_DRAIN_TIMEOUT_MS = 3_000;
/** Bound on closing the upstream client and the database pool at shutdown, each. */
const CLOSE_TIMEOUT_MS = 2_000;

/** A running `serve`. */
export interface RunningServer {
  url: string;
  /** The first source's sync schedule. */
  scheduler: SyncScheduler;
  /** Every source's sync schedule, by source name: each runs on its own, none waits for another. */
  schedulers: ReadonlyMap<string, SyncScheduler>;
  metrics: ExporterMetrics;
  /**
   * Stops accepting connections, aborts the sync (its open window rolls back) and closes
   * everything, within about {@link DRAIN_TIMEOUT_MS} (the sync) or
   * {@link CLOSE_TIMEOUT_MS} (the upstream client and the pool, once the sync has stopped). Idempotent.
   *
   * @returns `drained: false` when something (the sync, the upstream client, the pool) was still
   *   busy at its bound; it is left to finish in the background, and a process should exit
   *   rather than wait for it.
   */
  stop(): Promise<{ drained: boolean }>;
}

/**
 * Starts everything `serve` runs. Exported for tests, which start it in-process.
 *
 * @throws when the port cannot be bound or the embedded database cannot be opened; upstream
 *   and database faults after that are reported through /metrics and /readyz, never thrown.
 */
export async function startServe(config: Config, log: Logger): Promise<RunningServer> {
  // The embedded database's folder first: a second process on it stops here, before it serves anything.
  let lock: DataDirLock | undefined;
  let lockError: Error | undefined;
  if (config.database.url === undefined) {
    try {
      lock = lockDataDir(config.database.dataDir);
    } catch (err) {
      if (err instanceof DataDirLockedError) throw err;
      // EROFS, EACCES: served as a database that cannot be opened (database_up 0).
      lockError = err instanceof Error ? err : new Error(String(err));
    }
  }
  const metrics = new ExporterMetrics({ cacheTtlMs: config.serve.cacheTtlMs });
  let upstream: Upstreams | undefined;
  let upstreamMetrics: UpstreamMetrics;
  try {
    upstream = await openUpstreams(config, log, (source) => metrics.clientObserver(source));
    upstreamMetrics = new UpstreamMetrics({
      sources: upstream.sources.map(({ source, client }) => ({ name: source.name, labels: source.labels, client })),
      metrics,
      windowMs: config.serve.metricsWindowMs,
      cacheTtlMs: config.serve.cacheTtlMs,
      prefix: config.serve.upstreamPrefix,
      // Names and types decide a collision: no collection per source read.
      ownFamilies: () => Promise.resolve(metrics.familyShapes()),
      log,
    });
  } catch (err) {
    await upstream?.close().catch(() => undefined);
    lock?.release();
    throw err;
  }
  const upstreams = upstream;
  // The database opens in the background (the embedded one takes seconds the first time), so
  // /metrics serves the upstream at once; /readyz and the first sync wait for it.
  // A connection per source whose run may be going, and room for /readyz and the health probe.
  const opening = lockError !== undefined ? Promise.reject(lockError) : openDatabase(config, log, Math.max(4, config.sources.length + 2), lock);
  let db: Database | undefined;
  let openError: string | undefined;
  opening.then(
    (opened) => void (db = opened),
    (err: unknown) => {
      openError = describeError(err);
      health.cannotOpen(err);
      log.error({ database: target, err }, `the database could not be opened: ${openError}`);
    },
  );
  const schema = config.database.schema;
  const target = describeConfiguredDatabase(config.database);

  // One migration at a time, shared by every caller that comes while it runs (each source's first
  // run, the start without a schedule, the health probe); a failed one is tried again by the next.
  let migrating: Promise<Database> | undefined;
  const migrateOnce = async (): Promise<Database> => {
    const opened = await opening;
    // The rollup too, before any source's first run: its rebuild takes the schema's lock
    // exclusively, which the sources' first runs at once would otherwise contend for. Two
    // migrations at once on a new schema would both rebuild, and a run started after the first
    // finished would find the second holding that lock and end as `locked`.
    await migrateDatabase(opened.pool, config, log);
    await withClient(opened.pool, async (client) => {
      for (const source of config.sources) metrics.setWatermark(source.name, await readWatermark(client, new Tables(schema), source.name));
    });
    return opened;
  };
  const ensureMigrated = (): Promise<Database> => {
    if (migrating === undefined) {
      const attempt = migrateOnce();
      migrating = attempt;
      attempt.catch(() => {
        if (migrating === attempt) migrating = undefined;
      });
    }
    return migrating;
  };

  // Set when the database turns out unreachable: probes it with backoff, and runs the sync that
  // could not run as soon as it is back (down at start, restarted, failed over).
  const health = new DatabaseHealth({
    up: metrics.databaseUp,
    log,
    target,
    probe: async () => {
      const { pool } = await ensureMigrated();
      await pool.query('select 1');
    },
    onRecovered: () => {
      for (const source of config.sources) if (source.sync.schedule !== undefined) void schedulers.get(source.name)!.trigger('database-recovered');
    },
  });

  const readiness = async (): Promise<Readiness> => {
    if (openError !== undefined) return { ready: false, detail: `not ready: the database could not be opened: ${openError}` };
    if (db === undefined) return { ready: false, detail: 'not ready: the database is still opening' };
    try {
      const pending = await withTimeout(pendingMigrations(db.pool, schema), READINESS_TIMEOUT_MS, 'the database check');
      health.reachable();
      return pending.length === 0
        ? { ready: true, detail: `ready: database reachable, schema ${schema} migrated` }
        : { ready: false, detail: `not ready: schema ${schema} has pending migrations (${pending.join(', ')})` };
    } catch (err) {
      health.unreachable(err);
      return { ready: false, detail: `not ready: database unreachable (${target}): ${describeError(err)}` };
    }
  };

  let web: WebConfigSource | undefined;
  if (config.serve.web !== undefined) {
    const file = config.serve.web.origin.file;
    for (const warning of config.serve.web.warnings) log.warn({ file }, warning);
    const recordReload = metrics.trackWebConfigReloads();
    web = new WebConfigSource(config.serve.web, (reload) => {
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
  const server = createMetricsServer({
    metrics,
    upstream: upstreamMetrics,
    readiness,
    defaultScrapeTimeoutMs: config.serve.scrapeTimeoutMs,
    ...(web ? { web } : {}),
    log,
  });

  // One schedule per source, each with its own run state: a slow or failing source's run never
  // delays another's (they share only the database pool, sized for the sources that run at once).
  const schedulers = new Map<string, SyncScheduler>();
  for (const source of config.sources) {
    const sourceLog = log.child({ source: source.name });
    const observer = metrics.syncObserver(source.name);
    const client = upstreams.sources.find((u) => u.source.name === source.name)!.client;
    schedulers.set(
      source.name,
      new SyncScheduler({
        schedule: source.sync.schedule ?? '0 0 1 1 *',
        log: sourceLog,
        onSkipped: () => metrics.syncSkipped.inc({ source: source.name }),
        run: async (signal) => {
          const started = performance.now();
          try {
            const { pool } = await ensureMigrated();
            const result = await runSync({ pool, client, source: source.name, config: source.sync, schema, log: sourceLog, observer }, { signal });
            if (result.status === 'failed' && isDatabaseUnavailable(result.error)) health.unreachable(result.error, { syncOwed: true });
            else health.reachable();
            return result;
          } catch (err) {
            metrics.recordUnrecordedFailure(source.name, (performance.now() - started) / 1000, err);
            if (isDatabaseUnavailable(err) && !signal.aborted) health.unreachable(err, { syncOwed: true });
            throw err;
          }
        },
      }),
    );
  }
  const scheduler = schedulers.get(config.sources[0]!.name)!;

  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(config.serve.port, config.serve.host, () => {
        server.off('error', reject);
        resolve();
      });
    });
  } catch (err) {
    await Promise.allSettled([upstreams.close(), opening.then((opened) => opened.close())]);
    throw err;
  }
  const address = server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  const scheme = config.serve.web?.tls ? 'https' : 'http';
  const url = `${scheme}://${host === '0.0.0.0' || host === '[::]' ? '127.0.0.1' : host}:${address.port}`;
  log.info(
    {
      metrics: `${url}/metrics`,
      sources: config.sources.map((source) => source.name),
      schedule:
        config.sources.length === 1
          ? (config.sources[0]!.sync.schedule ?? 'off')
          : Object.fromEntries(config.sources.map((s) => [s.name, s.sync.schedule ?? 'off'])),
      demo: upstreams.demo,
      embeddedDatabase: config.database.url === undefined,
      tls: config.serve.web?.tls?.clientAuth ?? 'off',
      basicAuth: Object.keys(config.serve.web?.users ?? {}).length > 0,
    },
    `serving ${url}/metrics`,
  );

  // The first sync of each scheduled source starts now, so a newcomer sees records within seconds; then on the schedule.
  const scheduled = config.sources.filter((s) => s.sync.schedule !== undefined);
  for (const source of scheduled) {
    const sourceScheduler = schedulers.get(source.name)!;
    sourceScheduler.start();
    void sourceScheduler.trigger('startup');
  }
  if (scheduled.length === 0) {
    ensureMigrated().catch((err: unknown) => {
      // A stop while migrating closes the pool under the migration: no fault of the database.
      // Each migration is one transaction, so the next start applies what this one did not.
      if (stopping !== undefined) {
        log.info({ database: target }, 'database migration stopped by the shutdown; the next start completes it');
        return;
      }
      log.error({ database: target, err }, 'database migration failed');
      if (isDatabaseUnavailable(err)) health.unreachable(err);
    });
  }

  let stopping: Promise<{ drained: boolean }> | undefined;
  const stop = () =>
    (stopping ??= (async () => {
      // No new connections from here on; idle keep-alive ones are closed, busy ones finish their request.
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      const [stopped, httpDrained] = await Promise.all([
        Promise.all([...schedulers.values()].map((s) => s.stop(DRAIN_TIMEOUT_MS))),
        settledWithin(closed, HTTP_DRAIN_TIMEOUT_MS),
      ]);
      const syncDrained = stopped.every(Boolean);
      health.stop();
      if (!httpDrained) server.closeAllConnections();
      const closing = [upstreams.close(), opening.then((opened) => opened.close())].map((p) => p.catch(() => undefined));
      if (!syncDrained) {
        // The stuck run holds a pooled client and an upstream request: closing would wait for them too.
        log.warn(
          { drainTimeoutMs: DRAIN_TIMEOUT_MS },
          'the sync did not stop in time (it waits on a request that cannot be cancelled); stopping without it: the database rolls back its open window, committed windows are kept',
        );
        return { drained: false };
      }
      return { drained: await settledWithin(Promise.all(closing), CLOSE_TIMEOUT_MS) };
    })());
  return { url, scheduler, schedulers, metrics, stop };
}
