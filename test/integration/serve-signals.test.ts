/**
 * Signals to `serve` while its sync is loading windows (child processes, real
 * PostgreSQL). The first SIGTERM stops the HTTP server, rolls the open window back and exits 0
 * within a bound, also when the sync waits on a token request that takes no abort signal; a
 * second signal exits at once with 128 + the signal number, as `sync` does. After every case the
 * next `sync` leaves the exact dataset.
 */
import { spawn } from 'node:child_process';
import { request } from 'undici';
import { describe, expect, it } from 'vitest';
import { startSimulator, type Simulator } from '@analytics-exporter/simulator';
import { CLI_PATH, runCliInProcess } from '../helpers/cli.js';
import { useAppPool, useTestDatabase } from '../helpers/db.js';
import { spawnServe } from '../helpers/serve-child.js';
import { expectExactDataset, simulatorEnv } from '../helpers/sync.js';
import { until } from '../helpers/wait.js';

const db = useTestDatabase();
const START = '2026-10-02T00:00:00Z';
const END = '2026-11-01T00:00:00Z';
/** What the tests allow a graceful stop; serve bounds the sync's drain at 5 s, then closing at 2 s. */
const STOP_BOUND_MS = 10_000;
/** Records of the cases stuck on their token: nothing loads before the signal, only the next run's exactness needs data. */
const TOKEN_WAIT_RECORDS = 2_000;

const bed = useAppPool(db, 3);
const closers = bed.closers;
let schemaCounter = 0;

async function sim(options: Parameters<typeof startSimulator>[0] = {}): Promise<Simulator> {
  const s = await startSimulator({ port: 0, records: 10_000, start: new Date(START), end: new Date(END), ...options });
  closers.push(() => s.close());
  return s;
}

function env(s: Simulator, schema: string): Record<string, string> {
  return {
    ...simulatorEnv(s),
    DATABASE_URL: db.url,
    DATABASE_SCHEMA: schema,
    SYNC_START_DATE: START,
    SYNC_WINDOW: '1d',
    SYNC_PAGE_SIZE: '50',
    SYNC_CONCURRENCY: '2',
  };
}

/** Starts `serve` (its startup sync loads START..now; the yearly schedule never fires) and waits for its URL. */
function serve(childEnv: Record<string, string>): ReturnType<typeof spawnServe> {
  return spawnServe({ ...childEnv, SYNC_SCHEDULE: '0 0 1 1 *' }, closers);
}

async function committedWindows(schema: string): Promise<number> {
  const { rows } = await bed.pool.query<{ n: number }>(`select count(*)::int as n from ${schema}.sync_windows`);
  return rows[0]!.n;
}

/** Whether a new connection to `url` is refused (the server stopped listening). */
async function refused(url: string): Promise<true | undefined> {
  try {
    await request(`${url}/healthz`, { reset: true, headersTimeout: 1000, bodyTimeout: 1000 }).then((r) => r.body.text());
    return undefined;
  } catch (err) {
    return (err as { code?: string }).code === 'ECONNREFUSED' ? true : undefined;
  }
}

/** Only whole windows are stored, then the next `sync` completes the exact dataset of `records`. */
async function expectNextSyncExact(s: Simulator, schema: string, records = 10_000): Promise<void> {
  const partial = await bed.pool.query<{ stray: number; mismatched: number }>(
    `select (select count(*)::int from ${schema}.records r where not exists (select 1 from ${schema}.sync_windows w where w.window_start = r.window_start)) as stray,
            (select count(*)::int from ${schema}.sync_windows w where w.record_count <> (select count(*) from ${schema}.records r where r.window_start = w.window_start)) as mismatched`,
  );
  expect(partial.rows[0]).toEqual({ stray: 0, mismatched: 0 });
  // Full pages, in this process: only the windows matter for exactness, and the test stays quick.
  const next = await runCliInProcess(['sync', '--from', START, '--to', END], { ...env(s, schema), SYNC_PAGE_SIZE: '1000' });
  expect(next.code).toBe(0);
  expect(await expectExactDataset(bed.pool, schema, s, new Date(START), new Date(END))).toBe(records);
}

describe('serve on SIGTERM and SIGINT during a sync', () => {
  it('SIGTERM while windows load: stops listening, rolls back the open window, exits 0 within the bound', async () => {
    const s = await sim({ faults: { latencyMs: 10 } });
    const schema = `signals_${++schemaCounter}`;
    const server = await serve(env(s, schema));
    await until('two windows committed', async () => ((await committedWindows(schema)) >= 2 ? true : undefined));
    const signalled = performance.now();
    server.child.kill('SIGTERM');
    const code = await server.exited;
    const stopMs = performance.now() - signalled;
    expect(code).toBe(0);
    expect(stopMs).toBeLessThan(STOP_BOUND_MS);
    expect(await refused(server.url)).toBe(true);
    const stderr = server.output();
    expect(stderr).toContain('"msg":"sync run interrupted');
    expect(stderr).toContain('"drained":true,"msg":"stopped"');
    const runs = await bed.pool.query<{ status: string; windows: number }>(`select status, windows from ${schema}.sync_runs`);
    expect(runs.rows.map((r) => r.status)).toEqual(['interrupted']);
    expect(runs.rows[0]!.windows).toBeLessThan(30);
    await expectNextSyncExact(s, schema);
  }, 60_000);

  it.each([
    ['SIGTERM', 143],
    ['SIGINT', 130],
  ] as const)(
    'a second %s during the drain exits at once with %d',
    async (signal, status) => {
      const s = await sim({ faults: { latencyMs: 5 } });
      const schema = `signals_${++schemaCounter}`;
      const server = await serve(env(s, schema));
      await until('one window committed', async () => ((await committedWindows(schema)) >= 1 ? true : undefined));
      // Hold the sync inside a database statement, where an abort cannot reach it: the drain cannot finish.
      const locker = await bed.pool.connect();
      try {
        await locker.query('begin');
        await locker.query(`lock table ${schema}.records in access exclusive mode`);
        await until('the sync blocked on the lock', async () => {
          const { rows } = await bed.pool.query<{ n: number }>(
            "select count(*)::int as n from pg_stat_activity where datname = current_database() and application_name = 'analytics-exporter' and wait_event_type = 'Lock'",
          );
          return rows[0]!.n >= 1 ? true : undefined;
        });
        server.child.kill(signal);
        // Draining: no new connections, and the process still waits for the sync.
        await until('the server refusing connections', () => refused(server.url));
        expect(server.output()).toContain('"msg":"shutting down: draining HTTP and the running sync');
        expect(server.child.exitCode).toBeNull();
        const signalled = performance.now();
        server.child.kill(signal);
        expect(await server.exited).toBe(status);
        expect(performance.now() - signalled).toBeLessThan(2_000);
        expect(server.output()).toContain('"msg":"second signal: exiting at once"');
      } finally {
        await locker.query('rollback');
        locker.release();
      }
      await expectNextSyncExact(s, schema);
    },
    60_000,
  );

  it('SIGTERM while the sync waits on a token request (which takes no abort signal) still exits 0 within the bound', async () => {
    // Every request, the token request first, waits 30 s: the startup sync is stuck on its token.
    // No window loads before the signal, so the data can be small.
    const s = await sim({ records: TOKEN_WAIT_RECORDS, faults: { latencyMs: 30_000 } });
    const schema = `signals_${++schemaCounter}`;
    const server = await serve(env(s, schema));
    await until('the token request in flight', async () => (s.stats.tokenRequests >= 1 ? true : undefined));
    const signalled = performance.now();
    server.child.kill('SIGTERM');
    const code = await server.exited;
    const stopMs = performance.now() - signalled;
    expect(code).toBe(0);
    expect(stopMs).toBeLessThan(STOP_BOUND_MS);
    const stderr = server.output();
    // The run ends at once (the window reader leaves the request waiting on its token behind); the
    // token request itself, which takes no signal, is what keeps the upstream client from closing.
    expect(stderr).toContain('"msg":"sync run interrupted; committed windows are kept');
    expect(stderr).toContain('"drained":false,"msg":"stopped"');
    s.faults.latencyMs = 0;
    await expectNextSyncExact(s, schema, TOKEN_WAIT_RECORDS);
  }, 60_000);
});

describe('sync on SIGTERM while waiting on a token request', () => {
  it('exits 0 within the same bound as serve, and the next run is exact', async () => {
    const s = await sim({ records: TOKEN_WAIT_RECORDS, faults: { latencyMs: 30_000 } });
    const schema = `signals_${++schemaCounter}`;
    const child = spawn(process.execPath, [CLI_PATH, 'sync', '--from', START, '--to', END], {
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env(s, schema) },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
    closers.push(async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    });
    await until('the token request in flight', async () => (s.stats.tokenRequests >= 1 ? true : undefined));
    const signalled = performance.now();
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
    expect(performance.now() - signalled).toBeLessThan(STOP_BOUND_MS);
    expect(stderr).toContain('"msg":"the run did not stop in time');
    s.faults.latencyMs = 0;
    await expectNextSyncExact(s, schema, TOKEN_WAIT_RECORDS);
  }, 60_000);
});
