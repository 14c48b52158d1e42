import { describe, expect, it } from 'vitest';
import { judgeFlat, MIN_BAND_SAMPLES, quantile } from '../../soak/flat.js';
import { soakPassed, verdictOf } from '../../soak/report.js';

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

  it('shows, without judging, the peaks of a rule with showPeak, and still fails a floor that rises', () => {
    // Peaks 49 then 57 in one configuration, the floor at 34 throughout (replica A, soak of 2026-11-27 20:42).
    const shown = { name: 'open fds', levelSlack: 2, showPeak: true, level: 'floor' as const };
    const values = Array.from({ length: 200 }, (_, i) => 34 + (i % 4));
    values[40] = 49;
    for (const i of [150, 151, 170]) values[i] = 57;
    const v = judgeFlat(values, shown);
    expect(v.pass).toBe(true);
    expect(v.reason).toContain('peaks shown, not judged: 1st-half max 49, 2nd-half max 57');
    // One descriptor leaked every 10 samples stays open: the floor rises.
    const leaking = values.map((x, i) => x + Math.floor(i / 10));
    expect(judgeFlat(leaking, shown).pass).toBe(false);
  });

  it('fails a level that grows, peaks or not', () => {
    const values = Array.from({ length: 200 }, (_, i) => 30 + Math.floor(i / 20));
    expect(judgeFlat(values, rule).pass).toBe(false);
  });
});

describe('soak flatness: the level rule', () => {
  it('reads the bands it is given, not the default shares, and names them', () => {
    // A step at 1/3 (a source added) and flat after: the default bands see +20 %, the bands of one configuration see none.
    const values = Array.from({ length: 300 }, (_, i) => (i < 100 ? 100 : 120) + (i % 3));
    const memory = { name: 'RSS', maxGrowthRatio: 0.1 };
    expect(judgeFlat(values, memory).pass).toBe(false);
    const v = judgeFlat(values, memory, String, { baseline: values.slice(150, 200), end: values.slice(250), label: 'after the step' });
    expect(v.pass).toBe(true);
    expect(v.reason).toContain('level after the step');
  });

  it('fails growth within the given bands', () => {
    const values = Array.from({ length: 300 }, (_, i) => 100 + i / 5);
    const v = judgeFlat(values, { name: 'RSS', maxGrowthRatio: 0.1 }, String, { baseline: values.slice(150, 200), end: values.slice(250), label: 'b' });
    expect(v.pass).toBe(false);
  });

  it('fails a band too thin to judge', () => {
    const values = Array.from({ length: 300 }, () => 100);
    const v = judgeFlat(values, { name: 'RSS', maxGrowthRatio: 0.1 }, String, {
      baseline: values.slice(0, MIN_BAND_SAMPLES - 1),
      end: values.slice(250),
      label: 'thin',
    });
    expect(v.pass).toBe(false);
    expect(v.reason).toMatch(/at least 5 each/);
  });

  it('judges memory by the floor its swings return to: swings pass, a rising floor fails', () => {
    const rule = { name: 'RSS', maxGrowthRatio: 0.1, level: 'floor' as const };
    // Between collections the level swings 100-150; the end band happens to catch more highs: its median is +25 %, its floor is not.
    const swings = Array.from({ length: 300 }, (_, i) => (i >= 240 ? (i % 2 === 0 ? 150 : 100) : i % 4 === 0 ? 150 : 100));
    expect(judgeFlat(swings, { ...rule, level: 'median' }).pass).toBe(false);
    expect(judgeFlat(swings, rule).pass).toBe(true);
    // What a leak holds is never given back: the floor rises with it.
    const leak = swings.map((v, i) => v + i / 6);
    const v = judgeFlat(leak, rule);
    expect(v.pass).toBe(false);
    expect(v.reason).toContain('floor (p10)');
  });
  it('judges RSS by its lowest sample: memory given back late passes, a leak fails', () => {
    const rule = { name: 'RSS', maxGrowthRatio: 0.1, level: 'lowest' as const };
    // Baseline 115-140; the end band holds 152-157 for most of its length after a burst, then falls to 115 (replica A, soak of 2026-11-28 00:27).
    const baseline = Array.from({ length: 36 }, (_, i) => (i % 3 === 0 ? 140 : 115 + (i % 5)));
    const late = [...Array.from({ length: 36 }, (_, i) => 152 + (i % 6)), 137, 128, 129, 135, 115, 115];
    const bands = { baseline, end: late, label: 'baseline vs end' };
    const all = [...baseline, ...late];
    expect(judgeFlat(all, { ...rule, level: 'floor' }, String, bands).pass).toBe(false);
    expect(judgeFlat(all, rule, String, bands).pass).toBe(true);
    // A leak is resident in every sample: the lowest rises with it.
    const leaking = late.map((v) => v + 15);
    const v = judgeFlat([...baseline, ...leaking], rule, String, { ...bands, end: leaking });
    expect(v.pass).toBe(false);
    expect(v.reason).toContain('end lowest 130 > 115');
  });
});

describe('soak verdict', () => {
  it('counts judged checks only, and shows the unjudged as such', () => {
    const short = { name: 'A RSS flat', pass: false, detail: 'not judged', judged: false };
    expect(verdictOf(short)).toBe('not judged');
    expect(soakPassed([{ name: 'final sync', pass: true, detail: '' }, short])).toBe(true);
    expect(soakPassed([{ name: 'final sync', pass: false, detail: '' }, short])).toBe(false);
    expect(soakPassed([{ ...short, judged: true }])).toBe(false);
  });
});
