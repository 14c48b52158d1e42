/**
 * Behind PgBouncer (Debian's, test/helpers/pgbouncer.ts) in front of the test cluster. In
 * transaction pooling the per-source session-level advisory lock guards nothing, so `sync` and the
 * other commands that lock refuse it at start and `check` fails its pooling step; in session
 * pooling four concurrent runs of one source take turns and load the exact dataset.
 */
import { describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli.js';
import { startPgBouncer, type PgBouncer } from '../helpers/pgbouncer.js';
import { expectExactDataset } from '../helpers/sync.js';
import { SYNC_START, useSyncCli } from '../helpers/sync-cli.js';

const h = useSyncCli();
const TEN_DAYS_END = '2026-10-12T00:00:00Z';
const RANGE = ['--from', SYNC_START, '--to', TEN_DAYS_END];

async function pooler(poolMode: 'session' | 'transaction' | 'statement', poolSize: number): Promise<PgBouncer> {
  const bouncer = await startPgBouncer({ databaseUrl: h.url, poolMode, poolSize });
  h.defer(() => bouncer.stop());
  return bouncer;
}

/** The runs of `schema` in start order, with overlaps: a run starting before the previous one finished. */
async function runIntervals(schema: string): Promise<{ runs: { status: string; started: Date; finished: Date }[]; overlaps: number }> {
  const { rows } = await h.pool.query<{ status: string; started: Date; finished: Date }>(
    `select status, started_at as started, finished_at as finished from ${schema}.sync_runs order by started_at`,
  );
  const overlaps = rows.filter((r, i) => i > 0 && r.started < rows[i - 1]!.finished).length;
  return { runs: rows, overlaps };
}

describe('through PgBouncer', () => {
  for (const poolSize of [1, 4]) {
    it(`transaction pooling, pool of ${poolSize}: four concurrent syncs of one source and serve are refused at start; check fails naming the pooling`, async () => {
      const s = await h.sim({ records: 3_000 });
      const schema = h.schema();
      const bouncer = await pooler('transaction', poolSize);
      const env = h.env(s, schema, { DATABASE_URL: bouncer.url, SYNC_WINDOW: '1d' });
      const syncs = await Promise.all(Array.from({ length: 4 }, () => h.spawnSync(RANGE, env).done));
      for (const sync of syncs) {
        expect(sync.code).toBe(1);
        expect(sync.stderr).toContain('is reached through a pooler in transaction pooling mode');
        expect(sync.stderr).toContain('use session pooling (PgBouncer pool_mode=session) or give the exporter a direct DATABASE_URL');
      }
      // Refused before migrating: nothing ran, so nothing overlapped.
      const { rows } = await h.pool.query<{ runs: string | null }>('select to_regclass($1)::text as runs', [`${schema}.sync_runs`]);
      expect(rows[0]!.runs).toBeNull();

      // Not left serving without syncs: it does not start.
      const serve = await runCli(['serve'], { ...env, METRICS_LISTEN: '127.0.0.1:0' }, 20_000);
      expect(serve.code).toBe(1);
      expect(serve.stderr).toContain('serve could not start');
      expect(serve.stderr).toContain('is reached through a pooler in transaction pooling mode');

      const check = await runCli(['check'], env);
      expect(check.code).toBe(1);
      expect(check.stdout).toMatch(/^ok {4}database .*$/m);
      expect(check.stdout).toMatch(/^FAIL {2}pooling .*transaction pooling mode.*pool_mode=session/m);
    }, 60_000);
  }

  it('statement pooling: sync is refused at start naming it', async () => {
    const s = await h.sim({ records: 300 });
    const bouncer = await pooler('statement', 4);
    const sync = await h.spawnSync(RANGE, h.env(s, h.schema(), { DATABASE_URL: bouncer.url })).done;
    expect(sync.code).toBe(1);
    expect(sync.stderr).toContain('is reached through a pooler in statement pooling mode (transaction blocks not allowed in statement pooling mode)');
  }, 60_000);

  it('session pooling, pool of 4: four concurrent syncs of one source never run at once, the data is exact; check ok', async () => {
    const s = await h.sim({ records: 3_000, faults: { latencyMs: 10 } });
    const schema = h.schema();
    const bouncer = await pooler('session', 4);
    const env = h.env(s, schema, { DATABASE_URL: bouncer.url, SYNC_WINDOW: '1d', SYNC_PAGE_SIZE: '100' });
    // --wait: each takes its turn, so all four run.
    const syncs = await Promise.all(Array.from({ length: 4 }, () => h.spawnSync([...RANGE, '--wait'], env).done));
    for (const sync of syncs) {
      expect(sync.code).toBe(0);
      expect(sync.stderr).toContain('sync run succeeded');
    }
    const { runs, overlaps } = await runIntervals(schema);
    expect(runs.map((r) => r.status)).toEqual(['succeeded', 'succeeded', 'succeeded', 'succeeded']);
    expect(overlaps).toBe(0);
    await expectExactDataset(h.pool, schema, s, new Date(SYNC_START), new Date(TEN_DAYS_END));

    const check = await runCli(['check'], env);
    expect(check.stdout).toMatch(/^ok {4}pooling .*each connection keeps its server session/m);
    expect(check.code).toBe(0);
  }, 120_000);
});
