import { describe, expect, it } from 'vitest';
import { ISO_DATE_TIME_PATTERN, isDateTime } from '../../src/sync/derived/fields/field-types.js';

const PATTERN = new RegExp(ISO_DATE_TIME_PATTERN);

/** Deterministic: the same strings every run. */
function mulberry32(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const VALID = [
  '2026-10-10T00:00:01Z',
  '2026-10-10T00:00Z',
  '2026-12-31 23:59:59.123456+05:30',
  '0000-01-01T00:00:00-0000',
  '2026-02-30T12:00+01',
  '1999-09-09T09:09:09.9Z',
];
const ALPHABET = '0123456789-:.TZ +t z/9';

describe('isDateTime', () => {
  it('agrees with ISO_DATE_TIME_PATTERN on valid texts and their mutations', () => {
    const random = mulberry32(40);
    const cases = [
      ...VALID,
      '',
      '2026-10-10',
      '2026-10-10T00:00',
      '2026-00-10T00:00Z',
      '2026-10-00T00:00Z',
      '2026-10-10T24:00Z',
      '2026-10-10T00:00+01:',
      '2026-10-10T00:00:00.Z',
    ];
    for (const base of VALID) {
      for (let n = 0; n < 3000; n++) {
        const chars = [...base];
        const edits = 1 + Math.floor(random() * 3);
        for (let e = 0; e < edits; e++) {
          const at = Math.floor(random() * (chars.length + 1));
          const c = ALPHABET[Math.floor(random() * ALPHABET.length)]!;
          const kind = random();
          if (kind < 0.5) chars[Math.min(at, chars.length - 1)] = c;
          else if (kind < 0.75) chars.splice(at, 0, c);
          else chars.splice(at, 1);
        }
        cases.push(chars.join(''));
      }
    }
    const differ = cases.filter((s) => isDateTime(s) !== PATTERN.test(s));
    expect(differ).toEqual([]);
    // The mutations reach both answers.
    expect(cases.filter((s) => PATTERN.test(s)).length).toBeGreaterThan(1000);
    expect(cases.filter((s) => !PATTERN.test(s)).length).toBeGreaterThan(1000);
  });
});
