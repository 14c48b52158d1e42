/**
 * Per-file database isolation on the run's shared cluster (see test/global-setup.ts).
 */
import { afterAll, afterEach, beforeAll, inject } from 'vitest';
import pg from 'pg';
import { createTestDatabase, type TestDatabase } from './postgres.js';
import { createPool, type Pool } from '../../src/db/pool.js';
import { silentLogger } from './silent-logger.js';

/** What {@link useTestDatabase} hands a test file. */
export interface TestDatabaseHandle {
  /** URL of this file's database; only readable once `beforeAll` has run (inside tests and hooks). */
  readonly url: string;
  /** A pool on this file's database; ended in `afterAll` before the database is dropped. */
  pool(config?: Omit<pg.PoolConfig, 'connectionString'>): pg.Pool;
}

/**
 * Gives the calling test file a fresh database: created in `beforeAll` from the injected
 * `postgresUrl` (named after the file plus a random suffix), dropped in `afterAll` after ending
 * every pool made through the handle. Call it once at the top level of a test file.
 *
 * @throws Error from `url`/`pool()` when used before `beforeAll` (e.g. at module top level).
 */
export function useTestDatabase(): TestDatabaseHandle {
  let database: TestDatabase | undefined;
  const pools: pg.Pool[] = [];

  // Vitest parses a hook's first parameter for fixtures and insists on a destructuring pattern.
  // eslint-disable-next-line no-empty-pattern -- that pattern is empty: this hook uses no fixture
  beforeAll(async ({}, suite) => {
    database = await createTestDatabase(inject('postgresUrl'), suite.file.name.replace(/^.*\//, '').replace(/\.test\.ts$/, ''));
  });
  afterAll(async () => {
    await Promise.all(pools.splice(0).map((pool) => pool.end()));
    await database?.drop();
  });

  const url = (): string => {
    if (!database) throw new Error('useTestDatabase(): the database exists only from beforeAll on; use it inside tests or hooks');
    return database.url;
  };
  return {
    get url() {
      return url();
    },
    pool(config = {}) {
      const pool = new pg.Pool({ ...config, connectionString: url() });
      // Idle clients error when a test kills or restarts the server; the next query reports it where it matters.
      pool.on('error', () => undefined);
      pools.push(pool);
      return pool;
    },
  };
}

/** What {@link useAppPool} hands a test file. */
export interface AppPoolHandle {
  /** The exporter's own pool (src/db/pool.ts) on the file's database; only readable from `beforeAll` on. */
  readonly pool: Pool;
  /** What a test started (simulators, servers, children): closed after each test, last first. */
  readonly closers: (() => Promise<unknown>)[];
}

/**
 * The set-up of the files that run syncs in-process: the exporter's own pool (`createPool`, with its
 * error listener and application_name) on `db`, made in `beforeAll` and ended in `afterAll`, and a
 * stack of closers emptied after each test. Call it once at the top level, after {@link useTestDatabase}.
 *
 * @param max the pool's connections.
 */
export function useAppPool(db: TestDatabaseHandle, max = 4): AppPoolHandle {
  let pool: Pool | undefined;
  const closers: (() => Promise<unknown>)[] = [];
  beforeAll(() => {
    pool = createPool(db.url, silentLogger, { max });
  });
  afterEach(async () => {
    while (closers.length) await closers.pop()!();
  });
  afterAll(async () => {
    await pool?.end();
  });
  return {
    get pool() {
      if (!pool) throw new Error('useAppPool(): the pool exists only from beforeAll on; use it inside tests or hooks');
      return pool;
    },
    closers,
  };
}
