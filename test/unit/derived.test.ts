import { describe, expect, it } from 'vitest';
import { formatFieldsTable } from '../../src/app/derived.js';
import { loadConfig } from '../../src/config.js';
import {
  catalogueRecords,
  columnName,
  compareCodePoints,
  Derived,
  mergeFields,
  mergeRollupCounts,
  mergeSources,
  typedViewSql,
  viewType,
  type FieldRow,
} from '../../src/sync/derived.js';
import { Tables } from '../../src/sync/store.js';

describe('columnName', () => {
  it('keeps a plain lower-case identifier and sanitises the rest', () => {
    const none = new Set<string>();
    expect(columnName('score', none)).toBe('score');
    expect(columnName('eventType', none)).toBe('event_type');
    expect(columnName('Seen At', none)).toBe('seen_at');
    expect(columnName('2fa', none)).toBe('_2fa');
    expect(columnName('ünï', none)).toBe('n');
    expect(columnName('---', none)).toBe('field');
    expect(columnName('x'.repeat(100), none)).toHaveLength(59);
  });

  it('adds a suffix while the name is taken', () => {
    expect(columnName('id', new Set(['id']))).toBe('id_2');
    expect(columnName('event-type', new Set(['event_type', 'event_type_2']))).toBe('event_type_3');
  });
});

describe('viewType', () => {
  it.each([
    [['number'], 'numeric'],
    [['boolean'], 'boolean'],
    [['date-time'], 'timestamptz'],
    [['null', 'number'], 'numeric'],
    [['number', 'string'], 'text'],
    [['date-time', 'string'], 'text'],
    [['null'], 'text'],
    [['object'], null],
    [['array', 'null'], null],
    [['number', 'object'], 'text'],
  ] as const)('%j → %s', (types, expected) => expect(viewType(types)).toBe(expected));
});

describe('catalogueRecords', () => {
  it('counts the kept records per field with their types, times and a short example, none for secret-like names', () => {
    const records = [
      { a: 1, when: '2026-11-01T10:00:00Z', password: 'p', long: 'y'.repeat(60) },
      { a: 'x', nested: { b: 1 }, when: '2026-11-01T10:00:00+01:00' },
      { a: 2 }, // not kept
      { a: null, list: [], when: 'tomorrow' },
    ];
    const fields = catalogueRecords(records, [0, 1, 3], [2000, null, 1000]);
    expect(fields.get('a')).toEqual({ types: new Set(['number', 'string', 'null']), records: 3, first: 1000, last: 2000, untimed: true, example: '1' });
    expect(fields.get('when')!.types).toEqual(new Set(['date-time', 'string']));
    expect(fields.get('password')!.example).toBeNull();
    expect(fields.get('long')!.example).toBe(`"${'y'.repeat(38)}…`);
    expect(fields.get('nested')).toMatchObject({ types: new Set(['object']), records: 1, first: Infinity, last: -Infinity, untimed: true });
    expect(fields.get('list')!.types).toEqual(new Set(['array']));

    const more = catalogueRecords([{ a: true, extra: 0 }], [0], [500]);
    mergeFields(fields, more);
    expect(fields.get('a')).toMatchObject({ types: new Set(['number', 'string', 'null', 'boolean']), records: 4, first: 500, last: 2000 });
    expect(fields.get('extra')).toMatchObject({ records: 1, example: '0' });
  });
});

const row = (path: string, column: string | null, types: string[], extra: Partial<FieldRow> = {}): FieldRow => ({
  source: 'default',
  path,
  column,
  types,
  viewType: viewType(types),
  records: 3,
  firstSeen: new Date('2026-11-01T00:00:00Z'),
  lastSeen: new Date('2026-11-02T00:00:00Z'),
  example: null,
  ...extra,
});

/** PostgreSQL refuses a statement with a parameter it cannot type, as an unused one: each of $1…$n must appear. */
function expectEveryParameterUsed(query: { text: string; values: unknown[] }): void {
  const used = new Set([...query.text.matchAll(/\$(\d+)/g)].map((m) => Number(m[1])));
  expect([...used].sort((a, b) => a - b)).toEqual(query.values.map((_, i) => i + 1));
}

describe('Derived.windowRollupQuery', () => {
  const derivedFor = (env: Record<string, string>) => new Derived(new Tables('s'), loadConfig(env).tables.rollup);
  const window = { start: Date.parse('2026-11-01T00:00:00Z'), end: Date.parse('2026-11-02T00:00:00Z') };

  it("groups the window's records into records_hourly and records_hourly_distinct in one statement, parameters numbered after the source and window start", () => {
    const query = derivedFor({}).windowRollupQuery('prod', window)!;
    expect(query.text).toContain('insert into "s".records_hourly as h');
    // The window's distinct rows are replaced in the same statement, which returns the days to recompute.
    expect(query.text).toContain('delete from "s".records_hourly_distinct where source = $1 and window_start >= $2 and window_start < $8');
    expect(query.text).toContain('insert into "s".records_hourly_distinct (source, bucket, window_start, "customer_id", value_column, distinct_values)');
    expect(query.text).toContain('array_agg(distinct f.value collate "C" order by f.value collate "C")');
    expect(query.text).toMatch(/select date_trunc\('day', bucket, 'UTC'\) as day, bool_or\(cleared\) as cleared\s.* order by 1$/s);
    expect(query.text).toContain('where source = $1 and window_start = $2');
    // $3, $4: the dimension paths; $5: the customer path of ROLLUP_DISTINCT_BY; $6, $7: user_id and its path; $8: the window's end.
    expect(query.text).toMatch(/payload #>> \$5::text\[\]/);
    expect(query.text).toContain('($6::text, payload #>> $7::text[])');
    expect(query.values).toEqual(['prod', new Date(window.start), ['eventType'], ['customerId'], ['customerId'], 'user_id', ['userId'], new Date(window.end)]);
    expectEveryParameterUsed(query);
  });

  it('leaves records_hourly_distinct out with ROLLUP_DISTINCT=none, and has no statement with ROLLUP_DIMENSIONS=off', () => {
    const noDistinct = derivedFor({ ROLLUP_DISTINCT: 'none' }).windowRollupQuery('prod', window)!;
    expect(noDistinct.text).not.toContain('records_hourly_distinct');
    expect(noDistinct.values).toEqual(['prod', new Date(window.start), ['eventType'], ['customerId']]);
    expectEveryParameterUsed(noDistinct);
    const counted = derivedFor({ ROLLUP_DISTINCT: 'none' });
    expectEveryParameterUsed(counted.windowCountsQuery('prod', window, counted.countRollup([{ eventType: 'view' }], [0], [null]))!);
    expect(derivedFor({ ROLLUP_DIMENSIONS: 'off' }).windowRollupQuery('prod', window)).toBeUndefined();
  });
});

describe('Derived.countRollup and windowCountsQuery', () => {
  const derived = new Derived(new Tables('s'), loadConfig({}).tables.rollup);
  const window = { start: Date.parse('2026-11-01T10:00:00Z'), end: Date.parse('2026-11-01T11:00:00Z') };
  const at1030 = Date.parse('2026-11-01T10:30:00Z');

  it('counts string, null and absent values by hour, a record without an event time in the hour of its window start', () => {
    const records = [
      { eventType: 'view', customerId: 'c1', userId: 'u1' },
      { eventType: 'view', customerId: 'c1', userId: 'u1' },
      { eventType: null, userId: null },
      { eventType: 'skipped' },
    ];
    const counts = derived.countRollup(records, [0, 1, 2], [at1030, null, at1030])!;
    expect(counts.exact).toBe(true);
    const query = derived.windowCountsQuery('prod', window, counts)!;
    expect(query.text).toContain('insert into "s".records_hourly (source, bucket, window_start');
    expect(query.text).toContain('insert into "s".records_hourly_distinct (source, bucket, window_start');
    // Hourly: the timed and the untimed view by c1 are one group of 2 (same hour); the null/absent one is its own.
    const hour = Date.parse('2026-11-01T10:00:00Z');
    expect(query.values.slice(0, 2)).toEqual(['prod', new Date(window.start)]);
    expect(query.values[5]).toEqual(new Date(window.end));
    expectEveryParameterUsed(query);
    expect(JSON.parse(query.values[2] as string)).toEqual([
      { b: hour, v0: 'view', v1: 'c1', n: 2 },
      { b: hour, v0: null, v1: null, n: 1 },
    ]);
    // Distinct: only the non-null user id, once, with its customer and the field's position in ROLLUP_DISTINCT.
    expect(JSON.parse(query.values[3] as string)).toEqual([{ b: hour, v0: 'c1', v1: '0', a: ['u1'] }]);
    expect(query.values[4]).toEqual(['user_id']);
  });

  it("keeps a group's distinct values once each, sorted by code point, the untimed records' merged into their hour's", () => {
    const at1130 = Date.parse('2026-11-01T11:30:00Z');
    const records = ['u2', 'u1', 'u2', '\u{1F600}', '\uFFFD', 'u3', 'u1'].map((userId) => ({ eventType: 'view', customerId: 'c1', userId }));
    // Two pages: the second's untimed u3 and u1 land in the window start's hour (10:00), with the first page's timed ones.
    const first = derived.countRollup(records.slice(0, 5), [0, 1, 2, 3, 4], [at1030, at1030, at1130, at1030, at1030])!;
    const second = derived.countRollup(records.slice(5), [0, 1], [null, null])!;
    mergeRollupCounts(first, second);
    const rows = JSON.parse(derived.windowCountsQuery('prod', window, first)!.values[3] as string) as { b: number; a: string[] }[];
    expect(rows).toEqual([
      { b: Date.parse('2026-11-01T10:00:00Z'), v0: 'c1', v1: '0', a: ['u1', 'u2', 'u3', '\uFFFD', '\u{1F600}'] },
      { b: Date.parse('2026-11-01T11:00:00Z'), v0: 'c1', v1: '0', a: ['u2'] },
    ]);
  });

  it("hands records_daily_distinct each day's union of the window's groups, the untimed records' in the window start's day", async () => {
    const night = { start: Date.parse('2026-11-01T22:00:00Z'), end: Date.parse('2026-11-02T02:00:00Z') };
    const day1 = new Date('2026-11-01T00:00:00Z');
    const day2 = new Date('2026-11-02T00:00:00Z');
    const times = ['2026-11-01T23:30:00Z', '2026-11-01T22:10:00Z', '2026-11-02T01:00:00Z', null, '2026-11-02T01:30:00Z', '2026-11-01T22:20:00Z'];
    const users = ['u2', 'u1', 'u1', 'u3', 'u2', 'u9'];
    const records = users.map((userId, i) => ({ eventType: 'view', customerId: i === 5 ? 'c2' : 'c1', userId }));
    const counts = derived.countRollup(
      records,
      records.map((_, i) => i),
      times.map((t) => (t === null ? null : Date.parse(t))),
    )!;
    const hourlyBefore = derived.windowCountsQuery('prod', night, counts)!.values[3];
    const queries: { text: string; values: unknown[] }[] = [];
    const db = {
      query: (text: string, values: unknown[]) => {
        queries.push({ text, values });
        // The window's statement reports day 1 as only added to, day 2 as cleared (recomputed instead).
        return Promise.resolve({
          rows:
            queries.length === 1
              ? [
                  { day: day1, cleared: false },
                  { day: day2, cleared: true },
                ]
              : [],
        });
      },
    } as unknown as Parameters<Derived['addWindowRollup']>[0];
    await derived.addWindowRollup(db, 'prod', night, counts);
    const merge = queries.find((q) => q.text.includes('json_to_recordset($2::json)'))!;
    expect(merge.text).toContain('insert into "s".records_daily_distinct as x');
    expect(merge.values[0]).toBe('prod');
    expect(JSON.parse(merge.values[1] as string)).toEqual([
      { b: day1.getTime(), v0: 'c1', v1: '0', a: ['u1', 'u2', 'u3'] },
      { b: day2.getTime(), v0: 'c1', v1: '0', a: ['u1', 'u2'] },
      { b: day1.getTime(), v0: 'c2', v1: '0', a: ['u9'] },
    ]);
    expect(merge.values.slice(2)).toEqual([['user_id'], [day1]]);
    // The hourly groups' sets are left as they were.
    expect(derived.windowCountsQuery('prod', night, counts)!.values[3]).toEqual(hourlyBefore);
  });

  it('gives up counting at a value whose text only PostgreSQL knows, and the window is grouped from its records', () => {
    for (const odd of [1.1, true, { a: 1 }, ['x']]) {
      const counts = derived.countRollup([{ eventType: 'view' }, { eventType: odd }], [0, 1], [at1030, at1030])!;
      expect(counts.exact).toBe(false);
      expect(derived.windowCountsQuery('prod', window, counts)).toEqual(derived.windowRollupQuery('prod', window));
    }
    // A path through an array (its keys are indexes) too, but not a path into a scalar or a missing key.
    const nested = new Derived(new Tables('s'), loadConfig({ ROLLUP_DIMENSIONS: 'plan=meta.plan', ROLLUP_DISTINCT: 'none' }).tables.rollup);
    expect(nested.countRollup([{ meta: [{ plan: 'pro' }] }], [0], [null])!.exact).toBe(false);
    expect(nested.countRollup([{ meta: 'pro' }, {}], [0, 1], [null, null])!.exact).toBe(true);
  });
});

describe('typedViewSql', () => {
  it('types each scalar field, quotes names and keys, and leaves out object-only fields', () => {
    const sql = typedViewSql(new Tables('s'), [row("it's", 'it_s', ['number']), row('o', 'o', ['object']), row('when', 'when', ['date-time'])]);
    expect(sql).toContain(`case when jsonb_typeof(payload -> 'it''s') = 'number' then (payload ->> 'it''s')::numeric end as "it_s"`);
    expect(sql).toContain(`"s".records_try_timestamptz(payload ->> 'when') end as "when"`);
    expect(sql).not.toContain(`as "o"`);
    expect(sql.startsWith('create view "s".records_typed as select id, source, event_time, window_start, window_end, run_id, loaded_at, ')).toBe(true);
  });
});

describe('formatFieldsTable', () => {
  it('aligns one line per field, with - for no column or example', () => {
    const text = formatFieldsTable([row('eventType', 'event_type', ['string'], { example: '"submit"' }), row('meta', 'meta', ['object'])]);
    expect(text.split('\n')).toEqual([
      'SOURCE   FIELD      COLUMN      TYPE  JSON TYPES  RECORDS  FIRST SEEN                LAST SEEN                 EXAMPLE',
      'default  eventType  event_type  text  string      3        2026-11-01T00:00:00.000Z  2026-11-02T00:00:00.000Z  "submit"',
      'default  meta       -           -     object      3        2026-11-01T00:00:00.000Z  2026-11-02T00:00:00.000Z  -',
      '',
    ]);
    expect(formatFieldsTable([])).toMatch(/no fields catalogued yet/);
  });
});

describe('mergeSources', () => {
  it("gives records_typed one column per field name, typed from every source's types", () => {
    const merged = mergeSources([
      row('amount', 'amount', ['number'], { source: 'production', records: 2 }),
      row('amount', null, ['string'], { source: 'sandbox', records: 5, firstSeen: new Date('2026-10-01T00:00:00Z') }),
      row('id', 'id', ['string'], { source: 'sandbox' }),
    ]);
    expect(merged).toMatchObject([
      { path: 'amount', source: 'production,sandbox', column: 'amount', types: ['number', 'string'], viewType: 'text', records: 7 },
      { path: 'id', source: 'sandbox', viewType: 'text', records: 3 },
    ]);
    expect(merged[0]!.firstSeen.toISOString()).toBe('2026-10-01T00:00:00.000Z');
  });
});

describe('compareCodePoints', () => {
  it('orders strings as PostgreSQL\'s collate "C" orders their UTF-8 bytes', () => {
    const texts = ['b', 'a', '', 'ab', '\uFFFD', '\u{1F600}', '\uE000', '\u00E9', 'a\u{10000}', 'a\uFFFF', '\uD7FF'];
    const byBytes = [...texts].sort((x, y) => Buffer.compare(Buffer.from(x, 'utf8'), Buffer.from(y, 'utf8')));
    expect([...texts].sort(compareCodePoints)).toEqual(byBytes);
    // A plain sort differs: it puts the surrogate pairs first.
    expect([...texts].sort()).not.toEqual(byBytes);
  });
});
