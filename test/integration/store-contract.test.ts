/**
 * The storage port's contract (src/sync/store/ports.ts), one suite run against both stores: the
 * in-memory store the run's unit tests use and the PostgreSQL store (a real server, a schema per
 * case). Each case speaks to the port only, so what it proves of one store it proves of the other.
 */
import { describe, expect, it } from 'vitest';
import { migrate } from '../../src/db/migrate.js';
import { silentLogger } from '../helpers/silent-logger.js';
import { inexactCounts } from '../../src/sync/derived/index.js';
import type { SyncStore, WindowWriter } from '../../src/sync/store/ports.js';
import { PgStore } from '../../src/sync/store/pg/store.js';
import type { Window } from '../../src/sync/windows.js';
import { useAppPool, useTestDatabase } from '../helpers/db.js';
import { MemoryStore } from '../helpers/memory-store.js';
import { syncSettings } from '../helpers/sync.js';

const db = useTestDatabase();
const bed = useAppPool(db);

const HOUR = 3_600_000;
const T0 = Date.parse('2026-10-01T00:00:00Z');
const w = (from: number, to: number): Window => ({ start: T0 + from * HOUR, end: T0 + to * HOUR });
const ALL = w(-1000, 1000);
const page = (texts: readonly string[], at = 0) => ({ text: `{"data":[${texts.join(',')}]}`, keep: texts.map((_, i) => i), eventTimes: texts.map(() => at) });
const EMPTY_ROLLUP = inexactCounts();

let schemas = 0;
const stores: [string, () => Promise<SyncStore>][] = [
  ['in-memory', async () => new MemoryStore()],
  [
    'PostgreSQL',
    async () => {
      const schema = `contract_${++schemas}`;
      await migrate(bed.pool, schema, silentLogger);
      const { tables } = syncSettings();
      const store = new PgStore({ pool: bed.pool, schema, tables, log: silentLogger }).forSource('default', silentLogger);
      // As a run does before its first window: the rollup tables built for the settings.
      await store.session((s) => s.maintenance.ensureRollup());
      return store;
    },
  ],
];

/** Loads `window` with `texts` in one window transaction of run `runId`; `keep` for SYNC_SHRINK=keep. */
async function load(store: SyncStore, of: { window: Window; runId: number }, texts: readonly string[], options: { keep?: boolean; fail?: boolean } = {}) {
  return store.session(async (s) => {
    await s.maintenance.ensurePartitions([of.window.start]);
    return s.inWindow(of, async (writer: WindowWriter) => {
      const cleared = await writer.clear(options.keep);
      await writer.write(page(texts, of.window.start), [], () => undefined);
      const stored = await writer.end();
      if (options.fail) throw new Error('the window failed after its writes');
      await writer.addDerived(EMPTY_ROLLUP, new Map());
      const watermark = await writer.record({ recordCount: stored.records, totalRecords: texts.length, pages: 1 });
      return { cleared, stored, watermark };
    });
  });
}

const run = (store: SyncStore, range: Window) => store.session((s) => s.ledger.startRun(range));

describe.each(stores)('the storage port: %s', (_name, open) => {
  it('an empty ledger: no watermark, no windows, no runs to abandon', async () => {
    const store = await open();
    await store.session(async (s) => {
      expect(await s.ledger.readWatermark()).toBeUndefined();
      expect(await s.ledger.committedWindows(ALL)).toEqual([]);
      expect(await s.ledger.parkedWindows()).toEqual([]);
      expect(await s.ledger.auditWindows(ALL)).toEqual([]);
      expect(await s.ledger.abandonStaleRuns()).toBe(0);
    });
  });

  it('a committed window is in the ledger with what it stored, and moves the watermark to its end', async () => {
    const store = await open();
    const runId = await run(store, w(0, 2));
    const first = await load(store, { window: w(0, 1), runId }, ['{"a":1}', '{"a":2}', '{"a":2}']);
    expect(first).toMatchObject({ cleared: 0, stored: { records: 3, refused: [], kept: { records: 0, quarantined: 0 } }, watermark: w(0, 1).end });
    await store.session(async (s) => {
      expect(await s.ledger.readWatermark()).toBe(w(0, 1).end);
      expect(await s.ledger.committedWindows(ALL)).toEqual([w(0, 1)]);
      expect(await s.ledger.auditWindows(ALL)).toEqual([{ ...w(0, 1), stored: 3, seen: 3, followsLedger: false, parked: false }]);
      expect(await s.ledger.ledgerCounts(w(5, 6))).toEqual([{ ...w(0, 1), totalRecords: 3 }]);
    });
  });

  it('a window transaction that throws leaves nothing: no records, no ledger row, the watermark as it was', async () => {
    const store = await open();
    const runId = await run(store, w(0, 2));
    await load(store, { window: w(0, 1), runId }, ['{"a":1}']);
    await expect(load(store, { window: w(1, 2), runId }, ['{"b":1}'], { fail: true })).rejects.toThrow('the window failed');
    await store.session(async (s) => {
      expect(await s.ledger.committedWindows(ALL)).toEqual([w(0, 1)]);
      expect(await s.ledger.readWatermark()).toBe(w(0, 1).end);
    });
  });

  it('the watermark never jumps a gap: a window after one not loaded is recorded, the watermark stays', async () => {
    const store = await open();
    const runId = await run(store, w(0, 5));
    await load(store, { window: w(0, 1), runId }, ['{"a":1}']);
    expect((await load(store, { window: w(2, 3), runId }, ['{"a":2}'])).watermark).toBe(w(0, 1).end);
    expect((await load(store, { window: w(1, 2), runId }, ['{"a":3}'])).watermark).toBe(w(1, 2).end);
    await store.session(async (s) => expect(await s.ledger.committedWindows(ALL)).toEqual([w(0, 1), w(1, 2), w(2, 3)]));
  });

  it('a window loaded again replaces what it held; under keep, the union of what it held and what it gets now', async () => {
    const store = await open();
    const runId = await run(store, w(0, 1));
    await load(store, { window: w(0, 1), runId }, ['{"a":1}', '{"a":1}', '{"b":2}']);
    const replaced = await load(store, { window: w(0, 1), runId }, ['{"a":1}', '{"c":3}']);
    expect(replaced).toMatchObject({ cleared: 3, stored: { records: 2, kept: { records: 0, quarantined: 0 } } });
    const kept = await load(store, { window: w(0, 1), runId }, ['{"a":1}'], { keep: true });
    expect(kept).toMatchObject({ cleared: 2, stored: { records: 1, kept: { records: 1, quarantined: 0 } } });
    await store.session(async (s) => expect((await s.ledger.auditWindows(ALL)).map((x) => x.stored)).toEqual([2]));
  });

  it('a parked window: listed with its reason, not committed, the watermark past it, and it owns its end boundary set', async () => {
    const store = await open();
    const runId = await run(store, w(0, 3));
    await load(store, { window: w(0, 1), runId }, ['{"a":1}']);
    const after = await store.session((s) => s.ledger.parkWindow({ window: w(1, 2), runId }, 'too large'));
    expect(after).toBe(w(1, 2).end);
    await store.session(async (s) => {
      expect(await s.ledger.parkedWindows()).toEqual([
        { ...w(1, 2), reason: 'too large', parkedAt: expect.any(Number), recordCount: 0, runId, expired: false },
      ]);
      expect(await s.ledger.parkedWindows(w(5, 6))).toEqual([]);
      expect(await s.ledger.committedWindows(ALL)).toEqual([w(0, 1)]);
      expect(await s.ledger.auditWindows(ALL)).toMatchObject([{ parked: false }, { ...w(1, 2), parked: true, followsLedger: true }]);
      expect(await s.ledger.heldAtEnd(w(1, 2).end, new Map([['{"x":1}', 2]]))).toEqual(new Map([['{"x":1}', 2]]));
    });
  });

  it('heldAtEnd: of a boundary set, what the window ending there stores, at most as often as asked; nothing without a window', async () => {
    const store = await open();
    const runId = await run(store, w(0, 1));
    await load(store, { window: w(0, 1), runId }, ['{"a":1}', '{"a":1}', '{"b":2}']);
    await store.session(async (s) => {
      const asked = new Map([
        ['{"a":1}', 3],
        ['{"b":2}', 1],
        ['{"z":9}', 1],
      ]);
      expect(await s.ledger.heldAtEnd(w(0, 1).end, asked)).toEqual(
        new Map([
          ['{"a":1}', 2],
          ['{"b":2}', 1],
        ]),
      );
      expect(await s.ledger.heldAtEnd(w(3, 4).end, asked)).toEqual(new Map());
    });
  });

  it('runs: ids increase, a run left running is abandoned once', async () => {
    const store = await open();
    const a = await run(store, w(0, 1));
    const b = await run(store, w(0, 1));
    expect(b).toBeGreaterThan(a);
    await store.session((s) => s.ledger.finishRun(a, { status: 'succeeded', windows: 0, pages: 0, records: 0 }));
    await store.session(async (s) => {
      expect(await s.ledger.abandonStaleRuns()).toBe(1);
      expect(await s.ledger.abandonStaleRuns()).toBe(0);
    });
  });

  it('an exclusive lock is one session’s: another is refused at once without wait, and gets it after', async () => {
    const store = await open();
    await store.session((s1) =>
      s1.lock('contract:lock', { wait: false }, async () => {
        const other = await store.session((s2) => s2.lock('contract:lock', { wait: false }, async () => 'taken'));
        expect(other).toEqual({ acquired: false });
        const shared = await store.session((s2) => s2.lock('contract:lock', { wait: false, shared: true }, async () => 'taken'));
        expect(shared).toEqual({ acquired: false });
      }),
    );
    expect(await store.session((s) => s.lock('contract:lock', { wait: false }, async () => 'taken'))).toEqual({ acquired: true, value: 'taken' });
  });
});
