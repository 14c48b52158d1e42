/**
 * The ledger module (src/sync/store/pg/ledger.ts) against real PostgreSQL, for what lies beyond
 * the storage port (store-contract.test.ts covers that): the `state` commands' reads and writes,
 * serve's parked gauge, and the schema-wide statements of retention.
 */
import { describe, expect, it } from 'vitest';
import { migrate } from '../../src/db/migrate.js';
import { withClient } from '../../src/db/pool.js';
import { InvalidArgumentError } from '../../src/errors.js';
import { silentLogger } from '../helpers/silent-logger.js';
import { expireWindows, loadedByRuns, PgLedger } from '../../src/sync/store/pg/ledger.js';
import { Tables } from '../../src/sync/store/pg/tables.js';
import type { Window } from '../../src/sync/windows.js';
import { useAppPool, useTestDatabase } from '../helpers/db.js';

const db = useTestDatabase();
const bed = useAppPool(db);

const HOUR = 3_600_000;
const T0 = Date.parse('2026-10-01T00:00:00Z');
const w = (from: number, to: number): Window => ({ start: T0 + from * HOUR, end: T0 + to * HOUR });
const counts = { recordCount: 2, totalRecords: 2, pages: 1 };

let schemas = 0;
/** A migrated schema and `fn` run with a ledger of `source` on one connection. */
async function withLedger<T>(fn: (ledger: PgLedger, t: Tables) => Promise<T>, source = 'alpha'): Promise<T> {
  const schema = `ledger_${++schemas}`;
  await migrate(bed.pool, schema, silentLogger);
  const t = new Tables(schema);
  return withClient(bed.pool, (c) => fn(new PgLedger(c, t, source), t));
}

describe('the ledger in PostgreSQL', () => {
  it('state(): a source that never ran has nothing; then its windows by state, its last run and its watermark', async () => {
    await withLedger(async (ledger) => {
      expect(await ledger.state()).toMatchObject({
        source: 'alpha',
        watermark: undefined,
        lastRun: undefined,
        windows: { committed: { count: 0, records: 0 } },
      });
      const runId = await ledger.startRun(w(0, 4));
      await ledger.recordWindow(w(0, 1), runId, counts);
      await ledger.recordWindow(w(1, 2), runId, counts);
      await ledger.parkWindow({ window: w(2, 3), runId }, 'too large');
      await ledger.finishRun(runId, { status: 'failed', windows: 2, pages: 2, records: 4, error: 'first line\u0000\nsecond line' });
      const state = await ledger.state();
      expect(state.watermark).toBe(w(2, 3).end);
      expect(state.windows.committed).toEqual({ count: 2, from: w(0, 1).start, to: w(1, 2).end, records: 4 });
      expect(state.windows.parked).toEqual({ count: 1, from: w(2, 3).start, to: w(2, 3).end });
      // The error is stored as storableText makes it (no NUL) and shown by its first line.
      expect(state.lastRun).toMatchObject({ id: runId, status: 'failed', error: 'first line\ufffd' });
      expect(await ledger.countParked()).toBe(1);
    });
  });

  it('setWatermark(): forward past an unloaded stretch only with force, naming the stretch; backward always', async () => {
    await withLedger(async (ledger) => {
      const runId = await ledger.startRun(w(0, 3));
      await ledger.recordWindow(w(0, 1), runId, counts);
      await ledger.recordWindow(w(2, 3), runId, counts);
      const refused = ledger.setWatermark({ to: w(2, 3).end, force: false, origin: T0 });
      await expect(refused).rejects.toBeInstanceOf(InvalidArgumentError);
      await expect(refused).rejects.toThrow(`the first [${new Date(w(1, 2).start).toISOString()}, ${new Date(w(1, 2).end).toISOString()})`);
      expect(await ledger.readWatermark()).toBe(w(0, 1).end);
      expect(await ledger.setWatermark({ to: w(2, 3).end, force: true, origin: T0 })).toEqual({ before: w(0, 1).end, after: w(2, 3).end, skipped: w(1, 2) });
      expect(await ledger.setWatermark({ to: T0, force: false, origin: T0 })).toEqual({ before: w(2, 3).end, after: T0, skipped: undefined });
    });
  });

  it('markForReload(): whole windows overlapping the range, not the expired ones, read back by reloadWindows() and cleared by parking', async () => {
    await withLedger(async (ledger, t) => {
      const runId = await ledger.startRun(w(0, 3));
      for (const window of [w(0, 1), w(1, 2), w(2, 3)]) await ledger.recordWindow(window, runId, counts);
      expect(await withClient(bed.pool, (c) => expireWindows(c, t, w(0, 1)))).toBe(1);
      const marks = await ledger.markForReload({ start: w(0, 1).start + 1, end: w(2, 3).start + 1 });
      expect(marks).toEqual({
        windows: [
          { ...w(1, 2), status: 'committed' },
          { ...w(2, 3), status: 'committed' },
        ],
        expired: 1,
      });
      expect(await ledger.reloadWindows()).toEqual([w(1, 2), w(2, 3)]);
      await ledger.parkWindow({ window: w(2, 3), runId }, 'parked');
      expect(await ledger.reloadWindows()).toEqual([w(1, 2)]);
    });
  });

  it("retention's statements are every source's: loadedByRuns() sees any source's windows of the runs, expireWindows() marks them all", async () => {
    const schema = `ledger_${++schemas}`;
    await migrate(bed.pool, schema, silentLogger);
    const t = new Tables(schema);
    await withClient(bed.pool, async (c) => {
      const alpha = new PgLedger(c, t, 'alpha');
      const beta = new PgLedger(c, t, 'beta');
      const a = await alpha.startRun(w(0, 1));
      const b = await beta.startRun(w(0, 1));
      await alpha.recordWindow(w(0, 1), a, counts);
      await beta.recordWindow(w(0, 1), b, counts);
      expect(await loadedByRuns(c, t, w(0, 24), [b])).toBe(true);
      expect(await loadedByRuns(c, t, w(1, 24), [a, b])).toBe(false);
      expect(await expireWindows(c, t, w(0, 24))).toBe(2);
      expect(await alpha.expiredWindows(w(0, 24))).toEqual([w(0, 1)]);
      expect(await beta.committedWindows(w(0, 24))).toEqual([w(0, 1)]);
      expect(await beta.auditWindows(w(0, 24))).toEqual([]);
      await alpha.clearWindows(w(0, 24));
      expect(await alpha.expiredWindows(w(0, 24))).toEqual([]);
      expect(await beta.expiredWindows(w(0, 24))).toEqual([w(0, 1)]);
    });
  });
});
