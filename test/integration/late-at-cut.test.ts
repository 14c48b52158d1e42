/**
 * A record that arrives late at exactly a cut between two windows, from an E6 whose toDate is
 * inclusive: E6 returns it with both windows, and the earlier one owns it (src/sync/membership/boundary.ts).
 * When the earlier window was loaded before the record arrived and is not loaded again, the
 * later window must not drop it: nothing else would ever store it. A run that loads both windows
 * again moves it to the earlier one, under either SYNC_SHRINK: under `keep` the later window's
 * union must not keep its old copy as if E6 had deleted it (a duplicate the soak found).
 */
import { describe, expect, it } from 'vitest';
import { startSimulator, type Simulator } from '@analytics-exporter/simulator';
import { migrate } from '../../src/db/migrate.js';
import { silentLogger } from '../helpers/silent-logger.js';
import { runSync, type SyncResult } from '../../src/sync/run/run.js';
import { useAppPool, useTestDatabase } from '../helpers/db.js';
import { canonicalJson, expectedMultiset, simClient, storedMultiset, syncSettings } from '../helpers/sync.js';
import { pgDeps } from '../helpers/pg-deps.js';

const db = useTestDatabase();
const bed = useAppPool(db);
const closers = bed.closers;
let schemaCounter = 0;

const DAY_START = new Date('2026-10-31T00:00:00Z');
const DAY_END = new Date('2026-11-01T00:00:00Z');
const CUT = new Date('2026-10-31T12:00:00Z');
const BEFORE = '2026-10-31T11:00:00.000Z';

type Shrink = 'keep' | 'replace';

async function setup(): Promise<{ s: Simulator; schema: string }> {
  // One record every 6 minutes on whole minutes, so base records lie on the hour's cuts too; toDate inclusive (the simulator's default).
  const s = await startSimulator({ port: 0, records: 240, start: DAY_START, end: DAY_END, timePrecisionMs: 60_000 });
  closers.push(() => s.close());
  const schema = `late_cut_${++schemaCounter}`;
  await migrate(bed.pool, schema, silentLogger);
  return { s, schema };
}

async function sync(s: Simulator, schema: string, from: Date, shrink: Shrink): Promise<SyncResult> {
  const client = simClient(s);
  closers.push(() => client.close());
  return runSync(pgDeps({ pool: bed.pool, client, ...syncSettings({ SYNC_WINDOW: '1h', SYNC_SHRINK: shrink }), schema, log: silentLogger }), {
    from,
    to: DAY_END,
  });
}

/** Windows holding the late record, by start. */
async function holders(schema: string, text: string): Promise<string[]> {
  const { rows } = await bed.pool.query<{ start: Date; payload: unknown }>(`select window_start as start, payload from "${schema}".records`);
  return rows.filter((r) => canonicalJson(r.payload) === text).map((r) => r.start.toISOString());
}

/** Asserts that records holds the simulator's records of the day once each, but the one jsonb refuses (in the quarantine). */
async function expectExact(s: Simulator, schema: string): Promise<void> {
  const expected = expectedMultiset(s, DAY_START, DAY_END).filter((r) => !r.includes('late-bad-at-the-cut'));
  expect(await storedMultiset(bed.pool, schema)).toEqual(expected);
}

/** Windows holding a quarantined record whose text has `marker`, by start. */
async function quarantineHolders(schema: string, marker: string): Promise<string[]> {
  const { rows } = await bed.pool.query<{ start: Date }>(
    `select window_start as start from "${schema}".records_quarantine where strpos(payload_text, $1) > 0 order by window_start`,
    [marker],
  );
  return rows.map((r) => r.start.toISOString());
}

describe('a late record at exactly a cut (inclusive toDate, real PostgreSQL)', () => {
  for (const shrink of ['keep', 'replace'] as const) {
    it(`is stored once when a run loads again from the cut, and moves to the window before when a run loads both (SYNC_SHRINK=${shrink})`, async () => {
      const { s, schema } = await setup();
      // One record at the cut from the start: the window before it stores it, so the later window must drop it.
      const onTime = { ...s.dataset.record(3), timestamp: CUT.toISOString(), userId: 'on-time-at-the-cut' };
      s.insertRecords([onTime]);
      expect(await sync(s, schema, DAY_START, shrink)).toMatchObject({ status: 'succeeded' });
      expect(await holders(schema, canonicalJson(onTime))).toEqual([BEFORE]);
      const late = { ...s.dataset.record(7), timestamp: CUT.toISOString(), userId: 'late-at-the-cut' };
      // And one jsonb refuses (U+0000), which goes to the quarantine: it is compared by text.
      const lateBad = { ...s.dataset.record(8), timestamp: CUT.toISOString(), userId: 'late-bad-at-the-cut', note: 'a\u0000b' };
      s.insertRecords([late, lateBad]);
      // E6's boundary set at the cut: the record the window before stores, and the late ones it does not.
      expect(s.servedJson(CUT, CUT)).toHaveLength(3);

      expect(await sync(s, schema, CUT, shrink)).toMatchObject({ status: 'succeeded' });
      expect(await holders(schema, canonicalJson(late))).toEqual([CUT.toISOString()]);
      expect(await quarantineHolders(schema, 'late-bad-at-the-cut')).toEqual([CUT.toISOString()]);
      expect(await holders(schema, canonicalJson(onTime))).toEqual([BEFORE]);
      await expectExact(s, schema);

      // Both windows again: the window before owns the late records now, and the later window keeps no copy.
      expect(await sync(s, schema, new Date(BEFORE), shrink)).toMatchObject({ status: 'succeeded' });
      expect(await holders(schema, canonicalJson(late))).toEqual([BEFORE]);
      expect(await quarantineHolders(schema, 'late-bad-at-the-cut')).toEqual([BEFORE]);
      expect(await holders(schema, canonicalJson(onTime))).toEqual([BEFORE]);
      await expectExact(s, schema);
    });
  }
});
