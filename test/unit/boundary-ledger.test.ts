import { describe, expect, it } from 'vitest';
import { Boundaries, type SliceRead } from '../../src/sync/membership/boundary.js';

// A run whose first window starts at a cut where a ledger window ends (not in the run): E6's boundary set there is asked.
const CUT = Date.UTC(2026, 9, 31, 12);
const slice: SliceRead = {
  slice: { start: CUT, end: CUT + 3_600_000 },
  total: 3,
  keys: () => {
    throw new Error('keys are not read when the slice before is not in the run');
  },
};
const start = { cut: CUT, atWindowStart: true, earlierInRun: false, startProof: undefined };
const asked = new Map([
  ['{"t":"12:00","id":1}', 1],
  ['{"t":"12:00","id":"late"}', 1],
]);

describe('boundary sets at a cut where a ledger window ends', () => {
  it('drops what the ledger window stores and keeps what came to the cut after it was loaded', async () => {
    const seen: number[] = [];
    const b = new Boundaries('auto', new Set([CUT]), (cut, set) => {
      seen.push(cut);
      return Promise.resolve(new Map([...set].filter(([text]) => !text.includes('late'))));
    });
    expect(await b.quick(start, slice, () => Promise.resolve(asked))).toEqual({ drop: new Map([['{"t":"12:00","id":1}', 1]]) });
    expect(seen).toEqual([CUT]);
  });

  it('drops the whole set without heldBefore, and asks the store nothing for an empty set', async () => {
    expect(await new Boundaries('auto', new Set([CUT])).quick(start, slice, () => Promise.resolve(asked))).toEqual({ drop: asked });
    const b = new Boundaries('auto', new Set([CUT]), () => Promise.reject(new Error('not asked')));
    expect(await b.quick(start, slice, () => Promise.resolve(new Map<string, number>()))).toEqual({ drop: new Map() });
  });

  it('keeps the set at the start of a window with no window before it', async () => {
    const b = new Boundaries('auto', new Set(), () => Promise.reject(new Error('not asked')));
    expect(await b.quick(start, slice, () => Promise.reject(new Error('not asked')))).toEqual({ drop: undefined });
  });
});
