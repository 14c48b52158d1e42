import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import type { Dashboard, Panel, RowPanel, VariableModel } from '@grafana/grafana-foundation-sdk/dashboard';
import { describe, expect, it } from 'vitest';
import { migrateDatabase, rebuildRollup } from '../../src/app/schema.js';
import { DEFAULT_SOURCE, loadConfig } from '../../src/config.js';
import { migrate } from '../../src/db/migrate.js';
import type { PoolClient } from '../../src/db/pool.js';
import { silentLogger } from '../helpers/silent-logger.js';
import { startSimulator, type Simulator } from '@analytics-exporter/simulator';
import { Derived } from '../../src/sync/derived/index.js';
import { compareCodePoints } from '../../src/sync/derived/rollup/code-points.js';
import { runSync, type SyncResult } from '../../src/sync/run/run.js';
import { Rollups } from '../../src/sync/derived/rollup/rollups.js';
import { Tables } from '../../src/sync/store/pg/tables.js';
import { DASHBOARDS_DIR } from '../../grafana/src/generate.js';
import { renderSql } from '../../grafana/src/interpolate.js';
import { runCliInProcess } from '../helpers/cli.js';
import { useAppPool, useTestDatabase } from '../helpers/db.js';
import { simClient, syncSettings } from '../helpers/sync.js';
import { pgDeps } from '../helpers/pg-deps.js';
import { countRollup } from '../helpers/rollup-counts.js';

const db = useTestDatabase();
const bed = useAppPool(db);
const closers = bed.closers;
let schemaCounter = 0;

const HOUR_MS = 3_600_000;
// The hours cross a UTC midnight, so that records_daily_distinct holds two days, each partly filled.
const START = new Date('2026-10-30T18:00:00Z');
const HOURS = 12;
const END = new Date(START.getTime() + HOURS * HOUR_MS);

/** A record the simulator accepts (its own fields, plus any others). */
type SimRecord = ReturnType<Simulator['dataset']['plausibleRecords']>[number];

async function freshSchema(): Promise<string> {
  const schema = `rollups_${++schemaCounter}`;
  await migrate(bed.pool, schema, silentLogger);
  return schema;
}

async function sim(extra: SimRecord[] = []): Promise<Simulator> {
  const s = await startSimulator({ port: 0, records: 300, start: START, end: END });
  if (extra.length > 0) s.insertRecords(extra);
  closers.push(() => s.close());
  return s;
}

/** Plausible records of [from, to) with `fields` merged into each (a field set to undefined is left out). */
function extraRecords(s: Simulator, count: number, from: Date, to: Date, salt: number, fields: (i: number) => Record<string, unknown>): SimRecord[] {
  return s.dataset.plausibleRecords(count, from, to, false, salt).map((r, i) => {
    const merged: Record<string, unknown> = { ...r };
    for (const [key, value] of Object.entries(fields(i))) if (value !== undefined) merged[key] = value;
    return merged as unknown as SimRecord;
  });
}

async function sync(
  s: Simulator,
  schema: string,
  env: Record<string, string>,
  options: Parameters<typeof runSync>[1],
): Promise<Extract<SyncResult, { runId: number }>> {
  const client = simClient(s);
  closers.push(() => client.close());
  const result = await runSync(pgDeps({ pool: bed.pool, client, ...syncSettings({ SYNC_WINDOW: '1h', ...env }), schema, log: silentLogger }), options);
  if (result.status === 'locked') throw new Error('unexpectedly locked');
  return result;
}

/**
 * records_hourly summed over window_start, and the same grouping computed from `records`, each
 * sorted: bucket = the UTC hour of event_time, else of window_start; one text value per dimension
 * path (null when absent).
 */
async function rollupAndTruth(schema: string, dims: { column: string; path: string[] }[]): Promise<{ rollup: string[]; truth: string[] }> {
  const cols = dims.map((d) => `, "${d.column}"`).join('');
  const rollup = await bed.pool.query<{ row: string }>(
    `select json_build_array(bucket${cols}, sum(records))::text as row from "${schema}".records_hourly group by bucket${cols}`,
  );
  const values = dims.map((_, i) => `, payload #>> $${i + 1}::text[] as d${i}`).join('');
  const groups = dims.map((_, i) => `, ${i + 2}`).join('');
  const truth = await bed.pool.query<{ row: string }>(
    `select json_build_array(bucket${dims.map((_, i) => `, d${i}`).join('')}, n)::text as row from (
       select date_trunc('hour', coalesce(event_time, window_start), 'UTC') as bucket${values}, count(*) as n
         from "${schema}".records group by 1${groups}) as t`,
    dims.map((d) => d.path),
  );
  return { rollup: rollup.rows.map((r) => r.row).sort(), truth: truth.rows.map((r) => r.row).sort() };
}

/** `array_agg` of the distinct texts of `value` sorted by code point, as records_hourly_distinct keeps them. */
const valuesAgg = (value: string) => `array_agg(distinct ${value} collate "C" order by ${value} collate "C")`;

/**
 * records_hourly_distinct's arrays unioned over window_start, and the same grouping computed from
 * `records`, each sorted: per bucket, grouping path values and distinct field (column, path), the
 * field's distinct non-null values. Checks on the way that each of its rows holds its values
 * sorted and without duplicates, and that no two rows share a key.
 */
async function distinctAndTruth(
  schema: string,
  by: { column: string; path: string[] }[],
  fields: { column: string; path: string[] }[],
): Promise<{ rollup: string[]; truth: string[] }> {
  const cols = by.map((d) => `, "${d.column}"`).join('');
  const rollup = await bed.pool.query<{ row: string }>(
    `select json_build_array(bucket${cols}, value_column, ${valuesAgg('v')})::text as row
       from "${schema}".records_hourly_distinct cross join unnest(distinct_values) as v group by bucket${cols}, value_column`,
  );
  const unsorted = await bed.pool.query<{ n: string }>(
    `select count(*) as n from "${schema}".records_hourly_distinct
      where distinct_values <> array(select distinct v collate "C" from unnest(distinct_values) as v order by 1)`,
  );
  expect(Number(unsorted.rows[0]!.n)).toBe(0);
  const repeated = await bed.pool.query(
    `select 1 from "${schema}".records_hourly_distinct group by source, window_start, bucket${cols}, value_column having count(*) > 1`,
  );
  expect(repeated.rows).toEqual([]);
  const truths: string[] = [];
  for (const f of fields) {
    const values = by.map((_, i) => `, payload #>> $${i + 2}::text[] as d${i}`).join('');
    const groups = by.map((_, i) => `, d${i}`).join('');
    const truth = await bed.pool.query<{ row: string }>(
      `select json_build_array(bucket${groups}, $${by.length + 2}::text, ${valuesAgg('v')})::text as row from (
         select date_trunc('hour', coalesce(event_time, window_start), 'UTC') as bucket${values}, payload #>> $1::text[] as v
           from "${schema}".records where payload #>> $1::text[] is not null) as t group by bucket${groups}`,
      [f.path, ...by.map((d) => d.path), f.column],
    );
    truths.push(...truth.rows.map((r) => r.row));
  }
  return { rollup: rollup.rows.map((r) => r.row).sort(), truth: truths.sort() };
}

/**
 * records_daily_distinct, and records_hourly_distinct's arrays unioned per UTC day the same way,
 * each sorted: per day, grouping columns and field, the distinct values.
 */
async function daysAndHours(schema: string, by: { column: string }[]): Promise<{ days: string[]; hours: string[] }> {
  const cols = by.map((d) => `, "${d.column}"`).join('');
  const days = await bed.pool.query<{ row: string }>(
    `select json_build_array(day${cols}, value_column, distinct_values)::text as row from "${schema}".records_daily_distinct`,
  );
  const hours = await bed.pool.query<{ row: string }>(
    `select json_build_array(date_trunc('day', bucket, 'UTC')${cols}, value_column, ${valuesAgg('v')})::text as row
       from "${schema}".records_hourly_distinct cross join unnest(distinct_values) as v
      group by date_trunc('day', bucket, 'UTC')${cols}, value_column`,
  );
  return { days: days.rows.map((r) => r.row).sort(), hours: hours.rows.map((r) => r.row).sort() };
}

const DIMS = [
  { column: 'event_type', path: ['eventType'] },
  { column: 'medium', path: ['medium'] },
  { column: 'plan', path: ['meta', 'plan'] },
];
const DISTINCT_BY = [
  { column: 'plan', path: ['meta', 'plan'] },
  { column: 'medium', path: ['medium'] },
];
const DISTINCT = [
  { column: 'user_id', path: ['userId'] },
  { column: 'medium_value', path: ['medium'] },
];
const DIMS_ENV = {
  ROLLUP_DIMENSIONS: 'event_type=eventType,medium=medium,plan=meta.plan',
  ROLLUP_DISTINCT: 'user_id=userId,medium_value=medium',
  ROLLUP_DISTINCT_BY: 'plan=meta.plan,medium=medium',
};

describe('records_hourly', () => {
  it('equals count(*) over records grouped the same way after every run: re-runs, lookback, shrink replaced and kept', async () => {
    // The "more" upstream holds 40 records more than the base one (same seed), with a dimension
    // that is a string, JSON null or absent, and a nested one; switching to the base upstream
    // shrinks the windows they were in.
    const base = await sim();
    const more = await sim(
      extraRecords(base, 40, START, END, 3, (i) => ({
        medium: i % 3 === 0 ? 'web' : i % 3 === 1 ? null : undefined,
        meta: i % 2 ? { plan: 'pro' } : undefined,
        at: new Date(START.getTime() + ((i * 7) % HOURS) * HOUR_MS + i * 1000).toISOString(),
      })),
    );
    const step = fc.record({
      upstream: fc.constantFrom('base', 'more'),
      shrink: fc.constantFrom('keep', 'replace'),
      // undefined = resume from the watermark minus the lookback
      fromHour: fc.option(fc.integer({ min: 0, max: HOURS - 1 }), { nil: undefined }),
      spanHours: fc.integer({ min: 1, max: HOURS }),
      lookback: fc.constantFrom('0', '2h', '5h'),
      // Windows shorter than a bucket make several windows share one bucket (a re-load then lowers its count).
      window: fc.constantFrom('20m', '1h', '3h'),
      // `at` is a field only the extra records have: the others are stored without an event time.
      timeField: fc.constantFrom('timestamp', 'at'),
    });
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 2, maxLength: 4 }), async (steps) => {
        const schema = await freshSchema();
        for (const s of steps) {
          const from = s.fromHour === undefined ? undefined : new Date(START.getTime() + s.fromHour * HOUR_MS);
          const to = from === undefined ? END : new Date(Math.min(END.getTime(), from.getTime() + s.spanHours * HOUR_MS));
          const env = {
            ...DIMS_ENV,
            SYNC_SHRINK: s.shrink,
            SYNC_LOOKBACK: s.lookback,
            SYNC_WINDOW: s.window,
            RECORD_TIME_FIELD: s.timeField,
            SYNC_START_DATE: START.toISOString(),
          };
          const result = await sync(s.upstream === 'base' ? base : more, schema, env, { to, ...(from ? { from } : {}) });
          expect(result.status).toBe('succeeded');
          const { rollup, truth } = await rollupAndTruth(schema, DIMS);
          expect(rollup).toEqual(truth);
          const distinct = await distinctAndTruth(schema, DISTINCT_BY, DISTINCT);
          expect(distinct.rollup).toEqual(distinct.truth);
          const daily = await daysAndHours(schema, DISTINCT_BY);
          expect(daily.days).toEqual(daily.hours);
        }
        // A last run over every hour, so that each case ends with both days of records_daily_distinct filled.
        await sync(more, schema, { ...DIMS_ENV, SYNC_START_DATE: START.toISOString() }, { from: START, to: END });
        const daily = await daysAndHours(schema, DISTINCT_BY);
        expect(daily.days).toEqual(daily.hours);
        expect(new Set(daily.days.map((row) => (JSON.parse(row) as unknown[])[0])).size).toBe(2);
        const nulls = await bed.pool.query<{ n: string }>(`select count(*) as n from "${schema}".records_hourly where medium is null`);
        expect(Number(nulls.rows[0]!.n)).toBeGreaterThan(0);
      }),
      { numRuns: 6 },
    );
  });

  it('equals count(*) over records when dimension values are numbers, booleans, objects or arrays, whose text only PostgreSQL gives', async () => {
    // 1e21 is `1e+21` to JSON.stringify and `1000000000000000000000` to jsonb; an object's jsonb text has spaces.
    const odd = [1e21, 1.5, true, { a: 1, b: [1, 2] }, ['x'], 'web', null];
    const s = await sim(
      extraRecords(await sim(), 21, START, END, 7, (i) => ({
        medium: odd[i % odd.length],
        meta: i % 5 === 0 ? [{ plan: 'pro' }] : { plan: i % 2 ? 'pro' : 7 },
      })),
    );
    const schema = await freshSchema();
    await sync(s, schema, { ...DIMS_ENV, SYNC_WINDOW: '3h' }, { from: START, to: END });
    const { rollup, truth } = await rollupAndTruth(schema, DIMS);
    expect(rollup).toEqual(truth);
    expect(rollup.join()).toContain('1000000000000000000000');
    const distinct = await distinctAndTruth(schema, DISTINCT_BY, DISTINCT);
    expect(distinct.rollup).toEqual(distinct.truth);
  });

  it('equals count(*) over records when dimension values are booleans, strings or null, counted in the process', async () => {
    const plain = [true, false, 'web', null];
    const s = await sim(
      extraRecords(await sim(), 21, START, END, 7, (i) => ({
        medium: plain[i % plain.length],
        meta: { plan: i % 3 === 0 ? true : i % 3 === 1 ? 'pro' : false },
      })),
    );
    const schema = await freshSchema();
    await sync(s, schema, { ...DIMS_ENV, SYNC_WINDOW: '3h' }, { from: START, to: END });
    const { rollup, truth } = await rollupAndTruth(schema, DIMS);
    expect(rollup).toEqual(truth);
    expect(rollup.join()).toContain('true');
    expect(rollup.join()).toContain('false');
    const distinct = await distinctAndTruth(schema, DISTINCT_BY, DISTINCT);
    expect(distinct.rollup).toEqual(distinct.truth);
  });

  it('is rebuilt exactly when ROLLUP_DIMENSIONS changes, by migrate or rollup rebuild; ROLLUP_RETENTION deletes old buckets', async () => {
    const s = await sim(extraRecords(await sim(), 20, START, END, 5, (i) => ({ medium: i % 2 ? 'app' : undefined })));
    const schema = await freshSchema();
    await sync(s, schema, DIMS_ENV, { from: START, to: END });
    expect((await rollupAndTruth(schema, DIMS)).rollup).toHaveLength((await rollupAndTruth(schema, DIMS)).truth.length);

    // A table of the first shape (no window_start; the setting held the dimensions alone) is
    // rebuilt for the same dimensions.
    await bed.pool.query(`drop table "${schema}".records_hourly`);
    await bed.pool.query(
      `create table "${schema}".records_hourly (bucket timestamptz not null, event_type text, medium text, plan text, records bigint not null)`,
    );
    await bed.pool.query(`update "${schema}".derived_settings set value = $1::jsonb where name = 'rollup_dimensions'`, [
      JSON.stringify(['event_type=eventType', 'medium=medium', 'plan=meta.plan']),
    ]);
    const sameDims = loadConfig({ DATABASE_SCHEMA: schema, ...DIMS_ENV });
    expect(await migrateDatabase(bed.pool, sameDims, silentLogger)).toEqual({ applied: [], rollupRebuilt: true });
    const rebuilt = await rollupAndTruth(schema, DIMS);
    expect(rebuilt.rollup).toEqual(rebuilt.truth);
    const windowStarts = await bed.pool.query<{ n: string }>(`select count(distinct window_start) as n from "${schema}".records_hourly`);
    expect(Number(windowStarts.rows[0]!.n)).toBe(HOURS);
    expect(await migrateDatabase(bed.pool, sameDims, silentLogger)).toEqual({ applied: [], rollupRebuilt: false });

    const config = loadConfig({ DATABASE_SCHEMA: schema, ROLLUP_DIMENSIONS: 'customer=customerId,medium=medium', ROLLUP_DISTINCT_BY: 'customer=customerId' });
    expect(await migrateDatabase(bed.pool, config, silentLogger)).toEqual({ applied: [], rollupRebuilt: true });
    const changed = [
      { column: 'customer', path: ['customerId'] },
      { column: 'medium', path: ['medium'] },
    ];
    const after = await rollupAndTruth(schema, changed);
    expect(after.rollup).toEqual(after.truth);
    const distinctAfter = await distinctAndTruth(schema, [changed[0]!], [{ column: 'user_id', path: ['userId'] }]);
    expect(distinctAfter.rollup).toEqual(distinctAfter.truth);
    expect(distinctAfter.rollup.length).toBeGreaterThan(0);
    expect(await migrateDatabase(bed.pool, config, silentLogger)).toEqual({ applied: [], rollupRebuilt: false });

    // Changing ROLLUP_DISTINCT alone rebuilds records_hourly_distinct (records_hourly is kept).
    await bed.pool.query(`update "${schema}".records_hourly set records = records + 1`);
    const otherDistinct = loadConfig({
      DATABASE_SCHEMA: schema,
      ROLLUP_DIMENSIONS: 'customer=customerId,medium=medium',
      ROLLUP_DISTINCT_BY: 'customer=customerId',
      ROLLUP_DISTINCT: 'medium=medium',
    });
    expect(await migrateDatabase(bed.pool, otherDistinct, silentLogger)).toEqual({ applied: [], rollupRebuilt: true });
    const mediums = await distinctAndTruth(schema, [changed[0]!], [{ column: 'medium', path: ['medium'] }]);
    expect(mediums.rollup).toEqual(mediums.truth);
    const mediumDays = await daysAndHours(schema, [changed[0]!]);
    expect(mediumDays.days).toEqual(mediumDays.hours);
    expect(mediumDays.days.length).toBeGreaterThan(0);
    expect(mediums.rollup.length).toBeGreaterThan(0);
    expect((await rollupAndTruth(schema, changed)).rollup).not.toEqual(after.truth);

    // A rollup tampered with is put right by rollup rebuild.
    await bed.pool.query(`update "${schema}".records_hourly set records = records + 1`);
    const hourOnly = loadConfig({ DATABASE_SCHEMA: schema, ROLLUP_DIMENSIONS: 'none', ROLLUP_DISTINCT_BY: 'none' });
    const rebuiltRows = await rebuildRollup(bed.pool, hourOnly, silentLogger);
    expect(rebuiltRows.hourly).toBe(HOURS);
    const byHourDistinct = await distinctAndTruth(schema, [], [{ column: 'user_id', path: ['userId'] }]);
    expect(rebuiltRows.distinct).toBe(byHourDistinct.truth.length);
    expect(byHourDistinct.rollup).toEqual(byHourDistinct.truth);
    const byHour = await rollupAndTruth(schema, []);
    expect(byHour.rollup).toEqual(byHour.truth);

    // Buckets starting before the run's clock minus ROLLUP_RETENTION (08:05) are deleted at the end of the run.
    const now = END.getTime() + 5 * 60_000;
    await sync(
      s,
      schema,
      { ROLLUP_DIMENSIONS: 'none', ROLLUP_DISTINCT_BY: 'none', ROLLUP_RETENTION: '4h' },
      { from: new Date(END.getTime() - HOUR_MS), to: END, now: () => now },
    );
    const kept = await bed.pool.query<{ bucket: Date }>(`select bucket from "${schema}".records_hourly order by bucket`);
    expect(kept.rows.map((r) => r.bucket.getTime())).toEqual([9, 10, 11].map((h) => START.getTime() + h * HOUR_MS));
    const keptDistinct = await bed.pool.query<{ bucket: Date }>(`select distinct bucket from "${schema}".records_hourly_distinct order by bucket`);
    expect(keptDistinct.rows.map((r) => r.bucket.getTime())).toEqual([9, 10, 11].map((h) => START.getTime() + h * HOUR_MS));
    // records_daily_distinct lost what the pruned hours held: its one day left holds hours 9 to 11 only.
    const keptDays = await daysAndHours(schema, []);
    expect(keptDays.days).toEqual(keptDays.hours);
    expect(new Set(keptDays.days.map((row) => (JSON.parse(row) as unknown[])[0])).size).toBe(1);
  });
});

describe('records_daily_distinct', () => {
  it("is the union of its day's hours when two windows of that day commit concurrently, the second updating the day while the first holds it", async () => {
    const schema = await freshSchema();
    const config = loadConfig({ DATABASE_SCHEMA: schema });
    await migrateDatabase(bed.pool, config, silentLogger);
    const derived = new Derived(new Tables(schema), config.tables.rollup);
    const rollups = new Rollups(new Tables(schema), config.tables.rollup);
    const hourAt = (h: number) => START.getTime() + h * HOUR_MS;
    // Hours 8 and 9 after START (02:00 and 03:00 UTC) are of the same UTC day.
    const windows = [
      { start: hourAt(8), end: hourAt(9) },
      { start: hourAt(9), end: hourAt(10) },
    ];
    const day = new Date('2026-10-31T00:00:00Z');
    const [a, b] = await Promise.all([bed.pool.connect(), bed.pool.connect()]);
    closers.push(async () => {
      a.release();
      b.release();
    });
    const pidOfB = (await b.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0]!.pid;
    // First both windows load (the day only gains values: merged), then both load again with other
    // users (the day loses values: recomputed).
    const rounds = [
      // Texts JSON and array literals escape, and one beyond U+FFFF: sorted by code point ('"' < '1').
      {
        users: [
          ['u1', 'u"2,{\\}'],
          ['u"2,{\\}', '\u{1F600}u3'],
        ],
        cleared: false,
        union: ['u"2,{\\}', 'u1', '\u{1F600}u3'],
      },
      {
        users: [
          ['u4', 'u2'],
          ['u5', 'u4'],
        ],
        cleared: true,
        union: ['u2', 'u4', 'u5'],
      },
    ];
    for (const round of rounds) {
      const days: { day: Date; cleared: boolean }[][] = [];
      // Both windows replace their hourly rows, each in its own open transaction.
      for (const [i, client] of [a, b].entries()) {
        const window = windows[i]!;
        await client.query('begin');
        // What clearing the window at its start does (records_hourly's rows; the distinct ones go with the insert).
        await derived.deleteWindowRecords(client, DEFAULT_SOURCE, window);
        const records = round.users[i]!.map((userId) => ({ eventType: 'view', customerId: 'c1', userId }));
        const counts = countRollup(derived, records, [0, 1], [window.start + 60_000, window.start + 120_000]);
        const query = rollups.windowQuery(DEFAULT_SOURCE, window, counts)!;
        days.push((await client.query<{ day: Date; cleared: boolean }>(query.text, query.values)).rows);
      }
      expect(days).toEqual([[{ day, cleared: round.cleared }], [{ day, cleared: round.cleared }]]);
      const update = (client: PoolClient, i: number) => rollups.distinct.updateDays(client, DEFAULT_SOURCE, windows[i]!, days[i]!, undefined);
      await update(a, 0);
      // B's update must wait for A's commit: without the day's lock it would not see A's hours.
      const second = update(b, 1);
      second.catch(() => undefined);
      for (let polls = 0; ; polls++) {
        const waiting = await bed.pool.query<{ wait: string | null }>('select wait_event_type as wait from pg_stat_activity where pid = $1', [pidOfB]);
        if (waiting.rows[0]?.wait === 'Lock') break;
        if (polls > 10_000) throw new Error('the second update never waited for the first window');
      }
      await a.query('commit');
      await second;
      await b.query('commit');
      const rows = await bed.pool.query<{ day: Date; values: string[] }>(
        `select day, distinct_values as values from "${schema}".records_daily_distinct where source = $1`,
        [DEFAULT_SOURCE],
      );
      expect(rows.rows).toEqual([{ day, values: round.union }]);
      const hourly = await bed.pool.query<{ values: string[] }>(
        `select distinct_values as values from "${schema}".records_hourly_distinct where source = $1 order by bucket`,
        [DEFAULT_SOURCE],
      );
      expect(hourly.rows.map((r) => r.values)).toEqual(round.users.map((users) => [...new Set(users)].sort(compareCodePoints)));
      const { days: daily, hours } = await daysAndHours(schema, [{ column: 'customer_id' }]);
      expect(daily).toEqual(hours);
    }
  });
});

describe('records_hourly_distinct of a value per row', () => {
  it('is converted to a row per group in place, keeping the hours whose records are gone, and records_daily_distinct recomputed', async () => {
    const s = await sim();
    const schema = await freshSchema();
    await sync(s, schema, {}, { from: START, to: END });
    // The per-value layout, filled from records, plus an hour whose records RETENTION dropped.
    const retained = new Date(START.getTime() - 24 * HOUR_MS);
    await bed.pool.query(`drop table "${schema}".records_hourly_distinct; drop table "${schema}".records_daily_distinct`);
    await bed.pool.query(
      `create table "${schema}".records_hourly_distinct as
         select source, date_trunc('hour', coalesce(event_time, window_start), 'UTC') as bucket, window_start,
                payload ->> 'customerId' as customer_id, 'user_id'::text as value_column, payload ->> 'userId' as value, count(*) as records
           from "${schema}".records where payload ->> 'userId' is not null group by 1, 2, 3, 4, 5, 6`,
    );
    await bed.pool.query(
      `insert into "${schema}".records_hourly_distinct values ('default', $1, $1, 'c-old', 'user_id', 'u-old', 2), ('default', $1, $1, 'c-old', 'user_id', 'u-older', 1)`,
      [retained],
    );
    await bed.pool.query(
      `create table "${schema}".records_daily_distinct (source text, day timestamptz, customer_id text, value_column text, value text, records bigint)`,
    );
    await bed.pool.query(`update "${schema}".derived_settings set value = jsonb_set(value, '{shape}', '3') where name = 'rollup_distinct'`);
    const config = loadConfig({ DATABASE_SCHEMA: schema });
    expect(await migrateDatabase(bed.pool, config, silentLogger)).toEqual({ applied: [], rollupRebuilt: true });
    const kept = await bed.pool.query<{ values: string[] }>(
      `select distinct_values as values from "${schema}".records_hourly_distinct where bucket = $1 and customer_id = 'c-old'`,
      [retained],
    );
    expect(kept.rows).toEqual([{ values: ['u-old', 'u-older'] }]);
    const days = await daysAndHours(schema, [{ column: 'customer_id' }]);
    expect(days.days).toEqual(days.hours);
    expect(days.days.some((row) => row.includes('u-older'))).toBe(true);
    await bed.pool.query(`delete from "${schema}".records_hourly_distinct where bucket = $1`, [retained]);
    const users = await distinctAndTruth(schema, [{ column: 'customer_id', path: ['customerId'] }], [{ column: 'user_id', path: ['userId'] }]);
    expect(users.rollup).toEqual(users.truth);
    expect(await migrateDatabase(bed.pool, config, silentLogger)).toEqual({ applied: [], rollupRebuilt: false });
  });
});

describe('the Users panel', () => {
  it('counts exactly the distinct users of the hours starting in the range, whole days from records_daily_distinct, edge hours from records_hourly_distinct', async () => {
    const s = await sim();
    const schema = await freshSchema();
    await sync(s, schema, {}, { from: START, to: END });
    const dashboard = JSON.parse(readFileSync(join(DASHBOARDS_DIR, 'analytics-history.json'), 'utf8')) as Dashboard;
    const users = (dashboard.panels ?? [])
      .flatMap((p: Panel | RowPanel) => (p.type === 'row' ? (p as RowPanel).panels : [p as Panel]))
      .find((p) => p.title === 'Users')!;
    const sql = (users.targets![0] as unknown as { rawSql: string }).rawSql;
    const variables = dashboard.templating.list as VariableModel[];
    const customers = await bed.pool.query<{ c: string }>(`select distinct payload ->> 'customerId' as c from "${schema}".records order by 1 limit 2`);
    const picked = customers.rows.map((r) => r.c);
    const selections = {
      schema: { values: [schema] },
      source: { values: ['default'] },
      customer_dimension: { values: ['customer_id'] },
      user_column: { values: ['user_id'] },
      customer: { values: picked },
    };
    const at = (hours: number, minutes = 0) => new Date(START.getTime() + hours * HOUR_MS + minutes * 60_000);
    // START is 18:00 UTC: hour 6 is the next midnight. A whole day and edge hours, no whole day, both
    // days whole, a range ending at a day's last hour (23:00, inclusive), and one starting at it.
    const ranges = [
      { from: at(-30), to: at(9, 30) },
      { from: at(2, 15), to: at(8) },
      { from: at(-18), to: at(30) },
      { from: at(1), to: at(29) },
      { from: at(5), to: at(11, 59) },
    ];
    const seen = new Set<number>();
    for (const range of ranges) {
      const counted = await bed.pool.query<{ users: string }>(renderSql(sql, { variables, selections }, range));
      const truth = await bed.pool.query<{ n: string }>(
        `select count(distinct payload ->> 'userId') as n from "${schema}".records
          where date_trunc('hour', coalesce(event_time, window_start), 'UTC') between $1 and $2 and payload ->> 'customerId' = any($3::text[])`,
        [range.from, range.to, picked],
      );
      expect(Number(counted.rows[0]!.users), `${range.from.toISOString()} to ${range.to.toISOString()}`).toBe(Number(truth.rows[0]!.n));
      seen.add(Number(truth.rows[0]!.n));
    }
    // The ranges differ in what they count: a bound off by an hour or a day would show.
    expect(seen.size).toBeGreaterThan(2);
  });
});

describe('ROLLUP_DIMENSIONS=off and FIELD_CATALOGUE=off', () => {
  it('load records without the rollup tables (dropped) and leave the catalogue and view as they were; on again rebuilds', async () => {
    const base = await sim();
    const later = await sim(
      extraRecords(base, 5, new Date(START.getTime() + 8 * HOUR_MS), new Date(START.getTime() + 9 * HOUR_MS), 13, () => ({ offOnly: 1 })),
    );
    const schema = await freshSchema();
    const half = new Date(START.getTime() + 6 * HOUR_MS);
    await sync(base, schema, {}, { from: START, to: half });
    const catalogue = async () => (await bed.pool.query<Record<string, unknown>>(`select * from "${schema}".record_fields order by path`)).rows;
    const view = async () => (await bed.pool.query<{ d: string | null }>(`select pg_get_viewdef($1::regclass) as d`, [`"${schema}".records_typed`])).rows[0]!.d;
    const exists = async (table: string) =>
      (await bed.pool.query<{ e: boolean }>('select to_regclass($1) is not null as e', [`"${schema}".${table}`])).rows[0]!.e;
    const fieldsBefore = await catalogue();
    const viewBefore = await view();
    expect(await exists('records_hourly_distinct')).toBe(true);

    const off = { ROLLUP_DIMENSIONS: 'off', FIELD_CATALOGUE: 'off' };
    // The second run re-loads hour 5 (window deleted and inserted again) and loads hours with a new field.
    const result = await sync(later, schema, off, { from: new Date(START.getTime() + 5 * HOUR_MS), to: END });
    expect(result.status).toBe('succeeded');
    expect(await exists('records_hourly')).toBe(false);
    expect(await exists('records_hourly_distinct')).toBe(false);
    expect(await exists('records_daily_distinct')).toBe(false);
    expect(await catalogue()).toEqual(fieldsBefore);
    expect(await view()).toBe(viewBefore);
    const stored = await bed.pool.query<{ n: string; off: string }>(
      `select count(*) as n, count(*) filter (where payload ? 'offOnly') as off from "${schema}".records`,
    );
    expect(Number(stored.rows[0]!.off)).toBe(5);
    expect(Number(stored.rows[0]!.n)).toBeGreaterThan(300);

    // On again: the next run rebuilds both rollup tables from records before loading.
    await sync(later, schema, {}, { from: new Date(END.getTime() - HOUR_MS), to: END });
    const hourly = await rollupAndTruth(schema, [
      { column: 'event_type', path: ['eventType'] },
      { column: 'customer_id', path: ['customerId'] },
    ]);
    expect(hourly.rollup).toEqual(hourly.truth);
    const users = await distinctAndTruth(schema, [{ column: 'customer_id', path: ['customerId'] }], [{ column: 'user_id', path: ['userId'] }]);
    expect(users.rollup).toEqual(users.truth);
    const userDays = await daysAndHours(schema, [{ column: 'customer_id' }]);
    expect(userDays.days).toEqual(userDays.hours);
  });
});

describe('record_fields and records_typed', () => {
  it('catalogues types, counts and first/last seen across runs, and the view gains and widens columns', async () => {
    const base = await sim();
    const later = await sim([
      ...extraRecords(base, 6, new Date(START.getTime() + 6 * HOUR_MS), new Date(START.getTime() + 7 * HOUR_MS), 11, (i) => ({
        score: i,
        'Seen At': new Date(START.getTime() + i * 60_000).toISOString(),
        apiToken: 'do-not-show',
      })),
      ...extraRecords(base, 2, new Date(START.getTime() + 9 * HOUR_MS), new Date(START.getTime() + 10 * HOUR_MS), 12, () => ({
        score: 'high',
        note: 'x'.repeat(100),
      })),
    ]);
    const schema = await freshSchema();
    await sync(base, schema, {}, { from: START, to: new Date(START.getTime() + 6 * HOUR_MS) });
    const fieldsAfterFirst = await bed.pool.query<{ path: string }>(`select path from "${schema}".record_fields`);
    expect(fieldsAfterFirst.rows.map((r) => r.path)).not.toContain('score');
    const columnsOf = async () =>
      Object.fromEntries(
        (
          await bed.pool.query<{ column_name: string; data_type: string }>(
            `select column_name, data_type from information_schema.columns where table_schema = $1 and table_name = 'records_typed'`,
            [schema],
          )
        ).rows.map((r) => [r.column_name, r.data_type]),
      );
    expect(await columnsOf()).toMatchObject({ id: 'bigint', event_type: 'text', timestamp: 'timestamp with time zone' });

    // Second run: hours 6–8, where score (a number) and "Seen At" (a date-time) first appear.
    await sync(later, schema, {}, { from: new Date(START.getTime() + 6 * HOUR_MS), to: new Date(START.getTime() + 8 * HOUR_MS) });
    const field = async (path: string) =>
      (
        await bed.pool.query<{ types: string[]; records: string; first_seen: Date; last_seen: Date; example: string | null; view_column: string }>(
          `select types, records, first_seen, last_seen, example, view_column from "${schema}".record_fields where path = $1`,
          [path],
        )
      ).rows[0]!;
    const truth = async (path: string) =>
      (
        await bed.pool.query<{ n: string; first: Date; last: Date }>(
          `select count(*) as n, min(event_time) as first, max(event_time) as last from "${schema}".records where payload ? $1`,
          [path],
        )
      ).rows[0]!;
    const score = await field('score');
    const scoreTruth = await truth('score');
    expect(score).toMatchObject({ types: ['number'], records: '6', first_seen: scoreTruth.first, last_seen: scoreTruth.last, view_column: 'score' });
    expect(Number(scoreTruth.n)).toBe(6);
    const eventType = await field('eventType');
    expect(eventType).toMatchObject({ types: ['string'], records: (await truth('eventType')).n, view_column: 'event_type' });
    expect(await field('Seen At')).toMatchObject({ types: ['date-time'], view_column: 'seen_at' });
    expect((await field('apiToken')).example).toBeNull();
    expect(await columnsOf()).toMatchObject({ score: 'numeric', seen_at: 'timestamp with time zone', api_token: 'text' });
    const typed = await bed.pool.query<{ score: string; seen_at: Date }>(
      `select score, seen_at from "${schema}".records_typed where score is not null order by score`,
    );
    expect(typed.rows.map((r) => Number(r.score))).toEqual([0, 1, 2, 3, 4, 5]);
    expect(typed.rows[1]!.seen_at).toEqual(new Date(START.getTime() + 60_000));

    // Third run: score as a string widens the column to text; the long example is cut.
    await sync(later, schema, {}, { from: new Date(START.getTime() + 8 * HOUR_MS), to: END });
    expect(await field('score')).toMatchObject({ types: ['number', 'string'], records: '8' });
    expect(await columnsOf()).toMatchObject({ score: 'text' });
    expect((await field('note')).example).toBe(`"${'x'.repeat(38)}…`);

    // A re-run of the same range replaces the rows and keeps the counts exact.
    await sync(later, schema, {}, { from: START, to: END });
    expect(await field('score')).toMatchObject({ records: '8' });
    expect((await field('eventType')).records).toBe((await truth('eventType')).n);

    // The command prints the catalogue (JSON here; the table form is unit-tested).
    const printed = await runCliInProcess(['fields', '--json'], { DATABASE_URL: db.url, DATABASE_SCHEMA: schema, LOG_LEVEL: 'error' });
    expect(printed.stderr).toBe('');
    expect(printed.code).toBe(0);
    const listed = JSON.parse(printed.stdout) as { path: string; column: string; viewType: string; records: number }[];
    expect(listed.find((f) => f.path === 'score')).toMatchObject({ column: 'score', viewType: 'text', records: 8 });
    expect(listed.map((f) => f.path)).toContain('customerId');
  });
});
