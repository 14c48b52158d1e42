/**
 * A DBA's `idle_in_transaction_session_timeout = 2s` and an E6 that takes 3 s a page (issue 38):
 * a window's transaction opens once its pages are read (SYNC_READ_AHEAD), so the sync is exact;
 * a window streamed past the bound fails naming 25P03 and the setting, never "unreachable", and
 * the next run with the bound back completes the data.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator, type Simulator } from '@analytics-exporter/simulator';
import { createPool, type Pool } from '../../src/db/pool.js';
import { runCli } from '../helpers/cli.js';
import { useTestDatabase } from '../helpers/db.js';
import { silentLogger } from '../helpers/silent-logger.js';
import { expectExactDataset, simulatorEnv } from '../helpers/sync.js';

const db = useTestDatabase();
const START = new Date('2026-10-20T00:00:00Z');
const END = new Date('2026-10-23T00:00:00Z');
const RECORDS = 3000;
let pool: Pool;
let sim: Simulator;

beforeAll(async () => {
  pool = createPool(db.url, silentLogger, { max: 2 });
  // For every session opened from now on, the exporter's included.
  await pool.query(`do $$ begin execute format('alter database %I set idle_in_transaction_session_timeout = %L', current_database(), '2s'); end $$`);
  sim = await startSimulator({ port: 0, records: RECORDS, start: START, end: END, faults: { latencyMs: 3000 } });
});
afterAll(async () => {
  await sim?.close();
  await pool?.end();
});

function sync(schema: string, extra: Record<string, string> = {}) {
  const env = { ...simulatorEnv(sim), DATABASE_URL: db.url, DATABASE_SCHEMA: schema, SYNC_WINDOW: '1d', LOG_LEVEL: 'info', ...extra };
  return runCli(['sync', '--from', START.toISOString(), '--to', END.toISOString()], env, 150_000);
}

describe('idle_in_transaction_session_timeout = 2s, E6 at 3 s a page', () => {
  it('the timeout is in force on new sessions', async () => {
    const fresh = db.pool({ max: 1 });
    const { rows } = await fresh.query<{ timeout: string }>('select current_setting($1) as timeout', ['idle_in_transaction_session_timeout']);
    expect(rows[0]!.timeout).toBe('2s');
  });

  it('windows read ahead before their transaction: sync exits 0 and stores every record', { timeout: 180_000 }, async () => {
    const run = await sync('ahead');
    expect(run.stderr).not.toContain('25P03');
    expect(run.code).toBe(0);
    expect(await expectExactDataset(pool, 'ahead', sim, START, END)).toBe(RECORDS);
    const { rows } = await pool.query<{ windows: number }>('select count(*)::int as windows from ahead.sync_windows');
    expect(rows[0]!.windows).toBe(3);
  });

  it('a window over SYNC_READ_AHEAD fails naming 25P03 and the setting; the next run completes the data', { timeout: 240_000 }, async () => {
    const streamed = await sync('streamed', { SYNC_READ_AHEAD: '0' });
    expect(streamed.code).toBe(1);
    expect(streamed.stderr).toContain('window over SYNC_READ_AHEAD');
    expect(streamed.stderr).toMatch(/25P03 idle_in_transaction_session_timeout\]: a transaction stayed idle longer than idle_in_transaction_session_timeout/);
    expect(streamed.stderr).not.toMatch(/unreachable|not queryable/);
    const { rows } = await pool.query<{ status: string; error: string }>('select status, error from streamed.sync_runs order by id');
    expect(rows).toEqual([{ status: 'failed', error: expect.stringContaining('SQLSTATE 25P03 idle_in_transaction_session_timeout') }]);

    const next = await sync('streamed');
    expect(next.code).toBe(0);
    expect(await expectExactDataset(pool, 'streamed', sim, START, END)).toBe(RECORDS);
  });
});
