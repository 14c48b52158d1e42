/**
 * The database as `serve` sees it: opened in the background (the embedded one takes seconds the
 * first time, and /metrics serves the upstream meanwhile), migrated once however many callers ask
 * at once, its reachability tracked ({@link DatabaseHealth}) and reported by /readyz.
 */
import type { Config, SourceConfig } from '../config.js';
import { pendingMigrations } from '../db/migrate.js';
import { describeConfiguredDatabase } from '../db/pool.js';
import { describeError } from '../errors.js';
import type { Logger } from '../log.js';
import type { ExporterMetrics } from '../metrics/registry.js';
import { withTimeout } from '../settle.js';
import { migrateDatabase } from '../app/schema.js';
import type { Database } from '../app/runtime.js';
import { DatabaseHealth } from './health.js';
import type { Readiness } from './routes.js';

/** How long /readyz waits for the database before answering 503. */
const READINESS_TIMEOUT_MS = 3_000;

/** Where the opening stands: still going, open, or failed for good (described for /readyz). */
type Opened = { state: 'opening' } | { state: 'open'; db: Database } | { state: 'failed'; error: string };

export interface ServeDatabaseOptions {
  config: Config;
  log: Logger;
  metrics: ExporterMetrics;
  /** The database being opened; its closing is the caller's (registered where it was started). */
  opening: Promise<Database>;
  /** The sources in use now (a reload changes them); default: the configuration's. */
  sources?: () => readonly SourceConfig[];
  /** Called once the database is back after an outage during which a sync could not run. Must not throw. */
  onRecovered: () => void;
  /** Called after each migration that succeeded. Must not throw. */
  onMigrated: () => void;
}

/** The database of `serve`; see the module comment. */
export class ServeDatabase {
  /** The database for messages (`host:port/name`, or the embedded one's folder), never its credentials. */
  readonly target: string;
  readonly health: DatabaseHealth;
  readonly #o: ServeDatabaseOptions;
  readonly #schema: string;
  #opened: Opened = { state: 'opening' };
  /** The migration under way, shared by every caller meanwhile; cleared when it fails, so the next caller tries again. */
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
   * The database once open and migrated (the rollup too) and the watermarks and parked windows read into the
   * metrics. One migration at a time, shared by every caller that comes while it runs (each
   * source's first run, the start without a schedule, the health probe); a failed one is tried
   * again by the next caller.
   *
   * @throws what opening or migrating threw.
   */
  migrated(): Promise<Database> {
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
    // The rollup too, before any source's first run: its rebuild takes the schema's lock
    // exclusively, which the sources' first runs at once would otherwise contend for. Two
    // migrations at once on a new schema would both rebuild, and a run started after the first
    // finished would find the second holding that lock and end as `locked`.
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

  /**
   * /readyz: the database open, reachable within {@link READINESS_TIMEOUT_MS} and without pending
   * migrations. A failed check marks the database unreachable (probing starts), a passed one
   * reachable. Never throws.
   */
  async readiness(): Promise<Readiness> {
    const opened = this.#opened;
    if (opened.state === 'failed') return { ready: false, detail: `not ready: the database could not be opened: ${opened.error}` };
    if (opened.state === 'opening') return { ready: false, detail: 'not ready: the database is still opening' };
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
