/**
 * records_typed knows its limit (issue 39, item 7), against real PostgreSQL and a fake E6
 * (test/helpers/fake-e6.ts): data-driven keys (3,000 of 10,000 records each carry a key of their
 * own) are all stored and catalogued, the view holds TYPED_VIEW_MAX_FIELDS fields, the most-carried
 * first, ties by path, and one warning, once, names the limit and the fields left out; PostgreSQL's
 * 1,600 columns are never reached, so no warning blames a dependent object or an owner.
 */
import { describe, expect, it } from 'vitest';
import { migrate } from '../../src/db/migrate.js';
import { createLogger } from '../../src/log.js';
import { ExporterMetrics } from '../../src/metrics/registry.js';
import { runSync } from '../../src/sync/run/run.js';
import { runCliInProcess } from '../helpers/cli.js';
import { useAppPool, useTestDatabase } from '../helpers/db.js';
import { FakeE6, record, type FakeRecord } from '../helpers/fake-e6.js';
import { captureLog, type CapturedLog } from '../helpers/log-capture.js';
import { pgDeps } from '../helpers/pg-deps.js';
import { silentLogger } from '../helpers/silent-logger.js';
import { canonicalJson, storedMultiset, syncSettings } from '../helpers/sync.js';

const db = useTestDatabase();
const bed = useAppPool(db);

const HOUR_MS = 3_600_000;
const START = Date.parse('2026-10-20T00:00:00Z');
const END = START + 4 * HOUR_MS;
const LIMIT_MESSAGE = 'records_typed has columns for the TYPED_VIEW_MAX_FIELDS fields most records carry';

/** A run of `[from, to)` in 1-hour windows over `e6`, logging JSON into `log`. */
async function sync(
  schema: string,
  e6: FakeE6,
  range: { from: number; to: number },
  o: { log: CapturedLog; env?: Record<string, string>; metrics?: ExporterMetrics },
) {
  const deps = pgDeps({
    pool: bed.pool,
    client: e6,
    ...syncSettings({ SYNC_WINDOW: '1h', ...o.env }),
    schema,
    log: createLogger('info', { format: 'json', destination: o.log }),
    ...(o.metrics ? { observer: o.metrics.syncObserver('default') } : {}),
  });
  const result = await runSync(deps, { from: new Date(range.from), to: new Date(range.to), now: () => END + 24 * HOUR_MS });
  expect(result).toMatchObject({ status: 'succeeded' });
}

async function viewColumns(schema: string): Promise<string[]> {
  const { rows } = await bed.pool.query<{ name: string }>(
    `select column_name as name from information_schema.columns where table_schema = $1 and table_name = 'records_typed' order by ordinal_position`,
    [schema],
  );
  return rows.map((r) => r.name);
}

const limitLines = (log: CapturedLog) => log.lines().filter((l) => String(l.msg).startsWith(LIMIT_MESSAGE));
/** The warning a failed recreation logged before: it blamed a dependent object or the owner. */
const blameLines = (log: CapturedLog) => log.lines().filter((l) => /could not be recreated|does an object depend/.test(String(l.msg)));

describe('records_typed at TYPED_VIEW_MAX_FIELDS (real PostgreSQL)', () => {
  it(
    '3,000 data-driven keys in 10,000 records: all stored and catalogued, the view capped at the limit, one warning naming it',
    { timeout: 300_000 },
    async () => {
      // Every 1.44 s from 0.72 s on (none at a cut); records 0, 1, 2, 10, 11, 12… carry a key of their own.
      const records: FakeRecord[] = Array.from({ length: 10_000 }, (_, i) =>
        record(i, START + i * 1440 + 720, {
          eventType: i % 2 === 0 ? 'login' : 'logout',
          customerId: `c${i % 7}`,
          userId: `u${i % 101}`,
          amount: i % 13,
          ...(i % 10 < 3 ? { [`k${String(i).padStart(5, '0')}`]: i } : {}),
        }),
      );
      const e6 = new FakeE6(records, { sleep: async () => undefined });
      const schema = 'typed_limit';
      await migrate(bed.pool, schema, silentLogger);
      const metrics = new ExporterMetrics({ processMetrics: false });
      const log = captureLog();

      // Two runs of two windows each: the second window of the first takes the catalogue past 1,000.
      await sync(schema, e6, { from: START, to: START + 2 * HOUR_MS }, { log, metrics });
      const catalogued = async () => Number((await bed.pool.query<{ n: string }>(`select count(*) as n from "${schema}".record_fields`)).rows[0]!.n);
      expect(await catalogued()).toBe(6 + 1500);
      await sync(schema, e6, { from: START + 2 * HOUR_MS, to: END }, { log, metrics });

      expect(await storedMultiset(bed.pool, schema)).toEqual(records.map(canonicalJson).sort());
      expect(await catalogued()).toBe(3006);
      const columns = await viewColumns(schema);
      // The view's own 7 and the default TYPED_VIEW_MAX_FIELDS, 1,000.
      expect(columns).toHaveLength(7 + 1000);
      // Carried by every record: in it. Of the keys carried once, the first 994 by path: k00000 … k03310.
      expect(columns).toEqual(expect.arrayContaining(['id_2', 'timestamp', 'event_type', 'customer_id', 'user_id', 'amount', 'k00000', 'k03310']));
      expect(columns).not.toContain('k03311');

      const warned = limitLines(log);
      expect(warned).toHaveLength(1);
      expect(warned[0]).toMatchObject({ level: 'warn', setting: 'TYPED_VIEW_MAX_FIELDS', limit: 1000, fields: 1506, leftOut: 506 });
      expect(blameLines(log)).toEqual([]);

      const gauge = await metrics.registry.getSingleMetric('analytics_exporter_record_fields')!.get();
      expect(Object.fromEntries(gauge.values.map((v) => [v.labels.typed_view, v.value]))).toEqual({ column: 1000, left_out: 2006, none: 0 });

      // `fields`: the COLUMN of a field left out is `-`.
      const printed = await runCliInProcess(['fields'], { DATABASE_URL: db.url, DATABASE_SCHEMA: schema, LOG_LEVEL: 'error' });
      expect(printed.code).toBe(0);
      const rows = new Map(
        printed.stdout
          .split('\n')
          .slice(1)
          .map((line) => line.split(/\s+/))
          .map((cells) => [cells[1], cells[2]]),
      );
      expect(printed.stdout.split('\n')[0]).toMatch(/^SOURCE\s+FIELD\s+COLUMN\s/);
      expect([rows.get('amount'), rows.get('k03310'), rows.get('k03311'), rows.get('k09992')]).toEqual(['amount', 'k03310', '-', '-']);
      expect([...rows.values()].filter((column) => column !== undefined && column !== '-')).toHaveLength(1000);
    },
  );

  it('a low limit holds the most-carried fields, ties by path; one warning per change of the limit', { timeout: 120_000 }, async () => {
    // Per hour 100 records: all carry `often` but 10; `half` 50, `tie_b` and `tie_a` 20 each, `rare` 5, `rarest` 1.
    const hour = (h: number, fields: (i: number) => Record<string, unknown>) =>
      Array.from({ length: 100 }, (_, i) => record(h * 100 + i, START + h * HOUR_MS + i * 30_000 + 1000, fields(i)));
    const first = hour(0, (i) => ({
      ...(i < 90 ? { often: i } : {}),
      ...(i < 50 ? { half: 'x' } : {}),
      ...(i >= 50 && i < 70 ? { tie_b: true } : {}),
      ...(i >= 70 && i < 90 ? { tie_a: true } : {}),
      ...(i < 5 ? { rare: i } : {}),
      ...(i === 99 ? { rarest: 1 } : {}),
    }));
    // The next hour: `rare` in 60 records (65 in all, past `half`'s 50), and a new field.
    const second = hour(1, (i) => ({ ...(i < 60 ? { rare: i } : {}), ...(i === 0 ? { fresh: 'new' } : {}) }));
    const e6 = new FakeE6([...first, ...second], { sleep: async () => undefined });
    const schema = 'typed_limit_order';
    await migrate(bed.pool, schema, silentLogger);
    const log = captureLog();
    const env = { TYPED_VIEW_MAX_FIELDS: '5' };
    const fieldsOf = (columns: string[]) => columns.slice(7).sort();

    await sync(schema, e6, { from: START, to: START + HOUR_MS }, { log, env });
    // id and timestamp (100 records; `id` is taken by the view's own), often (90), half (50), then tie_a before tie_b.
    expect(fieldsOf(await viewColumns(schema))).toEqual(['half', 'id_2', 'often', 'tie_a', 'timestamp']);
    expect(limitLines(log).map((l) => [l.limit, l.fields, l.leftOut])).toEqual([[5, 8, 3]]);

    // The same range again, then the next hour: `rare` now outnumbers `half`. Still at 5: no new warning.
    await sync(schema, e6, { from: START, to: START + HOUR_MS }, { log, env });
    await sync(schema, e6, { from: START + HOUR_MS, to: START + 2 * HOUR_MS }, { log, env });
    expect(fieldsOf(await viewColumns(schema))).toEqual(['half', 'id_2', 'often', 'rare', 'timestamp']);
    expect(limitLines(log)).toHaveLength(1);
    const listed = JSON.parse((await runCliInProcess(['fields', '--json'], { DATABASE_URL: db.url, DATABASE_SCHEMA: schema, LOG_LEVEL: 'error' })).stdout) as {
      path: string;
      column: string | null;
    }[];
    expect(Object.fromEntries(listed.map((f) => [f.path, f.column]))).toMatchObject({ rare: 'rare', tie_a: null, tie_b: null, fresh: null, rarest: null });

    // Raised past the catalogue: every field, and a note; lowered again: a warning again.
    await sync(schema, e6, { from: START, to: START + HOUR_MS }, { log, env: { TYPED_VIEW_MAX_FIELDS: '50' } });
    expect(fieldsOf(await viewColumns(schema))).toEqual(['fresh', 'half', 'id_2', 'often', 'rare', 'rarest', 'tie_a', 'tie_b', 'timestamp']);
    expect(log.lines().filter((l) => l.msg === 'records_typed has a column for every field again')).toHaveLength(1);
    await sync(schema, e6, { from: START, to: START + HOUR_MS }, { log, env: { TYPED_VIEW_MAX_FIELDS: '4' } });
    expect(fieldsOf(await viewColumns(schema))).toEqual(['id_2', 'often', 'rare', 'timestamp']);
    expect(limitLines(log).map((l) => [l.limit, l.leftOut])).toEqual([
      [5, 3],
      [4, 5],
    ]);
    expect(blameLines(log)).toEqual([]);
  });

  it('a view built on records_typed blocks its recreation: the warning names the dependent object, not the owner', { timeout: 60_000 }, async () => {
    const e6 = new FakeE6([record(1, START + 1000, { a: 1 }), record(2, START + HOUR_MS + 1000, { a: 2, b: 'new' })], { sleep: async () => undefined });
    const schema = 'typed_limit_dependent';
    await migrate(bed.pool, schema, silentLogger);
    const log = captureLog();
    await sync(schema, e6, { from: START, to: START + HOUR_MS }, { log });
    await bed.pool.query(`create view ${schema}.mine as select a from ${schema}.records_typed`);
    await sync(schema, e6, { from: START + HOUR_MS, to: START + 2 * HOUR_MS }, { log });
    expect(await viewColumns(schema)).not.toContain('b');
    const warned = blameLines(log);
    expect(warned.map((l) => [l.msg, (l.err as { code?: string }).code])).toEqual([
      ['records_typed could not be recreated for the new fields: an object depends on it; it stays as it was', '2BP01'],
    ]);
    await bed.pool.query(`drop view ${schema}.mine`);
  });
});
