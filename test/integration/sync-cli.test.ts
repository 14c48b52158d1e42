import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { startEmbeddedDatabase } from '../../src/db/embedded.js';
import { createPool } from '../../src/db/pool.js';
import { silentLogger } from '../../src/log.js';
import { runCli } from '../helpers/cli.js';
import { expectExactDataset, watermarkOf } from '../helpers/sync.js';
import { SYNC_END, SYNC_START, useSyncCli } from '../helpers/sync-cli.js';
import { untilTrue } from '../helpers/wait.js';

const h = useSyncCli();

describe('analytics-exporter sync (child processes, real PostgreSQL)', () => {
  it('loads 60,000 records over 30 days exactly, and a second run changes nothing', async () => {
    const s = await h.sim({ records: 60_000 });
    const schema = h.schema();
    const first = await runCli(['sync', '--from', SYNC_START, '--to', SYNC_END], h.env(s, schema), 120_000);
    expect(first.stderr).toContain('sync run succeeded');
    expect(first.code).toBe(0);
    expect(await expectExactDataset(h.pool, schema, s, new Date(SYNC_START), new Date(SYNC_END))).toBe(60_000);

    const before = await h.pool.query(`select count(*)::int as n, sum(hashtext(payload::text))::bigint as h from ${schema}.records`);
    const second = await runCli(['sync', '--from', SYNC_START, '--to', SYNC_END], h.env(s, schema), 120_000);
    expect(second.code).toBe(0);
    const after = await h.pool.query(`select count(*)::int as n, sum(hashtext(payload::text))::bigint as h from ${schema}.records`);
    expect(after.rows[0]).toEqual(before.rows[0]);
    expect((await watermarkOf(h.pool, schema))?.toISOString()).toBe(new Date(SYNC_END).toISOString());
  }, 240_000);

  it('survives SIGKILL in the middle of a window: nothing partial is stored, the next run gives the exact dataset', async () => {
    const s = await h.sim({ records: 30_000, faults: { latencyMs: 5 } });
    const schema = h.schema();
    // 1-day windows of ~1000 records in 10 pages of 100: plenty of moments inside a window.
    const childEnv = h.env(s, schema, { SYNC_WINDOW: '1d', SYNC_PAGE_SIZE: '100', SYNC_CONCURRENCY: '2' });
    const { child, done } = h.spawnSync(['--from', SYNC_START, '--to', SYNC_END], childEnv);
    await untilTrue('3 windows committed', async () => (await h.committedWindows(schema)) >= 3);
    child.kill('SIGKILL');
    const killed = await done;
    expect(killed.signal).toBe('SIGKILL');
    // Killed in the middle of the run (30 one-day windows); whether a window was half read or not,
    // the checks below must hold.
    expect(await h.committedWindows(schema)).toBeLessThan(30);

    // Only whole windows are stored: every record belongs to a committed window, counts agree.
    const partial = await h.pool.query<{ stray: number; mismatched: number }>(
      `select (select count(*)::int from ${schema}.records r where not exists (select 1 from ${schema}.sync_windows w where w.window_start = r.window_start)) as stray,
              (select count(*)::int from ${schema}.sync_windows w where w.record_count <> (select count(*) from ${schema}.records r where r.window_start = w.window_start)) as mismatched`,
    );
    expect(partial.rows[0]).toEqual({ stray: 0, mismatched: 0 });

    const next = await runCli(['sync', '--from', SYNC_START, '--to', SYNC_END], childEnv, 120_000);
    expect(next.code).toBe(0);
    expect(next.stderr).toContain('marked runs left running by a process that died as abandoned');
    await expectExactDataset(h.pool, schema, s, new Date(SYNC_START), new Date(SYNC_END));
    const runs = await h.pool.query<{ status: string }>(`select status from ${schema}.sync_runs order by id`);
    expect(runs.rows.map((r) => r.status)).toEqual(['abandoned', 'succeeded']);
  }, 120_000);

  it('exits 0 saying another sync holds the lock while one runs, and waits with --wait', async () => {
    const s = await h.sim({ records: 20_000, faults: { latencyMs: 20 } });
    const schema = h.schema();
    const childEnv = h.env(s, schema, { SYNC_WINDOW: '1d', SYNC_PAGE_SIZE: '200', SYNC_CONCURRENCY: '1' });
    const first = h.spawnSync(['--from', SYNC_START, '--to', SYNC_END], childEnv);
    await untilTrue('1 windows committed', async () => (await h.committedWindows(schema)) >= 1);
    const second = await runCli(['sync', '--from', SYNC_START, '--to', SYNC_END], childEnv);
    expect(second.code).toBe(0);
    expect(second.stderr).toContain('another sync holds the lock for this schema');
    const waiting = h.spawnSync(['--from', SYNC_START, '--to', SYNC_END, '--wait'], childEnv);
    expect((await first.done).code).toBe(0);
    const waited = await waiting.done;
    expect(waited.code).toBe(0);
    expect(waited.stderr).toContain('sync run succeeded');
    await expectExactDataset(h.pool, schema, s, new Date(SYNC_START), new Date(SYNC_END));
  }, 120_000);

  it('exits 1 when the upstream fails, with the watermark unchanged for the failed window', async () => {
    const s = await h.sim({ records: 5000 });
    const schema = h.schema();
    const r = await runCli(['sync', '--from', SYNC_START, '--to', SYNC_END], h.env(s, schema, { CLIENT_SECRET: 'wrong-secret-value' }));
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('sync run failed');
    expect(r.stderr).toMatch(/HTTP 401: invalid_client/);
    expect(r.stderr).not.toMatch(/"level":"error".*Can't determine timestamp/);
    expect(r.stderr).not.toContain('wrong-secret-value');
    expect(await watermarkOf(h.pool, schema)).toBeNull();
  });

  it('exits 2 on bad usage, naming what was wrong', async () => {
    const bad = await runCli(['sync', '--from', 'yesterday']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("option '--from <iso>' argument 'yesterday' is invalid");
    // An impossible date is refused, not rolled over to March 2.
    const impossible = await runCli(['sync', '--from', '2026-02-30T00:00:00Z']);
    expect(impossible.code).toBe(2);
    expect(impossible.stderr).toContain("option '--from <iso>' argument '2026-02-30T00:00:00Z' is invalid");
    const impossibleEnv = await runCli(['sync'], { SYNC_START_DATE: '2026-02-30T00:00:00Z' });
    expect(impossibleEnv.code).toBe(2);
    expect(impossibleEnv.stderr).toContain('SYNC_START_DATE must be an ISO 8601 date-time with a zone');
    const reversed = await runCli(['sync', '--from', '2026-10-05T00:00:00Z', '--to', '2026-10-02T00:00:00Z'], {
      DATA_DIR: mkdtempSync(join(tmpdir(), 'ae-usage-')),
    });
    expect(reversed.code).toBe(2);
    expect(reversed.stderr).toContain('--from 2026-10-05T00:00:00.000Z must be before the end of the range 2026-10-02T00:00:00.000Z');
    const future = await runCli(['sync', '--to', new Date(Date.now() + 3_600_000).toISOString()], { DATA_DIR: mkdtempSync(join(tmpdir(), 'ae-usage-')) });
    expect(future.code).toBe(2);
    expect(future.stderr).toContain('is later than now minus SYNC_SETTLE');
    const badEnv = await runCli(['sync'], { SYNC_PAGE_SIZE: '5000' });
    expect(badEnv.code).toBe(2);
    expect(badEnv.stderr).toContain('SYNC_PAGE_SIZE must be a whole number from 1 to 1000; got "5000"');
  });

  it('uses the embedded PGlite database when DATABASE_URL is unset', async () => {
    const s = await h.sim({ records: 3000 });
    const dataDir = mkdtempSync(join(tmpdir(), 'ae-sync-pglite-'));
    h.defer(async () => rmSync(dataDir, { recursive: true, force: true }));
    const { DATABASE_URL: _unset, ...rest } = h.env(s, 'analytics', { DATA_DIR: dataDir, SYNC_WINDOW: '1d' });
    const r = await runCli(['sync', '--from', SYNC_START, '--to', SYNC_END], rest, 120_000);
    expect(r.stderr).toContain('using the embedded PGlite database');
    expect(r.code).toBe(0);

    const embedded = await startEmbeddedDatabase(dataDir, silentLogger);
    const epool = createPool(embedded.url, silentLogger, { max: 1 });
    try {
      await expectExactDataset(epool, 'analytics', s, new Date(SYNC_START), new Date(SYNC_END));
    } finally {
      await epool.end();
      await embedded.close();
    }
  }, 120_000);
});
