import { describe, expect, it } from 'vitest';
import { judgeFlat, quantile } from '../../soak/flat.js';

const rule = { name: 'open fds', levelSlack: 2, peakSlack: 4 };

describe('soak flatness: the peak rule', () => {
  it('takes the nearest-rank quantile', () => {
    expect(quantile([5, 1, 3, 2, 4], 0.5)).toBe(3);
    expect(quantile([5, 1, 3, 2, 4], 1)).toBe(5);
    expect(
      quantile(
        Array.from({ length: 200 }, (_, i) => i),
        0.99,
      ),
    ).toBe(197);
    expect(quantile([], 0.99)).toBeNaN();
  });

  it('passes one high sample in the second half (runs that happened to coincide)', () => {
    const values = Array.from({ length: 200 }, (_, i) => 32 + (i % 5));
    values[150] = 56;
    const v = judgeFlat(values, rule);
    expect(v.secondHalfMax).toBe(56);
    expect(v.pass).toBe(true);
    expect(v.reason).toContain('2nd-half max 56');
  });

  it('fails peaks that repeat above the first half (a leak while runs are in flight)', () => {
    const values = Array.from({ length: 200 }, (_, i) => 32 + (i % 5));
    for (const i of [110, 130, 150, 170, 190]) values[i] = 56;
    const v = judgeFlat(values, rule);
    expect(v.pass).toBe(false);
    expect(v.reason).toMatch(/2nd-half p99 56 > 1st-half max 36 \+ 4/);
  });

  it('fails a level that grows, peaks or not', () => {
    const values = Array.from({ length: 200 }, (_, i) => 30 + Math.floor(i / 20));
    expect(judgeFlat(values, rule).pass).toBe(false);
  });
});
