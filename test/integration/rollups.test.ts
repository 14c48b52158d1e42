import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { migrateDatabase, rebuildRollup } from '../../src/app/derived.js';
import { loadConfig } from '../../src/config.js';
import { migrate } from '../../src/db/migrate.js';
import { silentLogger } from '../../src/log.js';
import { startSimulator, type Simulator } from '../../src/simulator/index.js';
import { runSync, type SyncResult } from '../../src/sync/run.js';
import { runCli } from '../helpers/cli.js';
import { useAppPool, useTestDatabase } from '../helpers/db.js';
import { simClient, syncConfig } from '../helpers/sync.js';

const db = useTestDatabase();
const bed = useAppPool(db);
const closers = bed.closers;
let schemaCounter = 0;

const HOUR_MS = 3_600_000;
const START = new Date('2026-10-30T00:00:00Z');
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
  const result = await runSync({ pool: bed.pool, client, config: syncConfig({ SYNC_WINDOW: '1h', ...env }), schema, log: silentLogger }, options);
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

const DIMS = [
  { column: 'event_type', path: ['eventType'] },
  { column: 'medium', path: ['medium'] },
  { column: 'plan', path: ['meta', 'plan'] },
];
const DIMS_ENV = { ROLLUP_DIMENSIONS: 'event_type=eventType,medium=medium,plan=meta.plan' };

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
        }
        const nulls = await bed.pool.query<{ n: string }>(`select count(*) as n from "${schema}".records_hourly where medium is null`);
        expect(Number(nulls.rows[0]!.n)).toBeGreaterThan(0);
      }),
      { numRuns: 6 },
    );
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

    const config = loadConfig({ DATABASE_SCHEMA: schema, ROLLUP_DIMENSIONS: 'customer=customerId,medium=medium' });
    expect(await migrateDatabase(bed.pool, config, silentLogger)).toEqual({ applied: [], rollupRebuilt: true });
    const changed = [
      { column: 'customer', path: ['customerId'] },
      { column: 'medium', path: ['medium'] },
    ];
    const after = await rollupAndTruth(schema, changed);
    expect(after.rollup).toEqual(after.truth);
    expect(await migrateDatabase(bed.pool, config, silentLogger)).toEqual({ applied: [], rollupRebuilt: false });

    // A rollup tampered with is put right by rollup rebuild.
    await bed.pool.query(`update "${schema}".records_hourly set records = records + 1`);
    const hourOnly = loadConfig({ DATABASE_SCHEMA: schema, ROLLUP_DIMENSIONS: 'none' });
    expect(await rebuildRollup(bed.pool, hourOnly, silentLogger)).toBe(HOURS);
    const byHour = await rollupAndTruth(schema, []);
    expect(byHour.rollup).toEqual(byHour.truth);

    // Buckets starting before the run's clock minus ROLLUP_RETENTION (08:05) are deleted at the end of the run.
    const now = END.getTime() + 5 * 60_000;
    await sync(s, schema, { ROLLUP_DIMENSIONS: 'none', ROLLUP_RETENTION: '4h' }, { from: new Date(END.getTime() - HOUR_MS), to: END, now: () => now });
    const kept = await bed.pool.query<{ bucket: Date }>(`select bucket from "${schema}".records_hourly order by bucket`);
    expect(kept.rows.map((r) => r.bucket.getTime())).toEqual([9, 10, 11].map((h) => START.getTime() + h * HOUR_MS));
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
    const printed = await runCli(['fields', '--json'], { DATABASE_URL: db.url, DATABASE_SCHEMA: schema, LOG_LEVEL: 'error' });
    expect(printed.stderr).toBe('');
    expect(printed.code).toBe(0);
    const listed = JSON.parse(printed.stdout) as { path: string; column: string; viewType: string; records: number }[];
    expect(listed.find((f) => f.path === 'score')).toMatchObject({ column: 'score', viewType: 'text', records: 8 });
    expect(listed.map((f) => f.path)).toContain('customerId');
  });
});
