/** The bench's pure helpers: /proc/<pid>/stat lines (bench/lib/cpu.ts) and the pages a data set needs (bench/lib/stats.ts). */
import { describe, expect, it } from 'vitest';
import { parseProcStat } from '../../bench/lib/cpu.js';
import { pagesNeeded } from '../../bench/lib/stats.js';

describe('parseProcStat (bench/lib/cpu.ts)', () => {
  // A postgres backend's line: the command name holds spaces and parentheses of its own.
  const line =
    '4242 (postgres: bench (x) 1) S 4200 4200 4200 0 -1 4194560 1200 0 0 0 731 129 17 4 20 0 1 0 5100 231211008 3012 18446744073709551615 1 1 0 0 0 0 0 4096 0 0 0 0 17 1 0 0 0 0 0\n';

  it('reads ppid, own (utime + stime) and reaped (cutime + cstime) after the last parenthesis', () => {
    expect(parseProcStat(line)).toEqual({ ppid: 4200, own: 731 + 129, reaped: 17 + 4 });
  });

  it('refuses text that is not a stat line', () => {
    expect(() => parseProcStat('')).toThrow(RangeError);
    expect(() => parseProcStat('4242 (cut short) S 4200')).toThrow(RangeError);
  });
});

describe('pagesNeeded (bench/lib/stats.ts)', () => {
  it('sums ceil(records ÷ pageSize) over windows, an empty window taking one request', () => {
    expect(pagesNeeded([40_000, 40_001, 999, 1000, 0], 1000)).toBe(40 + 41 + 1 + 1 + 1);
  });

  it('refuses a page size or a count that cannot be', () => {
    expect(() => pagesNeeded([1], 0)).toThrow(RangeError);
    expect(() => pagesNeeded([-1], 1000)).toThrow(RangeError);
  });
});
