/**
 * Signals to `sync` (child processes, real PostgreSQL): the open window rolls back, the next run
 * (in this process: only its data matters) completes the data.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { runCliInProcess } from '../helpers/cli.js';
import { expectExactDataset } from '../helpers/sync.js';
import { SYNC_END, SYNC_START, useSyncCli } from '../helpers/sync-cli.js';
import { untilTrue } from '../helpers/wait.js';

const h = useSyncCli();

describe('analytics-exporter sync and signals (child processes, real PostgreSQL)', () => {
  it.each(['SIGINT', 'SIGTERM'] as const)(
    'on %s rolls back the current window and exits 0; the next run completes the data',
    async (signal) => {
      const s = await h.sim({ records: 8_000, faults: { latencyMs: 10 } });
      const schema = h.schema();
      const childEnv = h.env(s, schema, { SYNC_WINDOW: '1d', SYNC_PAGE_SIZE: '100', SYNC_CONCURRENCY: '2' });
      const { child, done } = h.spawnSync(['--from', SYNC_START, '--to', SYNC_END], childEnv);
      await untilTrue('2 windows committed', async () => (await h.committedWindows(schema)) >= 2);
      child.kill(signal);
      const result = await done;
      expect(result.code).toBe(0);
      expect(result.stderr).toContain('sync run interrupted');
      const run = await h.pool.query<{ status: string }>(`select status from ${schema}.sync_runs`);
      expect(run.rows.map((r) => r.status)).toEqual(['interrupted']);
      const partial = await h.pool.query<{ stray: number }>(
        `select count(*)::int as stray from ${schema}.records r where not exists (select 1 from ${schema}.sync_windows w where w.window_start = r.window_start)`,
      );
      expect(partial.rows[0]!.stray).toBe(0);
      const next = await runCliInProcess(['sync', '--from', SYNC_START, '--to', SYNC_END], childEnv);
      expect(next.code).toBe(0);
      await expectExactDataset(h.pool, schema, s, new Date(SYNC_START), new Date(SYNC_END));
    },
    120_000,
  );

  it.each([
    ['SIGINT', 130],
    ['SIGTERM', 143],
  ] as const)(
    'exits at once on a second %s (status %d); the next run completes the data',
    async (signal, status) => {
      const s = await h.sim({ records: 8_000 });
      const schema = h.schema();
      const childEnv = h.env(s, schema, { SYNC_WINDOW: '1d', SYNC_PAGE_SIZE: '100', SYNC_CONCURRENCY: '1' });
      const { child, done } = h.spawnSync(['--from', SYNC_START, '--to', SYNC_END], childEnv);
      await untilTrue('1 windows committed', async () => (await h.committedWindows(schema)) >= 1);
      // Block the child inside a database statement, which the first signal cannot interrupt.
      const locker = await h.pool.connect();
      try {
        await locker.query('begin');
        await locker.query(`lock table ${schema}.records in access exclusive mode`);
        await sleep(300);
        child.kill(signal);
        await sleep(300);
        expect(child.exitCode).toBeNull(); // still waiting on the database: the graceful stop cannot finish
        child.kill(signal);
        const result = await done;
        expect(result.code).toBe(status);
        expect(result.stderr).toContain('second signal: exiting at once');
      } finally {
        await locker.query('rollback');
        locker.release();
      }
      const next = await runCliInProcess(['sync', '--from', SYNC_START, '--to', SYNC_END], childEnv);
      expect(next.code).toBe(0);
      await expectExactDataset(h.pool, schema, s, new Date(SYNC_START), new Date(SYNC_END));
    },
    120_000,
  );
});
