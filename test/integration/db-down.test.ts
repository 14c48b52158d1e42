/**
 * The database down at start. `sync` exits 1 with one clear line naming the
 * database (no stack trace, no password); `serve` keeps serving /metrics with the upstream
 * samples, fails /readyz, and once the database is back turns ready and runs its sync by itself,
 * without a restart and without waiting for the next scheduled tick.
 *
 * The cluster is this file's own: the suite's shared cluster is never stopped.
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
import { until } from '../helpers/wait.js';

/** Never used by trust authentication, but part of DATABASE_URL: it must not show anywhere. */
const PASSWORD = 'Down-Pw-77c2';
const WINDOW_MS = 6 * 3_600_000;
/** The simulator's data: two days ending an hour ago, so E7's 24h window has samples and the sync has windows. */
const SIM_START = new Date(Math.floor((Date.now() - 2 * 86_400_000) / WINDOW_MS) * WINDOW_MS);
const SIM_END = new Date(Date.now() - 3_600_000);

let cluster: ThrowawayCluster;
let database: TestDatabase;
let sim: Simulator;

beforeAll(async () => {
  cluster = await startThrowawayCluster({ ignoreTestDatabaseUrl: true });
  database = await createTestDatabase(cluster.url, 'db_down');
  sim = await startSimulator({ port: 0, records: 5000, start: SIM_START, end: SIM_END });
  await cluster.kill(); // down, data kept; restart() brings it back on the same port
});
afterAll(async () => {
  await sim?.close();
  await cluster?.stop();
});

function env(schema: string, extra: Record<string, string> = {}): Record<string, string> {
  const url = new URL(database.url);
  url.password = PASSWORD;
  return {
    ...simulatorEnv(sim),
    DATABASE_URL: url.toString(),
    DATABASE_SCHEMA: schema,
    SYNC_START_DATE: SIM_START.toISOString(),
    SYNC_WINDOW: '6h',
    ...extra,
  };
}

async function get(url: string): Promise<{ status: number; body: string }> {
  const res = await request(url, { reset: true });
  return { status: res.statusCode, body: await res.body.text() };
}

function sample(text: string, name: string): number | undefined {
  return parseExposition(text)
    .families.flatMap((f) => f.samples)
    .find((s) => s.name === name)?.value;
}

describe('the database down at start', () => {
  it('sync exits 1 with one line naming the database, no stack trace and no password', async () => {
    const started = performance.now();
    const r = await runCliInProcess(['sync'], env('down_sync'));
    expect(r.code).toBe(1);
    expect(performance.now() - started).toBeLessThan(15_000);
    const port = new URL(database.url).port;
    const lines = r.stderr.trim().split('\n');
    const errors = lines.filter((l) => l.includes('"level":"error"'));
    expect(errors).toHaveLength(1);
    expect(errors[0]).toContain(`"msg":"sync failed: the database 127.0.0.1:${port}/${database.name} is unreachable`);
    expect(errors[0]).toContain('ECONNREFUSED');
    expect(r.stderr + r.stdout).not.toContain(PASSWORD);
    expect(r.stderr).not.toMatch(/\n\s+at /);
  });

  it('serve keeps /metrics, fails /readyz, and recovers by itself when the database returns: ready, and the sync runs', async () => {
    const schema = 'down_serve';
    // A yearly schedule: the sync after recovery can only come from serve noticing the database is back.
    const child = spawn(process.execPath, [CLI_PATH, 'serve'], {
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env(schema, { METRICS_LISTEN: '127.0.0.1:0', SYNC_SCHEDULE: '0 0 1 1 *' }) },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
    const bodies: string[] = [];
    try {
      const url = await until('serve listening', async () => /serving (http:\/\/127\.0\.0\.1:\d+)\/metrics/.exec(stderr)?.[1]);
      const target = `127.0.0.1:${new URL(database.url).port}/${database.name}`;

      // Down: /metrics answers with the upstream samples and database_up 0; /readyz says why it is not ready.
      const down = await until('database_up 0', async () => {
        const m = await get(`${url}/metrics`);
        return m.status === 200 && sample(m.body, 'analytics_exporter_database_up') === 0 ? m.body : undefined;
      });
      bodies.push(down);
      expect(down).toMatch(/^userlogin_event_count\{/m);
      expect(sample(down, 'analytics_exporter_upstream_up')).toBe(1);
      expect(sample(down, 'analytics_exporter_sync_failures_total')).toBeGreaterThanOrEqual(1);
      const notReady = await get(`${url}/readyz`);
      bodies.push(notReady.body);
      expect(notReady.status).toBe(503);
      expect(notReady.body).toContain(`not ready: database unreachable (${target})`);
      await until('the unreachable warning', async () =>
        stderr.includes(`"msg":"the database ${target} is unreachable; retrying with backoff`) ? true : undefined,
      );

      // Back: without a restart of serve, /readyz turns 200 and the owed sync runs.
      await cluster.restart();
      const ready = await until('/readyz 200', async () => {
        const r = await get(`${url}/readyz`);
        return r.status === 200 ? r.body : undefined;
      });
      expect(ready).toContain('database reachable');
      const synced = await until('a successful sync', async () => {
        const m = await get(`${url}/metrics`);
        return (sample(m.body, 'analytics_exporter_sync_last_success_timestamp_seconds') ?? 0) > 0 ? m.body : undefined;
      });
      bodies.push(synced);
      expect(sample(synced, 'analytics_exporter_database_up')).toBe(1);
      expect(stderr).toContain(`"msg":"the database ${target} is reachable again"`);
      expect(stderr).toContain('"msg":"sync run succeeded"');
    } finally {
      child.kill('SIGTERM');
    }
    expect(await exited).toBe(0);
    expect(stderr + bodies.join('\n')).not.toContain(PASSWORD);

    const pool = new pg.Pool({ connectionString: database.url, max: 1 });
    // pg-pool's end() resolves before its sockets close: a database dropped right after must not make an uncaught error.
    pool.on('error', () => undefined);
    try {
      expect(await expectExactDataset(pool, schema, sim, SIM_START, new Date(SIM_END.getTime() + 1))).toBe(5000);
    } finally {
      await pool.end();
    }
  }, 60_000);
});
