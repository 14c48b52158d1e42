/**
 * E7's limits (src/exposition/limits.ts), Prometheus's sample_limit, label_limit and
 * label_value_length_limit, checked on the bytes: exact boundaries, what counts and what does
 * not, multi-byte values, both text formats, and the same answer however the body is cut into
 * chunks.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ExpositionLimitScanner, parseExposition, type ExpositionLimits } from '../../src/exposition/index.js';
import { checkExpositionLimits } from '../helpers/exposition.js';

const NONE: ExpositionLimits = { sampleLimit: 0, labelLimit: 0, labelValueLengthLimit: 0 };
const samples = (n: number): string => Array.from({ length: n }, (_, i) => `x_total{i="${i}"} ${i}\n`).join('');

describe('sample_limit', () => {
  it('passes exactly the limit and fails at one more, on the line that breaks it', () => {
    const limits = { ...NONE, sampleLimit: 5 };
    expect(checkExpositionLimits(samples(5), limits)).toBeUndefined();
    expect(checkExpositionLimits(samples(6), limits)).toEqual({ limit: 'sample_limit', value: 5, line: 6 });
  });

  it('does not count comments, metadata, blank lines, CRs, a byte order mark or # EOF', () => {
    const text = '\uFEFF# HELP x_total Logins.\r\n# TYPE x_total counter\r\n\r\n   \n\t\nx_total{a="1"} 1\r\n# a comment\nx_total{a="2"} 2\n# EOF\n';
    expect(checkExpositionLimits(text, { ...NONE, sampleLimit: 2 })).toBeUndefined();
    expect(checkExpositionLimits(text, { ...NONE, sampleLimit: 1 })).toMatchObject({ limit: 'sample_limit', line: 8 });
  });

  it('counts lines the parser drops as invalid too: reading them was the cost', () => {
    const text = 'x 1\n9bad 1\nx{a="1" 1\n';
    expect(parseExposition(text).invalid).toHaveLength(2);
    expect(checkExpositionLimits(text, { ...NONE, sampleLimit: 2 })).toMatchObject({ limit: 'sample_limit', line: 3 });
  });

  it('has no limit at 0', () => {
    expect(checkExpositionLimits(samples(1000), NONE)).toBeUndefined();
  });

  it('agrees with the parser on valid expositions: the limit is the number of samples parsed', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 40 }), fc.integer({ min: 0, max: 40 }), (n, limit) => {
        const text = `# TYPE x_total counter\n${samples(n)}`;
        const parsed = parseExposition(text).families.reduce((sum, family) => sum + family.samples.length, 0);
        expect(parsed).toBe(n);
        const breach = checkExpositionLimits(text, { ...NONE, sampleLimit: limit });
        expect(breach === undefined).toBe(limit === 0 || n <= limit);
      }),
    );
  });
});

describe('label_limit', () => {
  const line = (labels: number): string => `x{${Array.from({ length: labels }, (_, i) => `l${i}="v${i}"`).join(',')}} 1\n`;

  it('passes exactly the limit of labels on a sample and fails at one more', () => {
    expect(checkExpositionLimits(line(3), { ...NONE, labelLimit: 3 })).toBeUndefined();
    expect(checkExpositionLimits(`y 1\n${line(4)}`, { ...NONE, labelLimit: 3 })).toEqual({ limit: 'label_limit', value: 3, line: 2 });
  });

  it('counts per sample, not per exposition, and not the metric name', () => {
    expect(checkExpositionLimits(line(2).repeat(50), { ...NONE, labelLimit: 2 })).toBeUndefined();
    expect(checkExpositionLimits('x 1\nx{} 2\n', { ...NONE, labelLimit: 1 })).toBeUndefined();
  });

  it('counts pairs, not the commas, braces or quotes escaped inside values', () => {
    const text = 'x{a="1,2,3",b="\\"c=\\"d\\"",c="}{"} 1\n';
    expect(parseExposition(text).families[0]!.samples[0]!.labels).toHaveLength(3);
    expect(checkExpositionLimits(text, { ...NONE, labelLimit: 3 })).toBeUndefined();
    expect(checkExpositionLimits(text, { ...NONE, labelLimit: 2 })).toMatchObject({ limit: 'label_limit' });
  });

  it('stops at the first label over the limit of a line with 100,000 pairs', () => {
    const scanner = new ExpositionLimitScanner({ ...NONE, labelLimit: 64 });
    const huge = Buffer.from(`x{${Array.from({ length: 100_000 }, (_, i) => `l${i}="v"`).join(',')}} 1\n`);
    expect(scanner.write(huge)).toEqual({ limit: 'label_limit', value: 64, line: 1 });
  });

  it('counts the labels of the sample only, not an OpenMetrics exemplar after its value', () => {
    const text = '# TYPE x counter\nx_total{a="1"} 1 # {trace_id="abc",span_id="d"} 1 1700000000.000\n# EOF\n';
    expect(checkExpositionLimits(text, { ...NONE, labelLimit: 1 })).toBeUndefined();
    // A sample without labels: what follows its value is not a label set either.
    expect(checkExpositionLimits('x_total 1 # {trace_id="abc",s="d"} 1\n# EOF\n', { ...NONE, labelLimit: 1 })).toBeUndefined();
  });
});

describe('label_value_length_limit', () => {
  it('passes a value of exactly the limit in bytes and fails at one byte more', () => {
    const limits = { ...NONE, labelValueLengthLimit: 4 };
    expect(checkExpositionLimits('x{a="abcd"} 1\n', limits)).toBeUndefined();
    expect(checkExpositionLimits('x{a="abcd",b="abcde"} 1\n', limits)).toEqual({ limit: 'label_value_length_limit', value: 4, line: 1 });
  });

  it('measures UTF-8 bytes, as Prometheus does (Go len), not characters', () => {
    const limits = { ...NONE, labelValueLengthLimit: 4 };
    // é is 2 bytes, 😀 is 4 (a surrogate pair in JavaScript).
    expect(checkExpositionLimits('x{a="éé"} 1\n', limits)).toBeUndefined();
    expect(checkExpositionLimits('x{a="ééa"} 1\n', limits)).toMatchObject({ limit: 'label_value_length_limit' });
    expect(checkExpositionLimits('x{a="😀"} 1\n', limits)).toBeUndefined();
    expect(checkExpositionLimits('x{a="a😀"} 1\n', limits)).toMatchObject({ limit: 'label_value_length_limit' });
    expect(checkExpositionLimits('x{a="€€"} 1\n', { ...NONE, labelValueLengthLimit: 6 })).toBeUndefined();
    expect(checkExpositionLimits('x{a="€€"} 1\n', { ...NONE, labelValueLengthLimit: 5 })).toMatchObject({ limit: 'label_value_length_limit' });
  });

  it('measures the value with its escapes undone', () => {
    // a\"b\\c\nd is a"b\c<LF>d: 7 bytes.
    const text = 'x{a="a\\"b\\\\c\\nd"} 1\n';
    expect(Buffer.byteLength(parseExposition(text).families[0]!.samples[0]!.labels[0]![1])).toBe(7);
    expect(checkExpositionLimits(text, { ...NONE, labelValueLengthLimit: 7 })).toBeUndefined();
    expect(checkExpositionLimits(text, { ...NONE, labelValueLengthLimit: 6 })).toMatchObject({ limit: 'label_value_length_limit' });
  });

  it('does not measure HELP text or comments', () => {
    const text = `# HELP x ${'h'.repeat(100)}\n# ${'c'.repeat(100)}\nx{a="b"} 1\n`;
    expect(checkExpositionLimits(text, { ...NONE, labelValueLengthLimit: 1 })).toBeUndefined();
  });
});

describe('the scanner fed in chunks', () => {
  const limits: ExpositionLimits = { sampleLimit: 3, labelLimit: 2, labelValueLengthLimit: 3 };
  const bodies = [
    '\uFEFFx{a="é"} 1\nx{a="ab\\"",b="c"} 2\r\n# TYPE y gauge\ny 3\n',
    'x{a="1"} 1\nx{a="2"} 2\nx{a="3"} 3\nx{a="4"} 4\n',
    'x{a="1",b="2",c="3"} 1\n',
    'x{a="€€"} 1\n',
    'x{a="a\\\\b"} 1\nx 2\n',
  ];

  it('gives the answer of the whole body however the bytes are cut, within a character or an escape too', () => {
    for (const body of bodies) {
      const bytes = Buffer.from(body);
      const whole = checkExpositionLimits(bytes, limits);
      fc.assert(
        fc.property(fc.uniqueArray(fc.integer({ min: 1, max: bytes.length - 1 }), { maxLength: 8 }), (cuts) => {
          const scanner = new ExpositionLimitScanner(limits);
          let breach;
          let at = 0;
          for (const cut of [...cuts.sort((a, b) => a - b), bytes.length]) {
            breach = scanner.write(bytes.subarray(at, cut));
            at = cut;
          }
          expect(breach).toEqual(whole);
        }),
      );
    }
  });

  it('keeps its first breach', () => {
    const scanner = new ExpositionLimitScanner({ ...NONE, sampleLimit: 1 });
    expect(scanner.write(Buffer.from('x 1\n'))).toBeUndefined();
    const breach = scanner.write(Buffer.from('x 2\n'));
    expect(breach).toMatchObject({ limit: 'sample_limit', line: 2 });
    expect(scanner.write(Buffer.from('x{a="long"} 3\n'))).toBe(breach);
  });
});
