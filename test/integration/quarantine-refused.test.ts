/**
 * Records PostgreSQL refuses, whatever the reason (issue 24 item 3), against real PostgreSQL: a
 * window whose COPY the database refuses for a data reason loads every other record exactly and
 * keeps each refused one in records_quarantine with the SQLSTATE, the database's message and the
 * record's exact text; a second run passes the window. Exactness is judged by what the simulator
 * serves (servedJson), never by its habits.
 */
import { startSimulator, type Simulator } from '@analytics-exporter/simulator';
import { describe, expect, it } from 'vitest';
import { migrate } from '../../src/db/migrate.js';
import type { Pool } from '../../src/db/pool.js';
import { silentLogger } from '../helpers/silent-logger.js';
import { ensurePartitions } from '../../src/sync/store/pg/partitions.js';
import { runSync } from '../../src/sync/run/run.js';
import type { ShrunkWindow } from '../../src/sync/run/summary.js';
import { PgStore } from '../../src/sync/store/pg/store.js';
import { Tables } from '../../src/sync/store/pg/tables.js';
import { withClient } from '../../src/db/pool.js';
import { useAppPool, useTestDatabase } from '../helpers/db.js';
import { canonicalJson, simClient, storedMultiset, syncSettings } from '../helpers/sync.js';
import { pgDeps } from '../helpers/pg-deps.js';

const db = useTestDatabase();
const bed = useAppPool(db);
const closers = bed.closers;

const START = new Date('2026-10-31T00:00:00Z');
const END = new Date('2026-11-01T00:00:00Z');
let schemaCounter = 0;

interface QuarantinedRow {
  payload_text: string;
  json_path: string | null;
  reason: string | null;
  sqlstate: string | null;
  message: string | null;
}

async function quarantined(pool: Pool, schema: string): Promise<QuarantinedRow[]> {
  const { rows } = await pool.query<QuarantinedRow>(
    `select payload_text, json_path, reason, sqlstate, message from "${schema}".records_quarantine order by id`,
  );
  return rows;
}

/** What E6 serves now for [START, END): the stored side (canonical, sorted) and the texts jsonb cannot hold. */
function served(sim: Simulator, refused: (text: string) => boolean): { stored: string[]; refused: string[] } {
  const texts = sim.servedJson(START, END);
  return {
    stored: texts
      .filter((t) => !refused(t))
      .map((t) => canonicalJson(JSON.parse(t)))
      .sort(),
    refused: texts.filter(refused).sort(),
  };
}

async function simulator(options: Parameters<typeof startSimulator>[0]): Promise<Simulator> {
  const s = await startSimulator({ port: 0, start: START, end: END, ...options });
  closers.push(() => s.close());
  return s;
}

function sync(sim: Simulator, schema: string, env: Record<string, string> = {}, shrunk: ShrunkWindow[] = []) {
  const client = simClient(sim);
  closers.push(() => client.close());
  return runSync(
    pgDeps({
      pool: bed.pool,
      client,
      ...syncSettings({ SYNC_WINDOW: '1d', SYNC_PAGE_SIZE: '1000', ...env }),
      schema,
      log: silentLogger,
      observer: { windowShrunk: (w) => shrunk.push(w) },
    }),
    { from: START, to: END },
  );
}

/** Late records with fields of their own (the simulator keeps extra fields as given). */
function insertWithExtras(s: Simulator, records: Record<string, unknown>[]): void {
  s.insertRecords(records as unknown as Parameters<Simulator['insertRecords']>[0]);
}

async function freshSchema(): Promise<string> {
  const schema = `refused_${++schemaCounter}`;
  await migrate(bed.pool, schema, silentLogger);
  return schema;
}

describe('records PostgreSQL refuses are quarantined with the SQLSTATE and message (real PostgreSQL, the simulator)', () => {
  it('five 1e200000 records in a window of 10,000: quarantined exactly, every other record stored exactly, a second run passing the window', async () => {
    const s = await simulator({ records: 10_000, outOfRangeEvery: 2000, outOfRangeValues: ['1e200000'] });
    const schema = await freshSchema();
    const expected = served(s, (t) => t.includes('1e200000'));
    expect(expected.refused).toHaveLength(5);
    const shrunk: ShrunkWindow[] = [];
    expect(await sync(s, schema, {}, shrunk)).toMatchObject({ status: 'succeeded', windows: 1, records: 9_995, quarantined: 5 });
    expect(await storedMultiset(bed.pool, schema)).toEqual(expected.stored);
    const rows = await quarantined(bed.pool, schema);
    expect(rows.map((r) => r.payload_text).sort()).toEqual(expected.refused);
    expect(rows.every((r) => r.sqlstate === '22003' && r.message === 'value overflows numeric format' && r.json_path === null && r.reason === null)).toBe(true);
    const { rows: ledger } = await bed.pool.query<{ record_count: number }>(`select record_count from "${schema}".sync_windows`);
    expect(ledger.map((r) => Number(r.record_count))).toEqual([9_995]);
    // Derived tables agree with what is stored: the refused records are neither counted nor catalogued.
    const { rows: hourly } = await bed.pool.query<{ n: string }>(`select sum(records) as n from "${schema}".records_hourly`);
    expect(Number(hourly[0]!.n)).toBe(9_995);
    const { rows: fields } = await bed.pool.query<{ path: string; records: string }>(`select path, records from "${schema}".record_fields order by path`);
    const { rows: keys } = await bed.pool.query<{ path: string; records: string }>(
      `select k as path, count(*) as records from "${schema}".records, jsonb_object_keys(payload) k group by k order by k`,
    );
    expect(fields).toEqual(keys);

    for (const shrink of ['keep', 'replace']) {
      expect(await sync(s, schema, { SYNC_SHRINK: shrink }, shrunk)).toMatchObject({ status: 'succeeded', windows: 1, records: 9_995, quarantined: 5 });
      expect(await storedMultiset(bed.pool, schema)).toEqual(expected.stored);
      expect((await quarantined(bed.pool, schema)).map((r) => r.payload_text).sort()).toEqual(expected.refused);
    }
    expect(shrunk).toEqual([]);
  });

  it('-1e200000 and 1e-20000 by the database; U+0000, a lone surrogate and nesting depth 1,200 by the sync before sending them', async () => {
    const s = await simulator({ records: 3000, outOfRangeEvery: 500, outOfRangeValues: ['-1e200000', '1e-20000'] });
    // The simulator serves a record with JSON.stringify, which overflows the test worker's stack
    // before 3,000 levels: the database path's test below sends depth 5,000 and 40,000.
    let deep: unknown = 1;
    for (let i = 0; i < 1200; i++) deep = [deep];
    const [nul, lone, nested] = s.dataset.plausibleRecords(3, new Date('2026-10-31T12:00:00Z'), new Date('2026-10-31T13:00:00Z'), false, 9);
    insertWithExtras(s, [
      { ...nul!, note: 'a\u0000b' },
      { ...lone!, note: 'x\ud800y' },
      { ...nested!, deep },
    ]);
    const schema = await freshSchema();
    const bad = (t: string) => /e200000|e-20000|\\u0000|\\ud800|\[\[\[\[/.test(t);
    const expected = served(s, bad);
    expect(expected.refused).toHaveLength(9);
    expect(await sync(s, schema)).toMatchObject({ status: 'succeeded', records: 2994, quarantined: 9 });
    expect(await storedMultiset(bed.pool, schema)).toEqual(expected.stored);
    const rows = await quarantined(bed.pool, schema);
    expect(rows.map((r) => r.payload_text).sort()).toEqual(expected.refused);
    const byDatabase = rows.filter((r) => r.sqlstate !== null);
    expect(byDatabase.map((r) => r.payload_text).every((t) => /-1e200000|1e-20000/.test(t))).toBe(true);
    expect(byDatabase.map((r) => [r.sqlstate, r.message])).toEqual(byDatabase.map(() => ['22003', 'value overflows numeric format']));
    expect(byDatabase).toHaveLength(6);
    expect(
      rows
        .filter((r) => r.sqlstate === null)
        .map((r) => r.json_path!.slice(0, 6))
        .sort(),
    ).toEqual(['$.deep', '$.note', '$.note']);
    expect(await sync(s, schema)).toMatchObject({ status: 'succeeded', records: 2994, quarantined: 9 });
    expect(await quarantined(bed.pool, schema)).toHaveLength(9);
  });

  it('a refusal the code has never seen: a CHECK constraint added to records', async () => {
    const s = await simulator({ records: 2000 });
    const [big, other] = s.dataset.plausibleRecords(2, new Date('2026-10-31T06:00:00Z'), new Date('2026-10-31T07:00:00Z'), false, 3);
    insertWithExtras(s, [
      { ...big!, note: 'x'.repeat(600) },
      { ...other!, customerName: 'Refused Ltd' },
    ]);
    const schema = await freshSchema();
    await bed.pool.query(
      `alter table "${schema}".records add constraint records_small check (octet_length(payload::text) < 500 and payload->>'customerName' is distinct from 'Refused Ltd')`,
    );
    const expected = served(s, (t) => t.includes('"xxxxxxxxxx') || t.includes('Refused Ltd'));
    expect(expected.refused).toHaveLength(2);
    expect(await sync(s, schema)).toMatchObject({ status: 'succeeded', records: 2000, quarantined: 2 });
    expect(await storedMultiset(bed.pool, schema)).toEqual(expected.stored);
    const rows = await quarantined(bed.pool, schema);
    expect(rows.map((r) => r.payload_text).sort()).toEqual(expected.refused);
    expect(rows.map((r) => r.sqlstate)).toEqual(['23514', '23514']);
    expect(rows.every((r) => /violates check constraint "records_small"/.test(r.message!))).toBe(true);
  });

  it('the database path alone, without the sync checks: what jsonb refuses is quarantined with its SQLSTATE, depth 5,000 is stored', async () => {
    const schema = await freshSchema();
    const t = new Tables(schema);
    const window = { start: START.getTime(), end: END.getTime() };
    await withClient(bed.pool, (c) => ensurePartitions(c, t, [window.start], 'month'));
    const { tables } = syncSettings();
    const store = new PgStore({ pool: bed.pool, schema, tables: { ...tables, partitionInterval: 'month' }, log: silentLogger }).forSource(
      'default',
      silentLogger,
    );
    const runId = await store.session((session) => session.ledger.startRun(window));
    const depth = (n: number) => `${'['.repeat(n)}1${']'.repeat(n)}`;
    const texts = [
      '{"id":1}',
      '{"a":1e200000}',
      '{"a":-1e200000}',
      '{"id":2}',
      '{"a":1e-20000}',
      '{"s":"a\\u0000b"}',
      '{"s":"\\ud800"}',
      `{"deep":${depth(5000)}}`,
      `{"deep":${depth(40000)}}`,
      '{"id":3,"tab":"a\\tb\\\\c"}',
    ];
    const text = `{"data":[${texts.join(',')}]}`;
    const stored = await store.session(async (session) => {
      await session.maintenance.ensureRollup();
      return session.inWindow({ window, runId }, async (w) => {
        await w.clear();
        await w.write({ text, keep: texts.map((_, i) => i), eventTimes: texts.map(() => null) }, [], () => undefined);
        return w.end();
      });
    });
    expect(stored.refused.map((r) => [r.text, r.sqlstate])).toEqual([
      ['{"a":1e200000}', '22003'],
      ['{"a":-1e200000}', '22003'],
      ['{"a":1e-20000}', '22003'],
      ['{"s":"a\\u0000b"}', '22P05'],
      ['{"s":"\\ud800"}', '22P02'],
      [`{"deep":${depth(40000)}}`, '54001'],
    ]);
    expect(stored.records).toBe(texts.length - stored.refused.length);
    const rows = await quarantined(bed.pool, schema);
    expect(rows.map((r) => [r.payload_text, r.sqlstate])).toEqual(stored.refused.map((r) => [r.text, r.sqlstate]));
    expect(rows.map((r) => r.message)).toEqual([
      'value overflows numeric format',
      'value overflows numeric format',
      'value overflows numeric format',
      'unsupported Unicode escape sequence',
      'invalid input syntax for type json',
      'stack depth limit exceeded',
    ]);
    const { rows: kept } = await bed.pool.query<{ n: string }>(`select count(*) as n from "${schema}".records where payload ? 'deep'`);
    expect(kept[0]!.n).toBe('1');
  });

  it('a refusal while a large window is still being sent: the connection goes on, 2 of 60,000 refused, the rest stored', async () => {
    const schema = await freshSchema();
    const t = new Tables(schema);
    const window = { start: START.getTime(), end: END.getTime() };
    await withClient(bed.pool, (c) => ensurePartitions(c, t, [window.start], 'month'));
    const { tables } = syncSettings();
    const store = new PgStore({ pool: bed.pool, schema, tables: { ...tables, partitionInterval: 'month' }, log: silentLogger }).forSource(
      'default',
      silentLogger,
    );
    const runId = await store.session((session) => session.ledger.startRun(window));
    const pad = 'p'.repeat(200);
    const page = (from: number) => {
      const texts = Array.from({ length: 20_000 }, (_, i) => (from + i === 1 || from + i === 59_999 ? '{"a":1e200000}' : `{"i":${from + i},"pad":"${pad}"}`));
      return { text: `{"data":[${texts.join(',')}]}`, keep: texts.map((_, i) => i), eventTimes: texts.map(() => null) };
    };
    const stored = await store.session(async (session) => {
      await session.maintenance.ensureRollup();
      return session.inWindow({ window, runId }, async (w) => {
        await w.clear();
        for (const from of [0, 20_000, 40_000]) await w.write(page(from), [], () => undefined);
        return w.end();
      });
    });
    expect(stored.records).toBe(59_998);
    expect(stored.refused.map((r) => [r.text, r.sqlstate])).toEqual([
      ['{"a":1e200000}', '22003'],
      ['{"a":1e200000}', '22003'],
    ]);
    const { rows } = await bed.pool.query<{ n: string; lo: string; hi: string }>(
      `select count(*) as n, min((payload->>'i')::int) as lo, max((payload->>'i')::int) as hi from "${schema}".records`,
    );
    expect(rows[0]).toEqual({ n: '59998', lo: 0, hi: 59_998 });
  });

  it('a CHECK constraint added after the window was stored, under keep: what E6 still returns is refused and quarantined, what it deleted is kept in the quarantine', async () => {
    const s = await simulator({ records: 2000 });
    const ruled = s.dataset
      .plausibleRecords(3, new Date('2026-10-31T06:00:00Z'), new Date('2026-10-31T07:00:00Z'), false, 5)
      .map((r) => ({ ...r, customerName: 'Refused Ltd' }));
    s.insertRecords(ruled);
    const schema = await freshSchema();
    expect(await sync(s, schema)).toMatchObject({ status: 'succeeded', records: 2003, quarantined: 0 });
    await bed.pool.query(
      `alter table "${schema}".records add constraint records_no_refused check (payload->>'customerName' is distinct from 'Refused Ltd') not valid`,
    );
    expect(s.deleteRecords({ records: [ruled[0]!] })).toHaveLength(1);
    const shrunk: ShrunkWindow[] = [];
    expect(await sync(s, schema, { SYNC_SHRINK: 'keep' }, shrunk)).toMatchObject({ status: 'succeeded', windows: 1, records: 2000, quarantined: 3 });
    expect(shrunk).toMatchObject([{ kept: 1, action: 'kept' }]);
    const refused = (t: string) => t.includes('Refused Ltd');
    expect(await storedMultiset(bed.pool, schema)).toEqual(served(s, refused).stored);
    const rows = await quarantined(bed.pool, schema);
    expect(rows.map((r) => r.sqlstate)).toEqual(['23514', '23514', '23514']);
    expect(rows.map((r) => canonicalJson(JSON.parse(r.payload_text))).sort()).toEqual(ruled.map((r) => canonicalJson(r)).sort());
    expect(await sync(s, schema, { SYNC_SHRINK: 'replace' })).toMatchObject({ status: 'succeeded', records: 2000, quarantined: 2 });
  });
});
