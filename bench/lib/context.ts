/** What every benchmark gets: the mode, the PostgreSQL server, a scratch folder and a logger. */
import pg from 'pg';
import { createTestDatabase, type TestDatabase, type ThrowawayCluster } from '../../test/helpers/postgres.js';

export interface BenchContext {
  quick: boolean;
  cluster: ThrowawayCluster;
  /** A folder for files the benchmarks write (COPY data, profiles, /metrics bodies); deleted at the end. */
  scratch: string;
  /** One progress line on stderr. */
  log(line: string): void;
}

/** The data every sync benchmark ends at; windows are whole UTC days before it. */
export const DATA_END = new Date('2026-11-01T00:00:00Z');
export const DAY_MS = 86_400_000;

export function daysBefore(end: Date, days: number): Date {
  return new Date(end.getTime() - days * DAY_MS);
}

/**
 * Runs `fn` with a fresh, empty database on the bench's server and drops it afterwards. A
 * CHECKPOINT first, so that no measurement pays for the dirty pages of the one before it.
 */
export async function withFreshDatabase<T>(ctx: BenchContext, hint: string, fn: (db: TestDatabase) => Promise<T>): Promise<T> {
  const db = await createTestDatabase(ctx.cluster.url, hint);
  try {
    await checkpoint(ctx.cluster.url);
    return await fn(db);
  } finally {
    await db.drop();
  }
}

async function checkpoint(url: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query('checkpoint');
  } finally {
    await client.end();
  }
}

/** Rows in `schema.records` of the database at `url`. */
export async function countRecords(url: string, schema = 'analytics'): Promise<number> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query<{ n: number }>(`select count(*)::int as n from "${schema}".records`);
    return rows[0]!.n;
  } finally {
    await client.end();
  }
}
