import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { Derived, mergeRollupCounts } from '../../src/sync/derived/index.js';
import { compareCodePoints } from '../../src/sync/derived/rollup/code-points.js';
import { Rollups } from '../../src/sync/derived/rollup/rollups.js';
import { silentLogger } from '../helpers/silent-logger.js';
import { Tables } from '../../src/sync/store/pg/tables.js';
import { countRollup } from '../helpers/rollup-counts.js';

/** PostgreSQL refuses a statement with a parameter it cannot type, as an unused one: each of $1…$n must appear. */
/** The rollup tables of `derived`'s settings, whose statement a window's commit runs. */
const rollupsOf = (derived: Derived) => new Rollups(new Tables('s'), derived.rollup);

function expectEveryParameterUsed(query: { text: string; values: unknown[] }): void {
  const used = new Set([...query.text.matchAll(/\$(\d+)/g)].map((m) => Number(m[1])));
  expect([...used].sort((a, b) => a - b)).toEqual(query.values.map((_, i) => i + 1));
}

describe('Rollups.windowQuery grouped from records', () => {
  const derivedFor = (env: Record<string, string>) => new Derived(new Tables('s'), loadConfig(env).tables.rollup);
  const window = { start: Date.parse('2026-11-01T00:00:00Z'), end: Date.parse('2026-11-02T00:00:00Z') };

  it("groups the window's records into records_hourly and records_hourly_distinct in one statement, parameters numbered after the source and window start", () => {
    const query = rollupsOf(derivedFor({})).windowQuery('prod', window, undefined)!;
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
    const noDistinct = rollupsOf(derivedFor({ ROLLUP_DISTINCT: 'none' })).windowQuery('prod', window, undefined)!;
    expect(noDistinct.text).not.toContain('records_hourly_distinct');
    expect(noDistinct.values).toEqual(['prod', new Date(window.start), ['eventType'], ['customerId']]);
    expectEveryParameterUsed(noDistinct);
    const counted = derivedFor({ ROLLUP_DISTINCT: 'none' });
    expectEveryParameterUsed(rollupsOf(counted).windowQuery('prod', window, countRollup(counted, [{ eventType: 'view' }], [0], [null]))!);
    expect(rollupsOf(derivedFor({ ROLLUP_DIMENSIONS: 'off' })).windowQuery('prod', window, undefined)).toBeUndefined();
  });
});

describe("the page walk's rollup counts and Rollups.windowQuery", () => {
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
    const counts = countRollup(derived, records, [0, 1, 2], [at1030, null, at1030])!;
    expect(counts.exact).toBe(true);
    const query = rollupsOf(derived).windowQuery('prod', window, counts)!;
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
    const first = countRollup(derived, records.slice(0, 5), [0, 1, 2, 3, 4], [at1030, at1030, at1130, at1030, at1030])!;
    const second = countRollup(derived, records.slice(5), [0, 1], [null, null])!;
    mergeRollupCounts(first, second);
    const rows = JSON.parse(rollupsOf(derived).windowQuery('prod', window, first)!.values[3] as string) as { b: number; a: string[] }[];
    expect(rows).toEqual([
      { b: Date.parse('2026-11-01T10:00:00Z'), v0: 'c1', v1: '0', a: ['u1', 'u2', 'u3', '\uFFFD', '\u{1F600}'] },
      { b: Date.parse('2026-11-01T11:00:00Z'), v0: 'c1', v1: '0', a: ['u2'] },
    ]);
  });

  it("merges a page's groups into the window's whichever page saw more values, counts summed", () => {
    const page = (users: string[]) =>
      countRollup(
        derived,
        users.map((userId) => ({ eventType: 'view', customerId: 'c1', userId })),
        users.map((_, i) => i),
        users.map(() => at1030),
      )!;
    for (const [a, b] of [
      [['u1'], ['u2', 'u3', 'u1']],
      [['u2', 'u3', 'u1'], ['u4']],
    ]) {
      const into = page(a!);
      mergeRollupCounts(into, page(b!));
      const rows = JSON.parse(rollupsOf(derived).windowQuery('prod', window, into)!.values[3] as string) as { a: string[] }[];
      expect(rows.map((r) => r.a)).toEqual([[...new Set([...a!, ...b!])].sort()]);
      expect([...into.hourly.values()].map((g) => g.records)).toEqual([a!.length + b!.length]);
    }
  });

  it("hands records_daily_distinct each day's union of the window's groups, the untimed records' in the window start's day", async () => {
    const night = { start: Date.parse('2026-11-01T22:00:00Z'), end: Date.parse('2026-11-02T02:00:00Z') };
    const day1 = new Date('2026-11-01T00:00:00Z');
    const day2 = new Date('2026-11-02T00:00:00Z');
    const times = ['2026-11-01T23:30:00Z', '2026-11-01T22:10:00Z', '2026-11-02T01:00:00Z', null, '2026-11-02T01:30:00Z', '2026-11-01T22:20:00Z'];
    const users = ['u2', 'u1', 'u1', 'u3', 'u2', 'u9'];
    const records = users.map((userId, i) => ({ eventType: 'view', customerId: i === 5 ? 'c2' : 'c1', userId }));
    const counts = countRollup(
      derived,
      records,
      records.map((_, i) => i),
      times.map((t) => (t === null ? null : Date.parse(t))),
    )!;
    const hourlyBefore = rollupsOf(derived).windowQuery('prod', night, counts)!.values[3];
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
    } as unknown as Parameters<Rollups['commitWindow']>[0];
    await rollupsOf(derived).commitWindow(db, {
      source: 'prod',
      window: night,
      runId: 1,
      rollup: counts,
      fields: new Map(),
      changes: undefined,
      log: silentLogger,
      catalogueChanged: false,
    });
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
    expect(rollupsOf(derived).windowQuery('prod', night, counts)!.values[3]).toEqual(hourlyBefore);
  });

  it('gives up counting at a value whose text only PostgreSQL knows, and the window is grouped from its records', () => {
    for (const odd of [1.1, 7, { a: 1 }, ['x']]) {
      const counts = countRollup(derived, [{ eventType: 'view' }, { eventType: odd }], [0, 1], [at1030, at1030])!;
      expect(counts.exact).toBe(false);
      expect(rollupsOf(derived).windowQuery('prod', window, counts)).toEqual(rollupsOf(derived).windowQuery('prod', window, undefined));
    }
    // A path through an array (its keys are indexes) too, but not a path into a scalar or a missing key.
    const nested = new Derived(new Tables('s'), loadConfig({ ROLLUP_DIMENSIONS: 'plan=meta.plan', ROLLUP_DISTINCT: 'none' }).tables.rollup);
    expect(countRollup(nested, [{ meta: [{ plan: 'pro' }] }], [0], [null])!.exact).toBe(false);
    expect(countRollup(nested, [{ meta: 'pro' }, {}], [0, 1], [null, null])!.exact).toBe(true);
  });

  it('counts a boolean as its `#>>` text, true or false', () => {
    const counts = countRollup(derived, [{ eventType: true }, { eventType: false }, { eventType: 'true' }], [0, 1, 2], [at1030, at1030, at1030])!;
    expect(counts.exact).toBe(true);
    expect([...counts.hourly.values()].map((g) => [g.values[0], g.records])).toEqual([
      ['true', 2],
      ['false', 1],
    ]);
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

describe('Derived over its modules', () => {
  const derivedFor = (env: Record<string, string>) => new Derived(new Tables('s'), loadConfig(env).tables.rollup);
  const window = { start: Date.parse('2026-11-01T00:00:00Z'), end: Date.parse('2026-11-02T00:00:00Z') };
  /** A client that records each statement and answers every one with `rows` and a row count of 7. */
  const recording = (rows: unknown[]) => {
    const texts: string[] = [];
    const db = {
      query: (text: string) => {
        texts.push(text);
        return Promise.resolve({ rows, rowCount: 7 });
      },
    } as unknown as Parameters<Derived['deleteWindowRecords']>[0];
    return { db, texts };
  };
  /** The names of a statement's common table expressions, in order. */
  const ctesOf = (text: string) => [...text.matchAll(/(\w+) as \(\s*(?:delete|select|update)/g)].map((m) => m[1]);

  it("clears a window's records and each kept table's rows in one statement, in the tables' order", async () => {
    const { db, texts } = recording([{ deleted: '3' }]);
    expect(await derivedFor({}).deleteWindowRecords(db, 'prod', window)).toBe(3);
    expect(texts).toHaveLength(1);
    expect(ctesOf(texts[0]!)).toEqual(['gone', 'cleared', 'keys', 'uncounted']);
    const { db: bare, texts: bareTexts } = recording([{ deleted: '0' }]);
    await derivedFor({ ROLLUP_DIMENSIONS: 'off', FIELD_CATALOGUE: 'off' }).deleteWindowRecords(bare, 'prod', window);
    expect(ctesOf(bareTexts[0]!)).toEqual(['gone']);
  });

  it("reports records_hourly's deleted buckets from ROLLUP_RETENTION, and none when ROLLUP_DIMENSIONS is off", async () => {
    const { db, texts } = recording([]);
    expect(await derivedFor({}).pruneRollup(db, window.start)).toBe(7);
    expect(texts[0]).toBe('delete from "s".records_hourly where bucket < $1');
    expect(texts[1]).toContain('with pruned as (delete from "s".records_hourly_distinct where bucket < $1');
    const { db: off, texts: offTexts } = recording([]);
    expect(await derivedFor({ ROLLUP_DIMENSIONS: 'off' }).pruneRollup(off, window.start)).toBe(0);
    expect(offTexts).toEqual([]);
  });
});
