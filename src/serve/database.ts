/**
 * The database as `serve` sees it: opened in the background, migrated once however many callers
 * ask at once, its reachability tracked ({@link DatabaseHealth}) and reported by /readyz. See
 * docs/design/serve-lifecycle.md, The database.
 */
import type { Config, SourceConfig } from '../config.js';
import { pendingMigrations } from '../db/migrate.js';
import { describeConfiguredDatabase } from '../db/pool.js';
import { requireOwnSessions } from '../db/pooler.js';
import { readDatabaseTls } from '../db/tls.js';
import { describeError, SharedServersError } from '../errors.js';
import type { Logger } from '../log.js';
import type { ExporterMetrics } from '../metrics/registry.js';
import { withTimeout } from '../settle.js';
import { migrateDatabase } from '../app/schema.js';
import type { Database } from '../app/runtime.js';
import { DatabaseHealth } from './health.js';
import type { Readiness } from './routes.js';

/** How long /readyz waits for the database before answering 503. */
const READINESS_TIMEOUT_MS = 3_000;

type Opened = { state: 'opening' } | { state: 'open'; db: Database } | { state: 'failed'; error: string };

export interface ServeDatabaseOptions {
  config: Config;
  log: Logger;
  metrics: ExporterMetrics;
  /** Closed by the caller. */
  opening: Promise<Database>;
  /** The sources in use now; default: the configuration's. */
  sources?: () => readonly SourceConfig[];
  /** Back after an outage during which a sync could not run. Must not throw. */
  onRecovered: () => void;
  /** After each migration that succeeded. Must not throw. */
  onMigrated: () => void;
}

/** The database of `serve`. */
export class ServeDatabase {
  /** For messages: `host:port/name`, or the embedded one's folder; never credentials. */
  readonly target: string;
  readonly health: DatabaseHealth;
  readonly #o: ServeDatabaseOptions;
  readonly #schema: string;
  #opened: Opened = { state: 'opening' };
  /** Set once DATABASE_URL answered the pooling probe; a refusal is for good. */
  #pooling: 'unknown' | 'own sessions' | SharedServersError = 'unknown';
  /** Shared by every caller while it runs; cleared when it fails. */
  #migrating: Promise<Database> | undefined;

  constructor(options: ServeDatabaseOptions) {
    this.#o = options;
    this.#schema = options.config.database.schema;
    this.target = describeConfiguredDatabase(options.config.database);
    this.health = new DatabaseHealth({
      up: options.metrics.process.databaseUp,
      log: options.log,
      target: this.target,
      probe: async () => {
        const { pool } = await this.migrated();
        await pool.query('select 1');
      },
      onRecovered: options.onRecovered,
    });
    options.opening.then(
      (db) => void (this.#opened = { state: 'open', db }),
      (err: unknown) => {
        this.#opened = { state: 'failed', error: describeError(err) };
        this.health.cannotOpen(err);
        options.log.error({ database: this.target, err }, `the database could not be opened: ${this.#opened.error}`);
      },
    );
  }

  /**
   * The database once open and migrated (the rollup too), each source's watermark and parked
   * windows read into the metrics; one migration shared by concurrent callers, a failed one tried
   * again by the next. @throws what opening or migrating threw.
   */
  migrated(): Promise<Database> {
    if (this.#pooling instanceof SharedServersError) return Promise.reject(this.#pooling);
    if (this.#migrating === undefined) {
      const attempt = this.#migrate();
      this.#migrating = attempt;
      attempt.catch(() => {
        if (this.#migrating === attempt) this.#migrating = undefined;
      });
    }
    return this.#migrating;
  }

  async #migrate(): Promise<Database> {
    const { config, log, metrics } = this.#o;
    const opened = await this.#o.opening;
    await this.#probePooling();
    // The rollup too, before any first run: its rebuild locks the schema (see the design page).
    await migrateDatabase(opened.pool, config, log);
    await opened.store.session(async (session) => {
      for (const source of this.#o.sources?.() ?? config.sources) {
        const ledger = session.ledger(source.name);
        metrics.setWatermark(source.name, await ledger.readWatermark());
        metrics.setParkedWindows(source.name, await ledger.countParked());
      }
    });
    this.#o.onMigrated();
    return opened;
  }

  /** Once reached: transaction or statement pooling refused for good; an unreachable database tried again by the next caller. */
  async #probePooling(): Promise<void> {
    const { url, tls } = this.#o.config.database;
    if (url === undefined || this.#pooling !== 'unknown') return;
    try {
      await requireOwnSessions({ url, tls: readDatabaseTls(tls) }, this.#o.log);
      this.#pooling = 'own sessions';
    } catch (err) {
      if (err instanceof SharedServersError) {
        this.#pooling = err;
        this.#o.log.error({ database: this.target, err }, `no sync will run: ${err.message}`);
      }
      throw err;
    }
  }

  /** /readyz: open, reachable within {@link READINESS_TIMEOUT_MS}, no pending migration; tells the health tracker. Never throws. */
  async readiness(): Promise<Readiness> {
    const opened = this.#opened;
    if (opened.state === 'failed') return { ready: false, detail: `not ready: the database could not be opened: ${opened.error}` };
    if (opened.state === 'opening') return { ready: false, detail: 'not ready: the database is still opening' };
    if (this.#pooling instanceof SharedServersError) return { ready: false, detail: `not ready: ${this.#pooling.message}` };
    const schema = this.#schema;
    try {
      const pending = await withTimeout(pendingMigrations(opened.db.pool, schema), READINESS_TIMEOUT_MS, 'the database check');
      this.health.reachable();
      return pending.length === 0
        ? { ready: true, detail: `ready: database reachable, schema ${schema} migrated` }
        : { ready: false, detail: `not ready: schema ${schema} has pending migrations (${pending.join(', ')})` };
    } catch (err) {
      this.health.unreachable(err);
      return { ready: false, detail: `not ready: database unreachable (${this.target}): ${describeError(err)}` };
    }
  }
}
