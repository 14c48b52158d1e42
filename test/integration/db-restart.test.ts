/**
 * PostgreSQL restarted (pg_ctl -m fast) or crashed (-m immediate, then started
 * again) while a `sync` child process loads windows. The run fails cleanly with a line naming
 * the database, nothing partial is committed, and the next run leaves the exact dataset.
 *
 * The cluster is this file's own: the suite's shared cluster is never restarted.
 */
import { spawn } from 'node:child_process';
import pg from 'pg';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseExposition } from '../../src/exposition/index.js';
import { startSimulator, type Simulator } from '@analytics-exporter/simulator';
import { CLI_PATH, runCliInProcess } from '../helpers/cli.js';
import { createTestDatabase, startThrowawayCluster, type TestDatabase, type ThrowawayCluster } from '../helpers/postgres.js';
import { expectExactDataset, simulatorEnv } from '../helpers/sync.js';
import { untilTrue } from '../helpers/wait.js';

const START = '2026-10-02T00:00:00Z';
const END = '2026-11-01T00:00:00Z';
/** Never used by trust authentication, but part of DATABASE_URL: it must not show anywhere. */
const PASSWORD = 'Restart-Pw-5e1f';

let cluster: ThrowawayCluster;
let database: TestDatabase;
let sim: Simulator;
let schemaCounter = 0;

beforeAll(async () => {
  // synchronous_commit on, as in production: an immediate shutdown then loses no acknowledged commit.
  cluster = await startThrowawayCluster({ ignoreTestDatabaseUrl: true, settings: { synchronous_commit: 'on' } });
  database = await createTestDatabase(cluster.url, 'db_restart');
  // ~670 records a day in 7 pages of 100: a window takes several round trips, so a restart lands inside one.
  sim = await startSimulator({ port: 0, records: 20_000, start: new Date(START), end: new Date(END), faults: { latencyMs: 5 } });
});
afterAll(async () => {
  await sim?.close();
  await cluster?.stop();
});

/** DATABASE_URL with a password, which trust authentication never asks for. */
function databaseUrl(): string {
  const url = new URL(database.url);
  url.password = PASSWORD;
  return url.toString();
}

function env(schema: string): Record<string, string> {
  return {
    ...simulatorEnv(sim),
    DATABASE_URL: databaseUrl(),
    DATABASE_SCHEMA: schema,
    SYNC_WINDOW: '1d',
    SYNC_PAGE_SIZE: '100',
    SYNC_CONCURRENCY: '2',
  };
}

/** One query on a fresh connection: pooled ones die with every restart. */
async function query<R extends pg.QueryResultRow>(text: string): Promise<R[]> {
  const client = new pg.Client({ connectionString: database.url });
  await client.connect();
  try {
    return (await client.query<R>(text)).rows;
  } finally {
    await client.end();
  }
}

function sample(text: string, name: string): number | undefined {
  return parseExposition(text)
    .families.flatMap((f) => f.samples)
    .find((s) => s.name === name)?.value;
}

/**
 * The dataset is exact after the next run, and the run cut short by the restart is recorded as
 * failed (the server was back when it recorded its end on a fresh connection) or abandoned (it was
 * not: its dead connection left it `running`, and the next run marks it).
 */
async function expectExactAfterRestart(schema: string): Promise<void> {
  const pool = new pg.Pool({ connectionString: database.url, max: 1 });
  // pg-pool's end() resolves before its sockets close: a database dropped right after must not make an uncaught error.
  pool.on('error', () => undefined);
  try {
    expect(await expectExactDataset(pool, schema, sim, new Date(START), new Date(END))).toBe(20_000);
  } finally {
    await pool.end();
  }
  const runs = await query<{ status: string }>(`select status from ${schema}.sync_runs order by id`);
  // `failed` when the server was back in time to take the run's end, `abandoned` when it was not.
  expect(runs.map((r) => r.status)).toEqual([expect.stringMatching(/^(failed|abandoned)$/), 'succeeded']);
}

describe('PostgreSQL restarted in the middle of a sync', () => {
  it.each([
    ['fast', () => cluster.restart()],
    ['immediate', async () => (await cluster.kill(), await cluster.restart())],
  ] as const)(
    'pg_ctl -m %s: the run exits 1 naming the database, commits nothing partial, and the next run is exact',
    async (_mode, restart) => {
      const schema = `restart_${++schemaCounter}`;
      const child = spawn(process.execPath, [CLI_PATH, 'sync', '--from', START, '--to', END], {
        env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env(schema) },
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      let stderr = '';
      child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
      const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
      try {
        await untilTrue('two windows committed', async () => (await query<{ n: number }>(`select count(*)::int as n from ${schema}.sync_windows`))[0]!.n >= 2);
        // Slow E6 down so that the rest of the run cannot finish before the restart, however
        // loaded the machine: the restart lands while the run waits on a page or writes one.
        sim.faults.latencyMs = 200;
        try {
          await restart();
        } finally {
          sim.faults.latencyMs = 5;
        }
        expect(await exited).toBe(1);
      } finally {
        child.kill('SIGKILL');
        await exited;
      }

      const where = new URL(database.url);
      expect(stderr).toContain(`"msg":"sync failed: the database 127.0.0.1:${where.port}/${database.name} is unreachable or closed the connection`);
      expect(stderr).not.toContain(PASSWORD);
      expect(stderr).not.toMatch(/\n\s+at /); // no stack trace

      // The restart cut the run short, and only whole windows are stored.
      const [state] = await query<{ windows: number; stray: number; mismatched: number }>(
        `select (select count(*)::int from ${schema}.sync_windows) as windows,
              (select count(*)::int from ${schema}.records r where not exists (select 1 from ${schema}.sync_windows w where w.window_start = r.window_start)) as stray,
              (select count(*)::int from ${schema}.sync_windows w where w.record_count <> (select count(*) from ${schema}.records r where r.window_start = w.window_start)) as mismatched`,
      );
      expect(state!.windows).toBeGreaterThanOrEqual(2);
      expect(state!.windows).toBeLessThan(30);
      expect({ stray: state!.stray, mismatched: state!.mismatched }).toEqual({ stray: 0, mismatched: 0 });

      // The next run in this process: its data is what matters here.
      const next = await runCliInProcess(['sync', '--from', START, '--to', END], env(schema));
      expect(next.stderr).toContain('sync run succeeded');
      expect(next.code).toBe(0);
      await expectExactAfterRestart(schema);
    },
    60_000,
  );
});

describe("PostgreSQL restarted in the middle of serve's sync", () => {
  it('the run fails, serve sees the database back by itself and runs the sync again at once: the exact dataset', async () => {
    const schema = `restart_${++schemaCounter}`;
    // A yearly schedule: the second run can only come from serve noticing the database is back.
    const child = spawn(process.execPath, [CLI_PATH, 'serve'], {
      env: {
        PATH: process.env.PATH ?? '',
        HOME: process.env.HOME ?? '',
        ...env(schema),
        METRICS_LISTEN: '127.0.0.1:0',
        SYNC_SCHEDULE: '0 0 1 1 *',
        SYNC_START_DATE: START,
        // The data ends at END; serve's run goes on to now, in windows of one day.
      },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
    try {
      await untilTrue('two windows committed', async () => (await query<{ n: number }>(`select count(*)::int as n from ${schema}.sync_windows`))[0]!.n >= 2);
      await cluster.restart();
      const url = /serving (http:\/\/127\.0\.0\.1:\d+)\/metrics/.exec(stderr)![1]!;
      let body = '';
      await untilTrue('a successful sync after the restart', async () => {
        body = await (await request(`${url}/metrics`, { reset: true })).body.text();
        return (sample(body, 'analytics_exporter_sync_last_success_timestamp_seconds') ?? 0) > 0;
      });
      expect(sample(body, 'analytics_exporter_sync_failures_total')).toBe(1);
      expect(sample(body, 'analytics_exporter_database_up')).toBe(1);
      expect(stderr).toContain('is reachable again');
    } finally {
      child.kill('SIGTERM');
    }
    expect(await exited).toBe(0);
    expect(stderr).not.toContain(PASSWORD);
    await expectExactAfterRestart(schema);
  }, 60_000);
});
