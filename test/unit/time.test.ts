/** src/time.ts: the one reader of durations and date-times (config, CLI flags, simulator, records). */
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

describe('parseEventTime (records, lenient)', () => {
  it('reads a zoneless time as UTC and a space for T', () => {
    expect(parseEventTime('2026-11-01 10:00:00')).toBe(Date.UTC(2026, 10, 1, 10));
    expect(parseEventTime('2026-11-01T10:00:00+02:00')).toBe(Date.UTC(2026, 10, 1, 8));
    expect(parseEventTime('yesterday')).toBeUndefined();
  });
});
