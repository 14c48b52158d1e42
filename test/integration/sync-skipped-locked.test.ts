/**
 * A `serve` whose scheduled tick finds the source's sync lock held by another process (here: a
 * connection of the test holding the advisory lock, as a second replica's run would) counts the
 * tick in sync_skipped_total{source,reason="locked"} and logs it at info naming the source, and
 * reads the parked windows from the ledger again (what the other replica parked or loaded shows in
 * its gauge too); once the lock is free, the next tick syncs.
 */
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { ADVISORY_LOCK_NAMESPACE } from '../../src/db/pool.js';
import { createLogger, type LogDestination } from '../../src/log.js';
import { startServe } from '../../src/serve/lifecycle.js';
import { sourceLockName } from '../../src/sync/run/context.js';
import { startSimulator, type Simulator } from '@analytics-exporter/simulator';
import { useTestDatabase } from '../helpers/db.js';
import { simulatorEnv } from '../helpers/sync.js';
import { until } from '../helpers/wait.js';

const db = useTestDatabase();
let sim: Simulator;

beforeAll(async () => {
  sim = await startSimulator({ port: 0, records: 2_000, end: new Date(), start: new Date(Date.now() - 86_400_000) });
});
afterAll(async () => {
  await sim?.close();
});

function capture(): LogDestination & { lines: () => Array<Record<string, unknown>> } {
  const chunks: string[] = [];
  return {
    write: (chunk: string) => chunks.push(chunk),
    lines: () =>
      chunks
        .join('')
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as Record<string, unknown>),
  };
}

async function sample(url: string, series: string): Promise<number | undefined> {
  const res = await request(`${url}/metrics`, { reset: true });
  const text = await res.body.text();
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.split(' ').pop());
}

const metric = (url: string, reason: string) => sample(url, `analytics_exporter_sync_skipped_total{source="default",reason="${reason}"}`);

describe('a scheduled tick that finds the lock held elsewhere', () => {
  it('is counted as locked and logged at info, and the tick after the lock is freed syncs', async () => {
    const schema = 'locked_tick';
    const holder = await db.pool().connect();
    await holder.query('select pg_advisory_lock($1, hashtext($2))', [ADVISORY_LOCK_NAMESPACE, sourceLockName(schema, 'default')]);
    const destination = capture();
    const config = loadConfig({
      ...simulatorEnv(sim),
      DATABASE_URL: db.url,
      DATABASE_SCHEMA: schema,
      METRICS_LISTEN: '127.0.0.1:0',
      SYNC_SCHEDULE: '* * * * * *', // every second
      UPSTREAM_MAX_ATTEMPTS: '1',
    });
    const server = await startServe(config, createLogger('info', { format: 'json', destination }));
    try {
      await until('a locked tick counted', async () => ((await metric(server.url, 'locked')) ?? 0) >= 1 || undefined, 20_000, 100);
      // A tick may also come while the startup run still waits on the migration: that one is `running`, not `locked`.
      expect(await metric(server.url, 'running')).toBeGreaterThanOrEqual(0);
      const said = destination.lines().filter((l) => typeof l.msg === 'string' && l.msg.startsWith('sync tick skipped: another process holds the sync lock'));
      expect(said.length).toBeGreaterThanOrEqual(1);
      expect(said[0]).toMatchObject({ level: 'info', source: 'default' });
      expect(said[0]!.msg).toContain('source default');

      // Another replica parks a window while this one keeps losing the lock: its next locked tick reads it from the ledger.
      const parked = 'analytics_exporter_sync_windows_parked{source="default"}';
      expect(await sample(server.url, parked)).toBe(0);
      await db.pool().query(
        `insert into "${schema}".sync_windows (source, window_start, window_end, record_count, total_records, pages, run_id, status, reason, parked_at)
           values ('default', '2000-01-01T00:00:00Z', '2000-01-02T00:00:00Z', 0, 0, 0, 0, 'parked', 'parked by another replica', now())`,
      );
      await until('the parked window counted after a locked tick', async () => ((await sample(server.url, parked)) === 1 ? true : undefined), 20_000, 100);
      await db.pool().query(`delete from "${schema}".sync_windows where window_start = '2000-01-01T00:00:00Z'`);

      await holder.query('select pg_advisory_unlock($1, hashtext($2))', [ADVISORY_LOCK_NAMESPACE, sourceLockName(schema, 'default')]);
      await until(
        'a run after the lock was freed',
        () => destination.lines().find((l) => l.msg === 'sync run succeeded' || l.msg === 'sync run started'),
        20_000,
        100,
      );
    } finally {
      holder.release();
      await server.stop();
    }
  });
});
