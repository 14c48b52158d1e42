/**
 * Two `serve` replicas on one PostgreSQL schema, each with the source's schedule (child processes,
 * real PostgreSQL, the simulator), as the Kubernetes `serve` overlay runs them: both tick every 2
 * seconds, each run takes the source's advisory lock, and a tick that finds it held is skipped,
 * logged at info and counted in sync_skipped_total{reason="locked"}. After both have ticked a
 * while and stopped: the records are exactly what E6 serves (the simulator's servedJson), the
 * ledger is consistent (no two windows of the source overlap, each window's count is its stored
 * rows, no run overlapped another in time: no window was loaded twice at once), every run in
 * sync_runs was started by exactly one of the two processes, and the runs are split between them or
 * a tick of one found the lock held. Counts are asserted, not timings.
 */
import { request } from 'undici';
import { describe, expect, it } from 'vitest';
import { startSimulator } from '@analytics-exporter/simulator';
import { useAppPool, useTestDatabase } from '../helpers/db.js';
import { startServe } from '../helpers/serve-child.js';
import { canonicalJson, simulatorEnv, storedMultiset } from '../helpers/sync.js';
import { until } from '../helpers/wait.js';

const db = useTestDatabase();
const bed = useAppPool(db, 1);
const closers = bed.closers;

const DAY = 86_400_000;
const SCHEMA = 'serve_replicas';
const LOCKED_LINE = 'sync tick skipped: another process holds the sync lock';

interface Replica {
  name: string;
  lines: () => Array<{ msg: string; level: string; [k: string]: unknown }>;
  url: () => Promise<string>;
  stop: () => Promise<number | null>;
}

/** The value of `sync_skipped_total{source="default",reason}` in a /metrics text; undefined when absent. */
function skipped(metrics: string, reason: string): number | undefined {
  const line = metrics.split('\n').find((l) => l.startsWith(`analytics_exporter_sync_skipped_total{source="default",reason="${reason}"} `));
  return line === undefined ? undefined : Number(line.split(' ').pop());
}

describe('two serve replicas on one PostgreSQL, each with the schedule', () => {
  it('store exactly what E6 serves, never load a window twice at once, and take turns under the lock', async () => {
    // Two whole days of records ending an hour ago (before now minus SYNC_SETTLE), so what E6 serves does not move.
    const start = new Date(Math.floor(Date.now() / DAY) * DAY - 2 * DAY);
    const s = await startSimulator({ port: 0, records: 3_000, start, end: new Date(Date.now() - 3_600_000), faults: { latencyMs: 20 } });
    closers.push(() => s.close());

    const spawnReplica = (name: string): Replica => {
      const server = startServe(
        {
          ...simulatorEnv(s),
          DATABASE_URL: db.url,
          DATABASE_SCHEMA: SCHEMA,
          SYNC_START_DATE: start.toISOString(),
          SYNC_WINDOW: '1h',
          SYNC_SCHEDULE: '*/2 * * * * *',
          AUDIT_SCHEDULE: 'off',
          LOG_FORMAT: 'json',
          LOG_LEVEL: 'info',
        },
        { closers },
      );
      return {
        name,
        lines: () =>
          server
            .output()
            .split('\n')
            .filter((l) => l.startsWith('{'))
            .map((l) => JSON.parse(l) as { msg: string; level: string }),
        url: () => server.listening(30_000, 50),
        stop: () => {
          server.child.kill('SIGTERM');
          return server.exited;
        },
      };
    };
    const replicas = [spawnReplica('a'), spawnReplica('b')];
    const urls = await Promise.all(replicas.map((r) => r.url()));

    const started = (r: Replica) => r.lines().filter((l) => l.msg === 'sync run started');
    const locked = (r: Replica) => r.lines().filter((l) => l.msg.startsWith(LOCKED_LINE));
    // Both replicas tick at the same seconds: go on until at least 6 runs started, and both ran or a tick found the lock held.
    await until(
      'six runs, split between the replicas or a locked tick',
      () => {
        const runs = replicas.map((r) => started(r).length);
        const turns = runs.every((n) => n > 0) || replicas.some((r) => locked(r).length > 0);
        return runs[0]! + runs[1]! >= 6 && turns ? true : undefined;
      },
      60_000,
      200,
    );

    // Each replica exports the locked skips (at 0 from the start), and their sum counts the ticks it logged as locked.
    const metrics = await Promise.all(urls.map(async (url) => (await request(`${url}/metrics`, { reset: true })).body.text()));
    const lockedSeen = replicas.map((r) => locked(r).length);
    for (const [i, text] of metrics.entries()) {
      expect(skipped(text, 'locked'), replicas[i]!.name).toBeGreaterThanOrEqual(lockedSeen[i]!);
      expect(skipped(text, 'running'), replicas[i]!.name).toBeDefined();
    }
    expect(await Promise.all(replicas.map((r) => r.stop()))).toEqual([0, 0]);

    // Each locked tick was logged at info, naming the source.
    for (const r of replicas) for (const line of locked(r)) expect(line, r.name).toMatchObject({ level: 'info', source: 'default' });
    const runIds = replicas.map((r) => started(r).map((l) => Number(l.runId)));
    expect(runIds[0]!.length + runIds[1]!.length).toBeGreaterThanOrEqual(6);
    expect(runIds.every((ids) => ids.length > 0) || replicas.some((r) => locked(r).length > 0)).toBe(true);

    // Exactly what E6 serves for the range, as a multiset of payloads.
    const served = s.servedJson(start).map((text) => canonicalJson(JSON.parse(text)));
    served.sort();
    expect(served.length).toBeGreaterThan(1_000);
    expect(await storedMultiset(bed.pool, SCHEMA)).toEqual(served);

    // Every run recorded was started by exactly one replica, and none is left running.
    const { rows: runs } = await bed.pool.query<{ id: string; status: string; started_at: Date; finished_at: Date | null }>(
      `select id, status, started_at, finished_at from "${SCHEMA}".sync_runs where source = 'default' order by started_at, id`,
    );
    expect(runs.map((r) => Number(r.id)).sort((x, y) => x - y)).toEqual([...runIds[0]!, ...runIds[1]!].sort((x, y) => x - y));
    expect(runs.filter((r) => r.status !== 'succeeded' && r.status !== 'interrupted')).toEqual([]);
    // Runs hold the source's lock from before their row is written until after it is finished: none overlaps the next.
    for (let i = 1; i < runs.length; i++) expect(runs[i - 1]!.finished_at!.getTime(), `run ${runs[i]!.id}`).toBeLessThanOrEqual(runs[i]!.started_at.getTime());

    // The ledger: windows of the source never overlap, none is parked, and each counts exactly the rows stored for it.
    const { rows: overlaps } = await bed.pool.query<{ n: number }>(
      `select count(*)::int as n from "${SCHEMA}".sync_windows a join "${SCHEMA}".sync_windows b
         on a.source = b.source and a.window_start < b.window_start and a.window_end > b.window_start`,
    );
    expect(overlaps[0]!.n).toBe(0);
    const { rows: ledger } = await bed.pool.query<{ windows: number; parked: number; miscounted: number; recorded: string; stored: string }>(
      `select count(*)::int as windows,
              count(*) filter (where w.status = 'parked')::int as parked,
              count(*) filter (where w.record_count <> coalesce(r.n, 0))::int as miscounted,
              sum(w.record_count)::text as recorded,
              (select count(*) from "${SCHEMA}".records where source = 'default')::text as stored
         from "${SCHEMA}".sync_windows w
         left join (select window_start, count(*) as n from "${SCHEMA}".records where source = 'default' group by window_start) r
           on r.window_start = w.window_start
        where w.source = 'default'`,
    );
    expect(ledger[0]).toMatchObject({ parked: 0, miscounted: 0, recorded: String(served.length), stored: String(served.length) });
    expect(ledger[0]!.windows).toBeGreaterThanOrEqual(48);
  }, 120_000);
});
