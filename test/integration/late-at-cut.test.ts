/**
 * A record that arrives late at exactly a cut between two windows, from an E6 whose toDate is
 * inclusive: E6 returns it with both windows, and the earlier one owns it (src/sync/boundary.ts).
 * When the earlier window was loaded before the record arrived and is not loaded again, the
 * later window must not drop it: nothing else would ever store it.
 */
import { describe, expect, it } from 'vitest';
import { startSimulator, type Simulator } from '@analytics-exporter/simulator';
import { migrate } from '../../src/db/migrate.js';
import { silentLogger } from '../../src/log.js';
import { runSync, type SyncResult } from '../../src/sync/run.js';
import { useAppPool, useTestDatabase } from '../helpers/db.js';
import { canonicalJson, expectExactDataset, simClient, syncSettings } from '../helpers/sync.js';

const db = useTestDatabase();
const bed = useAppPool(db);
const closers = bed.closers;
let schemaCounter = 0;

const DAY_START = new Date('2026-10-31T00:00:00Z');
const DAY_END = new Date('2026-11-01T00:00:00Z');
const CUT = new Date('2026-10-31T12:00:00Z');

async function setup(): Promise<{ s: Simulator; schema: string }> {
  // One record every 6 minutes on whole minutes, so base records lie on the hour's cuts too; toDate inclusive (the simulator's default).
  const s = await startSimulator({ port: 0, records: 240, start: DAY_START, end: DAY_END, timePrecisionMs: 60_000 });
  closers.push(() => s.close());
  const schema = `late_cut_${++schemaCounter}`;
  await migrate(bed.pool, schema, silentLogger);
  return { s, schema };
}

async function sync(s: Simulator, schema: string, from: Date): Promise<SyncResult> {
  const client = simClient(s);
  closers.push(() => client.close());
  return runSync({ pool: bed.pool, client, ...syncSettings({ SYNC_WINDOW: '1h' }), schema, log: silentLogger }, { from, to: DAY_END });
}

/** Windows holding the late record, by start. */
async function holders(schema: string, text: string): Promise<string[]> {
  const { rows } = await bed.pool.query<{ start: Date; payload: unknown }>(`select window_start as start, payload from "${schema}".records`);
  return rows.filter((r) => canonicalJson(r.payload) === text).map((r) => r.start.toISOString());
}

describe('a late record at exactly a cut (inclusive toDate, real PostgreSQL)', () => {
  it('is stored once when a run loads again from the cut and not the window before it', async () => {
    const { s, schema } = await setup();
    // One record at the cut from the start: the window before it stores it, so the later window must drop it.
    const onTime = { ...s.dataset.record(3), timestamp: CUT.toISOString(), userId: 'on-time-at-the-cut' };
    s.insertRecords([onTime]);
    expect(await sync(s, schema, DAY_START)).toMatchObject({ status: 'succeeded' });
    expect(await holders(schema, canonicalJson(onTime))).toEqual(['2026-10-31T11:00:00.000Z']);
    const late = { ...s.dataset.record(7), timestamp: CUT.toISOString(), userId: 'late-at-the-cut' };
    s.insertRecords([late]);
    // E6's boundary set at the cut: the record the window before stores, and the late one it does not.
    expect(s.servedJson(CUT, CUT)).toHaveLength(2);

    expect(await sync(s, schema, CUT)).toMatchObject({ status: 'succeeded' });
    expect(await holders(schema, canonicalJson(late))).toEqual([CUT.toISOString()]);
    expect(await holders(schema, canonicalJson(onTime))).toEqual(['2026-10-31T11:00:00.000Z']);
    await expectExactDataset(bed.pool, schema, s, DAY_START, DAY_END);
  });
});
