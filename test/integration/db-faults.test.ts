import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrate } from '../../src/db/migrate.js';
import { createPool, type Pool } from '../../src/db/pool.js';
import { silentLogger } from '../helpers/silent-logger.js';
import { startSimulator, type Simulator } from '@analytics-exporter/simulator';
import { runSync } from '../../src/sync/run/run.js';
import { useTestDatabase } from '../helpers/db.js';
import { expectExactDataset, simClient, syncSettings } from '../helpers/sync.js';
import { pgDeps } from '../helpers/pg-deps.js';

const db = useTestDatabase();
let pool: Pool;
let admin: Pool;
let sim: Simulator;
const START = new Date('2026-10-25T00:00:00Z');
const END = new Date('2026-11-01T00:00:00Z');

beforeAll(async () => {
  pool = createPool(db.url, silentLogger, { max: 2 });
  admin = createPool(db.url, silentLogger, { max: 1 });
  sim = await startSimulator({ port: 0, records: 20_000, start: START, end: END, faults: { latencyMs: 30 } });
  await migrate(pool, 'faults', silentLogger);
});
afterAll(async () => {
  await sim.close();
  await pool.end();
  await admin.end();
});

describe('database faults', () => {
  it('a connection killed with pg_terminate_backend mid-window fails the run cleanly; the next run gives the exact dataset', async () => {
    const client = simClient(sim);
    let windows = 0;
    let killed: Promise<number> | undefined;
    const run = runSync(
      pgDeps({
        pool,
        client,
        ...syncSettings({ SYNC_WINDOW: '1d', SYNC_PAGE_SIZE: '200', SYNC_CONCURRENCY: '1' }),
        schema: 'faults',
        log: silentLogger,
        observer: {
          pageLoaded: () => {
            if (++windows === 15) {
              // Every connection of the run's pool, in whatever state (between statements it is idle).
              killed = admin
                .query<{ pid: number }>(
                  "select pg_terminate_backend(pid) as pid from pg_stat_activity where application_name = 'analytics-exporter' and datname = current_database() and pid <> pg_backend_pid()",
                )
                .then((r) => r.rowCount ?? 0);
            }
          },
        },
      }),
      { from: START, to: END },
    );
    // Either the run reports failure or, when even recording it fails, rejects: never a crash.
    const outcome = await run.then(
      (result) => result.status,
      (err: Error) => `rejected: ${err.message}`,
    );
    expect(await killed).toBeGreaterThanOrEqual(1);
    // The run's end is recorded on a fresh connection: failed, not left `running` to be called abandoned.
    expect(outcome).toBe('failed');
    const runs = await admin.query<{ status: string; error: string | null }>(`select status, error from faults.sync_runs order by id`);
    // The client reads either the server's FATAL message or, when the kill lands mid-read, the reset,
    // or, when it lands while a COPY's rows are being written, the broken pipe (seen under load).
    expect(runs.rows).toEqual([{ status: 'failed', error: expect.stringMatching(/terminat|connection|ECONNRESET|EPIPE/i) }]);
    const partial = await admin.query<{ stray: number }>(
      `select count(*)::int as stray from faults.records r where not exists (select 1 from faults.sync_windows w where w.window_start = r.window_start)`,
    );
    expect(partial.rows[0]!.stray).toBe(0);

    const next = await runSync(pgDeps({ pool, client, ...syncSettings({ SYNC_WINDOW: '1d' }), schema: 'faults', log: silentLogger }), { from: START, to: END });
    expect(next.status).toBe('succeeded');
    await expectExactDataset(pool, 'faults', sim, START, END);
    await client.close();
  });
});
