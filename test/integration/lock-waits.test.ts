/**
 * A sync waiting on a lock another session holds on `records` (a maintenance session's ACCESS
 * EXCLUSIVE): past 10 s the wait is logged once at warn, naming the relation, the mode asked for
 * and the blocking process, and counted in analytics_exporter_database_lock_waits_total; with
 * DATABASE_LOCK_TIMEOUT the window fails after that long, and the next run completes the data.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { syncSources } from '../../src/app/sync.js';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/log.js';
import { ExporterMetrics } from '../../src/metrics/registry.js';
import { runCli } from '../helpers/cli.js';
import { captureLog } from '../helpers/log-capture.js';
import { expectExactDataset } from '../helpers/sync.js';
import { SYNC_START, useSyncCli } from '../helpers/sync-cli.js';

const h = useSyncCli();
const FIRST_END = '2026-10-05T00:00:00Z';
const END = '2026-10-12T00:00:00Z';
const WAIT_MESSAGE = 'a statement waits on a lock another process holds';

/** A maintenance session holding ACCESS EXCLUSIVE on `schema.records` until `release()`. */
async function lockRecords(schema: string): Promise<{ pid: number; release: () => Promise<void> }> {
  const client = new pg.Client({ connectionString: h.url, application_name: 'maintenance-window' });
  await client.connect();
  const { rows } = await client.query<{ pid: number }>('select pg_backend_pid() as pid');
  await client.query('begin');
  await client.query(`lock table ${schema}.records in access exclusive mode`);
  return {
    pid: rows[0]!.pid,
    release: async () => {
      await client.query('commit').catch(() => undefined);
      await client.end();
    },
  };
}

describe('lock waits made visible (real PostgreSQL)', () => {
  it('a lock held 15 s on records: one warn line naming the relation, the mode and the blocker, the metric counts it, the data is exact', async () => {
    const s = await h.sim({ records: 3_000 });
    const schema = h.schema();
    const env = h.env(s, schema, { SYNC_WINDOW: '1d' });
    // The tables and this month's partition exist before the lock is taken.
    expect((await runCli(['sync', '--from', SYNC_START, '--to', FIRST_END], env)).code).toBe(0);

    const held = await lockRecords(schema);
    const log = captureLog();
    const metrics = new ExporterMetrics({ processMetrics: false });
    const syncing = syncSources(loadConfig(env), createLogger('info', { format: 'json', destination: log }), {
      from: new Date(FIRST_END),
      to: new Date(END),
      observer: (source) => metrics.syncObserver(source),
    });
    await sleep(15_000);
    await held.release();
    const outcomes = await syncing;
    expect(outcomes.map((o) => o.result?.status ?? o.error?.message)).toEqual(['succeeded']);

    const waits = log.lines().filter((l) => l.msg === WAIT_MESSAGE);
    expect(waits).toHaveLength(1);
    // `records` or its partition, whichever statement of the run met the lock first.
    expect(waits[0]).toMatchObject({
      level: 'warn',
      source: 'default',
      relation: expect.stringMatching(new RegExp(`^${schema}\\.records`)),
      mode: expect.stringMatching(/^[A-Za-z]+Lock$/),
      blockers: [
        { pid: held.pid, applicationName: 'maintenance-window', query: `lock table ${schema}.records in access exclusive mode`, held: 'AccessExclusiveLock' },
      ],
    });
    expect(waits[0]!.waitedMs).toBeGreaterThanOrEqual(10_000);
    expect(await metrics.registry.getSingleMetricAsString('analytics_exporter_database_lock_waits_total')).toContain(
      'analytics_exporter_database_lock_waits_total{source="default"} 1',
    );
    await expectExactDataset(h.pool, schema, s, new Date(SYNC_START), new Date(END));
  }, 60_000);

  it('DATABASE_LOCK_TIMEOUT=2s: the run fails after 2 s naming the setting and the relation, exit 1; the next run completes the data', async () => {
    const s = await h.sim({ records: 3_000 });
    const schema = h.schema();
    const env = h.env(s, schema, { SYNC_WINDOW: '1d', DATABASE_LOCK_TIMEOUT: '2s' });
    expect((await runCli(['sync', '--from', SYNC_START, '--to', FIRST_END], env)).code).toBe(0);

    const held = await lockRecords(schema);
    let failed;
    try {
      const started = performance.now();
      failed = await runCli(['sync', '--from', FIRST_END, '--to', END], env);
      expect(performance.now() - started).toBeLessThan(10_000);
    } finally {
      await held.release();
    }
    expect(failed.code).toBe(1);
    expect(failed.stderr).toMatch(new RegExp(`waiting for a lock on ${schema}\\.records\\w* \\(\\w+Lock\\) took longer than DATABASE_LOCK_TIMEOUT \\(2s\\)`));

    const next = await runCli(['sync', '--from', FIRST_END, '--to', END], env);
    expect(next.code).toBe(0);
    await expectExactDataset(h.pool, schema, s, new Date(SYNC_START), new Date(END));
  }, 60_000);
});
