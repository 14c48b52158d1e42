/**
 * The one walk of a page's records (src/sync/derived/page-walk.ts) against a reference written
 * here record by record, the way the catalogue and the rollup counters read records before it
 * (Object.keys per record, `#>>` texts by path, a group per key): for any page (records of many
 * shapes or few, values of every JSON type, records that are no object, keys that repeat with
 * another type, more shapes than a trie node scans), the field statistics and the rollup groups
 * are the same.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { EXAMPLE_MAX_CHARS, ISO_DATE_TIME_PATTERN, SECRET_FIELD_PATTERN, type WindowFields } from '../../src/sync/derived/fields/field-types.js';
import { PageWalk } from '../../src/sync/derived/page-walk.js';

const HOUR = 3_600_000;
const dateTime = new RegExp(ISO_DATE_TIME_PATTERN);
const secret = new RegExp(SECRET_FIELD_PATTERN, 'i');

function refType(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  if (typeof v === 'string') return dateTime.test(v) ? 'date-time' : 'string';
  return typeof v === 'object' ? 'object' : typeof v;
}

function refExample(v: unknown): string {
  const text = JSON.stringify(v);
  return text.length > EXAMPLE_MAX_CHARS ? `${text.slice(0, EXAMPLE_MAX_CHARS - 1)}…` : text;
}

/** The catalogue, one record and one key at a time. */
function refFields(records: readonly unknown[], keep: readonly number[], times: readonly (number | null)[]): WindowFields {
  const into: WindowFields = new Map();
  keep.forEach((position, k) => {
    const record = records[position];
    if (typeof record !== 'object' || record === null || Array.isArray(record)) return;
    const seen = times[k] ?? null;
    for (const key of Object.keys(record)) {
      const value = (record as Record<string, unknown>)[key];
      const stats = into.get(key) ?? { types: new Set<string>(), records: 0, first: Infinity, last: -Infinity, untimed: false, example: null };
      into.set(key, stats);
      stats.types.add(refType(value));
      stats.records++;
      if (seen === null) stats.untimed = true;
      else {
        stats.first = Math.min(stats.first, seen);
        stats.last = Math.max(stats.last, seen);
      }
      if (stats.example === null && value !== null && !secret.test(key)) stats.example = refExample(value);
    }
  });
  return into;
}

const NOT_EXACT = Symbol('not exact');

/** `payload #>> path` where the parsed record gives it exactly. */
function refText(record: unknown, path: readonly string[]): string | null | typeof NOT_EXACT {
  let v = record;
  for (const key of path) {
    if (v === null || typeof v !== 'object') return null;
    if (Array.isArray(v)) return NOT_EXACT;
    if (!Object.hasOwn(v, key)) return null;
    v = (v as Record<string, unknown>)[key];
  }
  if (v === null || v === undefined) return null;
  if (typeof v === 'boolean') return String(v);
  return typeof v === 'string' ? v : NOT_EXACT;
}

interface RefRollup {
  exact: boolean;
  hourly: Map<string, number>;
  distinct: Map<string, string[]>;
}

/** The rollup groups, one record at a time, keyed by JSON of [hour, values]. */
function refRollup(
  records: readonly unknown[],
  keep: readonly number[],
  times: readonly (number | null)[],
  dims: string[][],
  by: string[][],
  fields: string[][],
): RefRollup {
  const hourly = new Map<string, number>();
  const distinct = new Map<string, Set<string>>();
  for (let k = 0; k < keep.length; k++) {
    const record = records[keep[k]!];
    const ms = times[k] ?? null;
    const hour = ms === null ? null : Math.floor(Math.trunc(ms) / HOUR) * HOUR;
    const texts = [...dims, ...(fields.length > 0 ? by : []), ...fields].map((p) => refText(record, p));
    if (texts.includes(NOT_EXACT)) return { exact: false, hourly: new Map(), distinct: new Map() };
    const key = JSON.stringify([hour, texts.slice(0, dims.length)]);
    hourly.set(key, (hourly.get(key) ?? 0) + 1);
    const byTexts = texts.slice(dims.length, dims.length + (fields.length > 0 ? by.length : 0));
    fields.forEach((_, j) => {
      const v = texts[dims.length + byTexts.length + j];
      if (v === null) return;
      const dkey = JSON.stringify([hour, [...byTexts, String(j)]]);
      const set = distinct.get(dkey) ?? new Set<string>();
      distinct.set(dkey, set.add(v as string));
    });
  }
  return { exact: true, hourly, distinct: new Map([...distinct].map(([k, s]) => [k, [...s].sort()])) };
}

/** Keys from a small pool, so that shapes repeat, and many more now and then (a trie node with more children than it scans). */
const key = fc.oneof(
  { weight: 8, arbitrary: fc.constantFrom('a', 'b', 'c', 'd', 'token', '1', '0', 'when') },
  { weight: 1, arbitrary: fc.integer({ min: 0, max: 60 }).map((n) => `k${n}`) },
);
const dateLike = fc.constantFrom(
  '2026-11-01T10:00:00Z',
  '2026-11-01T10:00:00.123+01:00',
  '2026-02-30 23:59+0530',
  '2026-13-01T10:00Z',
  '2026-11-01T10:00:00.Z',
  'tomorrow',
);
const scalar = fc.oneof(
  fc.string({ maxLength: 6 }),
  dateLike,
  fc.constantFrom('x', 'y', ''),
  fc.integer(),
  fc.double({ noNaN: true }),
  fc.boolean(),
  fc.constant(null),
);
const value = fc.oneof(
  { weight: 6, arbitrary: scalar },
  { weight: 1, arbitrary: fc.dictionary(fc.constantFrom('c', 'z'), scalar, { maxKeys: 2 }) },
  { weight: 1, arbitrary: fc.array(scalar, { maxLength: 2 }) },
);
const record = fc.oneof(
  { weight: 12, arbitrary: fc.dictionary(key, value, { maxKeys: 6 }) },
  { weight: 1, arbitrary: fc.oneof(fc.constant(null), fc.integer(), fc.string({ maxLength: 3 }), fc.array(scalar, { maxLength: 2 })) },
);
const page = fc
  .array(fc.record({ record, kept: fc.boolean(), time: fc.option(fc.double({ min: 0, max: 10 * HOUR, noNaN: true }), { nil: null }) }), { maxLength: 60 })
  .map((rows) => ({
    records: rows.map((r) => r.record),
    keep: rows.flatMap((r, i) => (r.kept ? [i] : [])),
    times: rows.filter((r) => r.kept).map((r) => r.time),
  }));
/** Rollup settings: top-level and nested paths, with and without distinct fields. */
const settings = fc.constantFrom<{ dims: string[][]; by: string[][]; fields: string[][] }[]>(
  { dims: [['a'], ['b', 'c']], by: [['a']], fields: [['d'], ['b', 'z']] },
  { dims: [['a']], by: [], fields: [['b']] },
  { dims: [['c'], ['when']], by: [['c'], ['d']], fields: [] },
  { dims: [], by: [['a']], fields: [['c']] },
);

function dimension(path: string[]): { column: string; path: string[] } {
  return { column: path.join('_'), path };
}

describe('PageWalk.observe, against the record-by-record reference', () => {
  it('gathers the same field statistics and the same rollup groups for any page', () => {
    fc.assert(
      fc.property(page, settings, fc.boolean(), ({ records, keep, times }, s, catalogue) => {
        const walk = new PageWalk({ dimensions: s.dims.map(dimension), distinctBy: s.by.map(dimension), distinct: s.fields.map(dimension) });
        // Twice through one walk: the scratch arrays it keeps between pages must not leak into the next.
        for (let round = 0; round < 2; round++) {
          const got = walk.observe(records, keep, times, catalogue);
          expect(got.fields).toEqual(catalogue ? refFields(records, keep, times) : new Map());
          const want = refRollup(records, keep, times, s.dims, s.by, s.fields);
          const rollup = got.rollup!;
          expect(rollup.exact).toBe(want.exact);
          expect(new Map([...rollup.hourly.values()].map((g) => [JSON.stringify([g.hour, g.values]), g.records]))).toEqual(want.hourly);
          expect(new Map([...rollup.distinct.values()].map((g) => [JSON.stringify([g.hour, g.values]), [...g.seen].sort()]))).toEqual(want.distinct);
        }
      }),
      { numRuns: 400 },
    );
  });

  it('adds to fields it is given, and counts no rollup with ROLLUP_DIMENSIONS off', () => {
    fc.assert(
      fc.property(page, page, (first, second) => {
        const walk = new PageWalk({ dimensions: undefined, distinctBy: [], distinct: [] });
        const into = walk.observe(first.records, first.keep, first.times, true).fields;
        const both = walk.observe(second.records, second.keep, second.times, true, into);
        expect(both.rollup).toBeUndefined();
        const offset = first.records.length;
        expect(both.fields).toEqual(
          refFields([...first.records, ...second.records], [...first.keep, ...second.keep.map((i) => i + offset)], [...first.times, ...second.times]),
        );
      }),
      { numRuns: 200 },
    );
  });

  it('tells a key with one type from the same key with another past the children a trie node scans', () => {
    const records: unknown[] = Array.from({ length: 20 }, (_, i) => ({ [`k${i}`]: i }));
    records.push({ k3: 'x' }, { k3: null }, { k18: 'y' }, { k18: 1 }, { k19: '2026-11-01T10:00Z' }, { k19: 19 });
    const keep = records.map((_, i) => i);
    const times = records.map((_, i) => i * 1000);
    expect(new PageWalk().observe(records, keep, times, true).fields).toEqual(refFields(records, keep, times));
  });

  it('takes the example of the first record holding a non-null value, whichever shape it has', () => {
    const walk = new PageWalk();
    const records = [{ a: null, b: 1 }, { b: 2, a: 'late' }, { a: null, b: 3 }, { a: 'later' }];
    const fields = walk.observe(records, [0, 1, 2, 3], [null, 5, 6, 7], true).fields;
    expect(fields.get('a')).toEqual({ types: new Set(['null', 'string']), records: 4, first: 5, last: 7, untimed: true, example: '"late"' });
    expect(fields.get('b')).toMatchObject({ records: 3, example: '1' });
  });
});
