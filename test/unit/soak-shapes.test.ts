import { describe, expect, it } from 'vitest';
import type { Simulator } from '@analytics-exporter/simulator';
import { exitOneReasons } from '../../soak/cli.js';
import { shapeChecks } from '../../soak/shape-checks.js';
import type { SoakSource } from '../../soak/sources.js';
import type { WindowCheck } from '../../soak/verify.js';

const line = (source: string, msg: string) => JSON.stringify({ level: 'warn', source, msg });

describe('soak: why the final sync exited 1', () => {
  it('explains parked and short summaries of the sources whose data makes them, and nothing else', () => {
    const stderr = [
      line('alpha', 'sync run succeeded'),
      line('epsilon', 'sync run succeeded, but 2 window(s) parked by earlier runs are still not loaded: the data is not exact until they are'),
      line('delta', 'sync run succeeded but found 1 short window(s) (listed above): their records are stored'),
      'not json',
    ].join('\n');
    expect(exitOneReasons(stderr, new Set(['epsilon', 'delta']))).toEqual({
      explained: [
        'epsilon: sync run succeeded, but 2 window(s) parked by earlier runs are still not loaded',
        'delta: sync run succeeded but found 1 short window(s) (listed above)',
      ],
      unexplained: [],
    });
    const failed = `${stderr}\n${line('beta', 'sync run failed; committed windows are kept, the next run completes the data')}`;
    expect(exitOneReasons(failed, new Set(['epsilon'])).unexplained).toEqual([
      'delta: sync run succeeded but found 1 short window(s) (listed above)',
      'beta: sync run failed; committed windows are kept, the next run completes the data',
    ]);
  });
});

describe('soak: the windows the data makes parked or short', () => {
  const w0 = new Date('2026-12-01T10:00:00Z');
  const w1 = new Date('2026-12-01T10:05:00Z');
  const end = (d: Date) => new Date(d.getTime() + 300_000);
  const source = (name: string, parked: Date[], short: Date[]): SoakSource =>
    ({
      name,
      sim: {} as Simulator,
      expectedParked: parked.map((start) => ({ start, reason: /^pages repeat/, records: 1200 })),
      expectedShort: short,
    }) as unknown as SoakSource;
  const check = (parked: { start: Date; reason: string }[], short: { start: Date; claimed: number; served: number }[]): WindowCheck =>
    ({
      pass: true,
      parked: parked.map((p) => ({ ...p, end: end(p.start), records: 1200 })),
      short: short.map((x) => ({ ...x, end: end(x.start) })),
    }) as unknown as WindowCheck;

  it('passes exactly the windows expected, with their reasons', () => {
    const checks = shapeChecks([source('epsilon', [w0], []), source('delta', [], [w1])], {
      epsilon: check([{ start: w0, reason: 'pages repeat: E6 does not honour pageNumber' }], []),
      delta: check([], [{ start: w1, claimed: 4, served: 3 }]),
    });
    expect(checks.map((c) => c.pass)).toEqual([true, true, true]);
  });

  it('fails a wrong reason, a missing short window, and a window parked elsewhere', () => {
    const checks = shapeChecks([source('epsilon', [w0], []), source('delta', [], [w1]), source('alpha', [], [])], {
      epsilon: check([{ start: w0, reason: 'paging limit at 2026-12-01T10:02:00Z' }], []),
      delta: check([], []),
      alpha: check([{ start: w1, reason: 'window_budget' }], []),
    });
    expect(checks.map((c) => [c.name.split(' ')[0], c.pass])).toEqual([
      ["epsilon's", false],
      ["delta's", false],
      ['no', false],
    ]);
    expect(checks[2]!.detail).toContain('alpha [2026-12-01T10:05:00.000Z, 2026-12-01T10:10:00.000Z) parked: window_budget');
  });
});
