/**
 * `sync --wait` waits for the run holding the schema's advisory lock; a blocking
 * pg_advisory_lock cannot be interrupted, so SIGINT/SIGTERM during that wait used to hang until
 * the other run ended. With a signal the wait polls the lock and ends on the signal.
 */
import { spawn } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { beforeAll, describe, expect, it } from 'vitest';
import { migrate } from '../../src/db/migrate.js';
import { ADVISORY_LOCK_NAMESPACE, withAdvisoryLock, withClient, type Pool } from '../../src/db/pool.js';
import { AbortedError } from '../../src/errors.js';
import { silentLogger } from '../helpers/silent-logger.js';
import { CLI_PATH } from '../helpers/cli.js';
import { useTestDatabase } from '../helpers/db.js';
import { until } from '../helpers/wait.js';

const db = useTestDatabase();
let pool: Pool;

beforeAll(() => {
  // Not the exporter's application_name: the test looks for the child's connections by it.
  pool = db.pool({ max: 4, application_name: 'lock-wait-test' });
});

/** Holds the advisory lock `name` on a connection of its own until `release()`. */
async function holdLock(name: string): Promise<{ release: () => Promise<void> }> {
  const client = await pool.connect();
  await client.query('select pg_advisory_lock($1, hashtext($2))', [ADVISORY_LOCK_NAMESPACE, name]);
  return {
    release: async () => {
      await client.query('select pg_advisory_unlock($1, hashtext($2))', [ADVISORY_LOCK_NAMESPACE, name]);
      client.release();
    },
  };
}

describe('waiting for the advisory lock', () => {
  it('withAdvisoryLock with a signal ends its wait on abort without running fn, and takes the lock once it is free', async () => {
    const held = await holdLock('wait-test');
    try {
      const controller = new AbortController();
      let ran = false;
      const waiting = withClient(pool, (client) =>
        withAdvisoryLock(client, 'wait-test', { wait: true, signal: controller.signal }, async () => {
          ran = true;
        }),
      );
      const aborted = performance.now();
      controller.abort();
      await expect(waiting).rejects.toBeInstanceOf(AbortedError);
      expect(performance.now() - aborted).toBeLessThan(2_000);
      expect(ran).toBe(false);

      const second = withClient(pool, (client) => withAdvisoryLock(client, 'wait-test', { wait: true, signal: new AbortController().signal }, async () => 42));
      await held.release();
      await expect(second).resolves.toEqual({ acquired: true, value: 42 });
    } finally {
      await held.release().catch(() => undefined);
    }
  });

  it('sync --wait exits 0 on SIGTERM while another run holds the lock, having loaded nothing', async () => {
    const schema = 'lock_wait';
    await migrate(pool, schema, silentLogger);
    const held = await holdLock(`sync:${schema}`);
    try {
      const child = spawn(process.execPath, [CLI_PATH, 'sync', '--wait'], {
        // No upstream is reached: the run never gets past the lock. The simulator URL is never called.
        env: {
          PATH: process.env.PATH ?? '',
          HOME: process.env.HOME ?? '',
          STATISTICS_URL: 'http://127.0.0.1:1',
          AUTH_URL: 'http://127.0.0.1:1',
          CLIENT_ID: 'demo-client',
          CLIENT_SECRET: 'demo-secret',
          DATABASE_URL: db.url,
          DATABASE_SCHEMA: schema,
        },
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      let stderr = '';
      child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
      const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
      try {
        // Polling the lock, or (without a signal to end the wait) blocked on it.
        await until('the child waiting for the lock', async () => {
          const { rows } = await pool.query<{ n: number }>(
            `select count(*)::int as n from pg_stat_activity
              where datname = current_database() and application_name = 'analytics-exporter'
                and (query like '%pg_try_advisory_lock%' or (query like '%pg_advisory_lock%' and wait_event_type = 'Lock'))`,
          );
          return rows[0]!.n >= 1 ? true : undefined;
        });
        const signalled = performance.now();
        child.kill('SIGTERM');
        expect(await Promise.race([exited, sleep(5_000).then(() => 'still waiting')])).toBe(0);
        expect(performance.now() - signalled).toBeLessThan(3_000);
      } finally {
        child.kill('SIGKILL');
        await exited;
      }
      expect(stderr).toContain('"msg":"stopped while waiting for another sync to release the lock; nothing was loaded"');
      const runs = await pool.query<{ n: number }>(`select count(*)::int as n from ${schema}.sync_runs`);
      expect(runs.rows[0]!.n).toBe(0);
    } finally {
      await held.release();
    }
  });
});
