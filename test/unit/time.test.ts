/** src/time.ts: the one reader of durations and date-times (config, CLI flags, simulator, records). */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseEventTime, parseIsoDate, parseIsoDateTime } from '../../src/time.js';
import { parseIsoOption } from '../../src/commands/sync.js';

describe('parseIsoDateTime', () => {
  it.each([
    '2026-02-30T00:00:00Z',
    '2026-02-29T00:00:00Z',
    '2026-13-01T00:00:00Z',
    '2026-11-31T10:00:00Z',
    '2026-11-01T24:00:00Z',
    '2026-11-01T10:60:00Z',
    '2026-11-01T10:00:61Z',
  ])('refuses the impossible %s instead of rolling it over', (text) => expect(parseIsoDateTime(text)).toBeUndefined());

  it('reads leap days, zones and fractions', () => {
    expect(parseIsoDateTime('2028-02-29T00:00:00Z')).toBe(Date.UTC(2028, 1, 29));
    expect(parseIsoDate('2026-11-01T01:00:00+01:00')?.toISOString()).toBe('2026-11-01T00:00:00.000Z');
  });

  it('is what --from and --to accept', () => {
    expect(parseIsoOption('2026-10-01T00:00:00Z').toISOString()).toBe('2026-10-01T00:00:00.000Z');
    expect(() => parseIsoOption('2026-02-30T00:00:00Z')).toThrow(
      /must be an ISO 8601 date-time with a zone; got|must be an ISO 8601 date-time with a zone, such as/,
    );
  });
});

/** parseEventTime by its general path alone: a prefix check, then Date.parse. */
function eventTimeByDateParse(text: string): number | undefined {
  if (!/^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}/.test(text)) return undefined;
  const ms = Date.parse(/(Z|[+-]\d{2}:?\d{2})$/i.test(text) ? text : `${text.replace(' ', 'T')}Z`);
  return Number.isNaN(ms) ? undefined : ms;
}

describe('parseEventTime (records, lenient)', () => {
  it('reads the common UTC shapes as Date.parse does, whatever the digits', () => {
    const digits = (n: number) => fc.string({ unit: fc.constantFrom('0', '1', '2', '3', '5', '9'), minLength: n, maxLength: n });
    const stamp = fc
      .tuple(
        digits(4),
        digits(2),
        digits(2),
        digits(2),
        digits(2),
        digits(2),
        fc.option(digits(3), { nil: undefined }),
        fc.constantFrom('T', ' ', 't'),
        fc.constantFrom('Z', 'z', ''),
      )
      .map(([y, mo, d, h, mi, s, f, sep, zone]) => `${y}-${mo}-${d}${sep}${h}:${mi}:${s}${f === undefined ? '' : `.${f}`}${zone}`);
    const mutated = fc
      .tuple(stamp, fc.nat(), fc.constantFrom('x', '-', ':', '.', '/', ''))
      .map(([t, at, ch]) => t.slice(0, at % t.length) + ch + t.slice((at % t.length) + 1));
    const real = fc.integer({ min: -62_135_596_800_000, max: 253_402_300_799_999 }).map((ms) => new Date(ms).toISOString());
    fc.assert(
      fc.property(
        fc.oneof(
          stamp,
          mutated,
          real,
          real.map((t) => t.replace('.000', '')),
        ),
        (text) => {
          expect(parseEventTime(text)).toBe(eventTimeByDateParse(text));
        },
      ),
      { numRuns: 5000 },
    );
  });

  it('reads a zoneless time as UTC and a space for T', () => {
    expect(parseEventTime('2026-11-01 10:00:00')).toBe(Date.UTC(2026, 10, 1, 10));
    expect(parseEventTime('2026-11-01T10:00:00+02:00')).toBe(Date.UTC(2026, 10, 1, 8));
    expect(parseEventTime('yesterday')).toBeUndefined();
  });
});
