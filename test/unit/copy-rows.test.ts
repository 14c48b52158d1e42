/**
 * The bytes RecordsCopy sends (src/sync/rows/copy-rows.ts, CopyRows and IsoWriter): each kept record's exact
 * text from the page, escaped for COPY's text format, with its event time written as
 * `toISOString` writes it; checked against a plain string-built reference.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { CopyRows, IsoWriter, copyLines, copyRowRecord } from '../../src/sync/rows/copy-rows.js';

const WINDOW = { start: Date.UTC(2026, 9, 1), end: Date.UTC(2026, 9, 2) };

/** A row as the reference writes it: every column a string, COPY's escapes by regex. */
function referenceRow(source: string, payload: string, eventTime: number | null): string {
  const esc = (s: string) => s.replace(/[\\\n\r\t]/g, (c) => ({ '\\': '\\\\', '\n': '\\n', '\r': '\\r', '\t': '\\t' })[c]!);
  const time = eventTime === null ? '\\N' : new Date(eventTime).toISOString();
  return `${esc(source)}\t${esc(payload)}\t${time}\t${new Date(WINDOW.start).toISOString()}\n`;
}

const instant = fc.oneof(
  fc.integer({ min: 0, max: 4_102_444_800_000 }),
  fc.integer({ min: -8.64e15, max: 8.64e15 }),
  fc.double({ min: -1e13, max: 1e13, noNaN: true }),
  fc.constantFrom(0, -1, 253_402_300_799_999, 253_402_300_800_000, 8.64e15, -8.64e15),
);

describe('IsoWriter', () => {
  it('writes as bytes exactly what toISOString writes, day after day', () => {
    fc.assert(
      fc.property(fc.array(instant, { minLength: 1, maxLength: 20 }), (values) => {
        const iso = new IsoWriter();
        const out = Buffer.alloc(40);
        for (const ms of values) {
          const end = iso.write(out, 3, ms);
          expect(out.toString('latin1', 3, end)).toBe(new Date(ms).toISOString());
          expect(iso.format(ms)).toBe(new Date(ms).toISOString());
        }
      }),
      { numRuns: 500 },
    );
  });

  it('writes the instants of a page, mostly of one day, as toISOString does (its fast path within a day)', () => {
    const step = fc.oneof(fc.integer({ min: -2000, max: 90_000_000 }), fc.double({ min: -1, max: 1, noNaN: true }), fc.constantFrom(0, 1, -1, 86_400_000));
    const start = fc.oneof(instant, fc.constantFrom(0, 86_399_999, 253_402_300_799_000, -1, 1_767_225_599_999));
    fc.assert(
      fc.property(start, fc.array(step, { minLength: 1, maxLength: 50 }), (first, steps) => {
        const iso = new IsoWriter();
        const out = Buffer.alloc(40);
        let ms = first;
        for (const d of steps) {
          ms += d;
          if (Number.isNaN(new Date(ms).getTime())) continue;
          expect(out.toString('latin1', 3, iso.write(out, 3, ms))).toBe(new Date(ms).toISOString());
        }
      }),
      { numRuns: 500 },
    );
  });
});

/** Records with strings heavy in what COPY escapes, and non-ASCII text. */
const record = fc.dictionary(
  fc.string({ unit: fc.constantFrom('a', 'ø', '\\', '\n', '\t', '\r', '"', '😀'), maxLength: 4 }),
  fc.oneof(fc.string({ unit: fc.constantFrom('x', 'å', '\\', '\n', '\t', '\r', '"', 'N', '\u0001'), maxLength: 6 }), fc.integer(), fc.constant(null)),
  { maxKeys: 4 },
);

describe('CopyRows', () => {
  it('writes each kept record as its exact text, escaped, with its event time', () => {
    fc.assert(
      fc.property(
        fc.array(fc.record({ value: record, keep: fc.boolean(), time: fc.option(instant, { nil: null }) }), { maxLength: 8 }),
        fc.constantFrom(0, 1, '\t', ' '),
        fc.constantFrom('default', 'a\tb\\c', 'kunde-ø'),
        (records, indent, source) => {
          const texts = records.map((r) => JSON.stringify(r.value, null, indent));
          const text = `{"pageNumber":1,"data":[${texts.join(indent === 0 ? ',' : ',\n')}]}`;
          const keep = records.flatMap((r, i) => (r.keep ? [i] : []));
          const eventTimes = keep.map((i) => records[i]!.time);
          const rows = new CopyRows(source, WINDOW);
          const expected = keep.map((i, k) => referenceRow(source, texts[i]!, eventTimes[k]!)).join('');
          expect(rows.of({ text, keep, eventTimes }).equals(Buffer.from(expected, 'utf8'))).toBe(true);
          expect(rows.of({ text, bytes: Buffer.from(text, 'utf8'), keep, eventTimes }).equals(Buffer.from(expected, 'utf8'))).toBe(true);
          // A page without text: its records serialised.
          expect(rows.of({ records: records.map((r) => r.value), keep, eventTimes }).toString('utf8')).toBe(
            keep.map((i, k) => referenceRow(source, JSON.stringify(records[i]!.value), eventTimes[k]!)).join(''),
          );
        },
      ),
      { numRuns: 500 },
    );
  });

  it('writes pages needing no escaping (their payloads moved within the output) byte for byte, whichever records are kept', () => {
    const plainRecord = fc.dictionary(
      fc.string({ unit: fc.constantFrom('a', 'ø', '😀', ' '), maxLength: 3 }),
      fc.oneof(fc.string({ unit: fc.constantFrom('x', 'é', '{', ']', ','), maxLength: 30 }), fc.integer()),
      { maxKeys: 5 },
    );
    fc.assert(
      fc.property(
        fc.array(fc.record({ value: plainRecord, keep: fc.boolean(), time: fc.option(instant, { nil: null }) }), { maxLength: 12 }),
        fc.constantFrom('', ' ', '\n  '),
        fc.constantFrom('', '"pageSize":1000,"totalPages":9,'),
        (records, between, envelope) => {
          const texts = records.map((r) => JSON.stringify(r.value));
          const text = `{${envelope}"data":[${texts.join(`,${between}`)}],"pageNumber":1}`;
          const keep = records.flatMap((r, i) => (r.keep ? [i] : []));
          if (keep.length === 0) return;
          const eventTimes = keep.map((i) => records[i]!.time);
          const expected = Buffer.from(keep.map((i, k) => referenceRow('default', texts[i]!, eventTimes[k]!)).join(''), 'utf8');
          const rows = new CopyRows('default', WINDOW);
          // Twice through one CopyRows, as a window's pages go: nothing of one page leaks into the next.
          for (let round = 0; round < 2; round++) expect(rows.of({ text, bytes: Buffer.from(text, 'utf8'), keep, eventTimes }).equals(expected)).toBe(true);
        },
      ),
      { numRuns: 500 },
    );
  });

  it('refuses a text without the records it is to keep', () => {
    const rows = new CopyRows('default', WINDOW);
    expect(() => rows.of({ text: '{"data":[1]}', keep: [1], eventTimes: [null] })).toThrow(/no data array/);
    expect(() => rows.of({ text: '{"items":[1]}', keep: [0], eventTimes: [null] })).toThrow(/no data array/);
  });
});

describe('copyLines and copyRowRecord', () => {
  it('give back each kept record of the rows CopyRows wrote: its exact text and its event time', () => {
    const text = fc.oneof(fc.string(), fc.constantFrom('a\\tb', 'x\ty', 'line\nbreak', 'back\\\\slash', '\r\n\t\\', 'é😀\u2028'));
    fc.assert(
      fc.property(
        fc.array(fc.record({ s: text, n: fc.integer() }), { minLength: 1, maxLength: 12 }),
        fc.array(fc.option(fc.integer({ min: 0, max: 4_102_444_800_000 }), { nil: null }), { minLength: 12, maxLength: 12 }),
        fc.string(),
        (records, times, source) => {
          const body = JSON.stringify({ pageNumber: 1, data: records });
          const keep = records.map((_, i) => i).filter((i) => i % 3 !== 1);
          const eventTimes = keep.map((i) => times[i]!);
          const rows = new CopyRows(source, WINDOW);
          const chunks = [rows.of({ text: body, keep, eventTimes }), rows.of({ records, keep, eventTimes })];
          const lines = copyLines(chunks);
          const expected = keep.map((i, k) => ({ text: JSON.stringify(records[i]), eventTime: eventTimes[k]! }));
          expect(lines.map((line) => copyRowRecord(line))).toEqual([...expected, ...expected]);
        },
      ),
      { numRuns: 300 },
    );
  });
});
