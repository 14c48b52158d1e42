import { describe, expect, it } from 'vitest';
import { formatFieldsTable } from '../../src/app/schema.js';
import { catalogueRecords, mergeFields } from '../../src/sync/derived/fields/catalogue.js';
import { mergeSources, viewType, type FieldRow } from '../../src/sync/derived/fields/fields.js';
import { columnName, typedViewSql, viewFields } from '../../src/sync/derived/fields/typed-view.js';
import { Tables } from '../../src/sync/store/pg/tables.js';

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

describe('typedViewSql', () => {
  it('types each scalar field, quotes names and keys, and leaves out object-only fields', () => {
    const sql = typedViewSql(new Tables('s'), [row("it's", 'it_s', ['number']), row('o', 'o', ['object']), row('when', 'when', ['date-time'])]);
    expect(sql).toContain(`case when jsonb_typeof(r.payload -> 'it''s') = 'number' then (r.payload ->> 'it''s')::numeric end as "it_s"`);
    expect(sql).toContain(`"s".records_try_timestamptz(r.payload ->> 'when') end as "when"`);
    expect(sql).not.toContain(`as "o"`);
    expect(sql.startsWith('create view "s".records_typed as select r.id, r.source, r.event_time, r.window_start, w.window_end, w.run_id, w.loaded_at, ')).toBe(
      true,
    );
    expect(sql.endsWith(' from "s".records r left join "s".sync_windows w on w.source = r.source and w.window_start = r.window_start')).toBe(true);
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

describe('viewFields', () => {
  it('holds the fields most records carry, ties by path in code point order, objects never, in the order given (by path)', () => {
    // As readFields orders them (collate "C"); the ranking must not take the order given for a tie-break.
    const fields = [
      row('a', null, ['number'], { records: 1 }),
      row('b', null, ['string'], { records: 9 }),
      row('c', null, ['object'], { records: 99 }),
      row('d', null, ['boolean'], { records: 5 }),
      row('\uFF5E', null, ['string'], { records: 5 }),
      row('\u{1F600}', null, ['string'], { records: 5 }),
    ];
    const paths = (max: number) => viewFields(fields, max).held.map((f) => f.path);
    expect(paths(2)).toEqual(['b', 'd']);
    // U+FF5E before U+1F600 by code point, though not by UTF-16 code unit.
    expect(paths(3)).toEqual(['b', 'd', '\uFF5E']);
    expect(viewFields([...fields].reverse(), 3).held.map((f) => f.path)).toEqual(['\uFF5E', 'd', 'b']);
    expect(viewFields(fields, 3).leftOut).toBe(2);
    expect(viewFields(fields, 5)).toMatchObject({ leftOut: 0 });
    expect(paths(5)).toEqual(['a', 'b', 'd', '\uFF5E', '\u{1F600}']);
  });
});
