import { describe, expect, it } from 'vitest';
import { runCli, runCliInProcess } from '../helpers/cli.js';
import { expectExactDataset, watermarkOf } from '../helpers/sync.js';
import { SYNC_END, SYNC_START, useSyncCli } from '../helpers/sync-cli.js';
import { untilTrue } from '../helpers/wait.js';

const h = useSyncCli();
/** The first ten days of the simulators' thirty: ten one-day windows of about 1,000 records. */
const TEN_DAYS_END = '2026-10-12T00:00:00Z';

describe('analytics-exporter sync (child processes, real PostgreSQL)', () => {
  it('loads 10 days of 1,000 records exactly in slices of 400, and a second run changes nothing', async () => {
    const s = await h.sim({ records: 30_000 });
    const schema = h.schema();
    // One-day windows of about 1,000 records: several slices of 400 a window (hourly windows of 42
    // records would be one slice each, and 720 transactions a run for the same exactness check).
    const childEnv = h.env(s, schema, { SYNC_PAGE_SIZE: '400', SYNC_WINDOW: '1d' });
    const first = await runCli(['sync', '--from', SYNC_START, '--to', TEN_DAYS_END], childEnv, 120_000);
    expect(first.stderr).toContain('sync run succeeded');
    expect(first.code).toBe(0);
    expect(await expectExactDataset(h.pool, schema, s, new Date(SYNC_START), new Date(TEN_DAYS_END))).toBeGreaterThan(9_000);

    const before = await h.pool.query(`select count(*)::int as n, sum(hashtext(payload::text))::bigint as h from ${schema}.records`);
    // The same command again, in this process: what matters is that it changes nothing.
    const second = await runCliInProcess(['sync', '--from', SYNC_START, '--to', TEN_DAYS_END], childEnv);
    expect(second.code).toBe(0);
    const after = await h.pool.query(`select count(*)::int as n, sum(hashtext(payload::text))::bigint as h from ${schema}.records`);
    expect(after.rows[0]).toEqual(before.rows[0]);
    expect((await watermarkOf(h.pool, schema))?.toISOString()).toBe(new Date(TEN_DAYS_END).toISOString());
  }, 240_000);

  it('survives SIGKILL in the middle of a window: nothing partial is stored, the next run gives the exact dataset', async () => {
    const s = await h.sim({ records: 30_000, faults: { latencyMs: 5 } });
    const schema = h.schema();
    // 1-day windows of ~1000 records in 10 pages of 100: plenty of moments inside a window.
    const childEnv = h.env(s, schema, { SYNC_WINDOW: '1d', SYNC_PAGE_SIZE: '100', SYNC_CONCURRENCY: '2' });
    const { child, done } = h.spawnSync(['--from', SYNC_START, '--to', TEN_DAYS_END], childEnv);
    await untilTrue('3 windows committed', async () => (await h.committedWindows(schema)) >= 3);
    child.kill('SIGKILL');
    const killed = await done;
    expect(killed.signal).toBe('SIGKILL');
    // Killed in the middle of the run (10 one-day windows); whether a window was half read or not,
    // the checks below must hold.
    expect(await h.committedWindows(schema)).toBeLessThan(10);

    // Only whole windows are stored: every record belongs to a committed window, counts agree.
    const partial = await h.pool.query<{ stray: number; mismatched: number }>(
      `select (select count(*)::int from ${schema}.records r where not exists (select 1 from ${schema}.sync_windows w where w.window_start = r.window_start)) as stray,
              (select count(*)::int from ${schema}.sync_windows w where w.record_count <> (select count(*) from ${schema}.records r where r.window_start = w.window_start)) as mismatched`,
    );
    expect(partial.rows[0]).toEqual({ stray: 0, mismatched: 0 });

    const next = await runCliInProcess(['sync', '--from', SYNC_START, '--to', TEN_DAYS_END], childEnv);
    expect(next.code).toBe(0);
    expect(next.stderr).toContain('marked runs left running by a process that died as abandoned');
    await expectExactDataset(h.pool, schema, s, new Date(SYNC_START), new Date(TEN_DAYS_END));
    const runs = await h.pool.query<{ status: string }>(`select status from ${schema}.sync_runs order by id`);
    expect(runs.rows.map((r) => r.status)).toEqual(['abandoned', 'succeeded']);
  }, 120_000);

  it('exits 0 saying another sync holds the lock while one runs, and waits with --wait', async () => {
    const s = await h.sim({ records: 10_000, faults: { latencyMs: 20 } });
    const schema = h.schema();
    const childEnv = h.env(s, schema, { SYNC_WINDOW: '1d', SYNC_PAGE_SIZE: '200', SYNC_CONCURRENCY: '1' });
    const first = h.spawnSync(['--from', SYNC_START, '--to', SYNC_END], childEnv);
    await untilTrue('1 windows committed', async () => (await h.committedWindows(schema)) >= 1);
    const second = await runCliInProcess(['sync', '--from', SYNC_START, '--to', SYNC_END], childEnv);
    expect(second.code).toBe(0);
    expect(second.stderr).toContain('another sync holds the lock for this source');
    const waiting = h.spawnSync(['--from', SYNC_START, '--to', SYNC_END, '--wait'], childEnv);
    expect((await first.done).code).toBe(0);
    const waited = await waiting.done;
    expect(waited.code).toBe(0);
    expect(waited.stderr).toContain('sync run succeeded');
    await expectExactDataset(h.pool, schema, s, new Date(SYNC_START), new Date(SYNC_END));
  }, 120_000);
});
