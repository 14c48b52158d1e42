/**
 * The simulator's `order`: E6 promises no order of records, so the simulator can
 * draw one per request. Offset paging over `ties` or `random` must really go wrong (else the
 * sync's tests of order independence prove nothing), while every single response stays a fair
 * sample of the range and one page holding a whole range is exact in every order.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { InvalidArgumentError } from '../src/errors.js';
import { Dataset, mulberry32, RECORD_ORDERS, type RecordOrder } from '../src/index.js';

const FROM = new Date('2026-10-31T00:00:00Z');
const TO = new Date('2026-11-01T00:00:00Z');

/**
 * `records` records in a day on whole minutes: about 21 a minute at 31,000. (At 30,000 the
 * generator's even spacing puts every 1000th record exactly on a minute, so pages of 1000
 * starting at midnight cut no tie group; see the test of that below.)
 */
function dense(records = 31_000): Dataset {
  return new Dataset({ records, start: FROM, end: TO, timePrecisionMs: 60_000, duplicateEvery: 0 });
}

/** `random`, counting its draws in `counter.draws`: a measure of a call's cost that does not depend on the machine. */
function counting(random: () => number): { random: () => number; draws: number } {
  const counter = {
    draws: 0,
    random: () => {
      counter.draws++;
      return random();
    },
  };
  return counter;
}

/** Pages through [from, to) at `pageSize` as a client does (offsets 0, pageSize, …), each page drawn anew. */
function pagesOf(d: Dataset, order: RecordOrder, pageSize: number, random: () => number, from = FROM, to = TO): string[][] {
  const total = d.count(from, to, false);
  const pages: string[][] = [];
  for (let offset = 0; offset < total; offset += pageSize) pages.push(d.pageJsonOrdered(from, to, false, offset, pageSize, order, random));
  return pages;
}

function multiset(texts: readonly string[]): Map<string, number> {
  const m = new Map<string, number>();
  for (const t of texts) m.set(t, (m.get(t) ?? 0) + 1);
  return m;
}

/**
 * Records `got` holds more often than `expected` (doubled) and less often (missed), and how many
 * copies too many (`extra`) and too few (`lacking`) in all.
 */
function difference(got: readonly string[], expected: readonly string[]): { doubled: string[]; missed: string[]; extra: number; lacking: number } {
  const want = multiset(expected);
  const have = multiset(got);
  const doubled = [...have].filter(([t, n]) => n > (want.get(t) ?? 0)).map(([t]) => t);
  const missed = [...want].filter(([t, n]) => n > (have.get(t) ?? 0)).map(([t]) => t);
  const extra = doubled.reduce((sum, t) => sum + have.get(t)! - (want.get(t) ?? 0), 0);
  const lacking = missed.reduce((sum, t) => sum + want.get(t)! - (have.get(t) ?? 0), 0);
  return { doubled, missed, extra, lacking };
}

/** The timestamp of a served record: every record's text starts with `{"timestamp":"`. */
const timestampOf = (json: string) => (json.startsWith('{"timestamp":"') ? json.slice(14, json.indexOf('"', 14)) : `not a record: ${json}`);

/** Whether `page` holds no record more often than the multiset `range` does (a sample without replacement). */
function isSampleOf(page: readonly string[], range: ReadonlyMap<string, number>): boolean {
  return [...multiset(page)].every(([t, n]) => n <= (range.get(t) ?? 0));
}
const isTimeOrdered = (page: readonly string[]) => page.every((t, k) => k === 0 || timestampOf(page[k - 1]!) <= timestampOf(t));

describe('simulator record order', () => {
  const d = dense();
  const all = d.pageJson(FROM, TO, false, 0, 31_000);
  const allSet = multiset(all);

  it('stable: two pagings of a tied range give the same pages, the merged order', () => {
    for (const pageSize of [1000, 777]) {
      const first = pagesOf(d, 'stable', pageSize, mulberry32(1));
      const second = pagesOf(d, 'stable', pageSize, mulberry32(2));
      expect(second).toEqual(first);
      expect(first.flat()).toEqual(all);
    }
  });

  it('ties: each page has the stable page’s timestamps, a page differs between requests, and a paging doubles and misses records', () => {
    expect(d.count(FROM, TO, false)).toBe(31_000);
    const stablePages = pagesOf(d, 'stable', 1000, mulberry32(3));
    const random = mulberry32(3);
    const a = pagesOf(d, 'ties', 1000, random);
    const b = pagesOf(d, 'ties', 1000, random);
    for (const [k, page] of [...a, ...b].entries()) {
      expect(isTimeOrdered(page)).toBe(true);
      // Ties are only reordered: page k holds the same timestamps as the stable page k.
      expect(page.map(timestampOf)).toEqual(stablePages[k % a.length]!.map(timestampOf));
      // No page holds a record more often than the range does.
      expect(isSampleOf(page, allSet)).toBe(true);
    }
    expect(a.some((page, k) => [...page].sort().join() !== [...b[k]!].sort().join())).toBe(true);
    // totalRecords (the count) is unchanged, and the pages add up to it, yet the union is wrong.
    expect(d.count(FROM, TO, false)).toBe(31_000);
    expect(a.flat()).toHaveLength(31_000);
    const { doubled, missed, extra, lacking } = difference(a.flat(), all);
    expect(doubled.length).toBeGreaterThan(0);
    expect(missed.length).toBeGreaterThan(0);
    expect(extra).toBe(lacking);
    // A doubled record sits at a page boundary, in a tie group the boundary cuts.
    const cut = a.slice(1).map((page, k) => [timestampOf(a[k]!.at(-1)!), timestampOf(page[0]!)]);
    expect(cut.some(([before, after]) => before === after && before === timestampOf(doubled[0]!))).toBe(true);
  });

  it('random: pages in no order, each a fair sample, a page differs between requests, and a paging doubles and misses records', () => {
    const random = mulberry32(4);
    const a = pagesOf(d, 'random', 1000, random);
    const b = pagesOf(d, 'random', 1000, random);
    for (const page of [...a, ...b]) {
      expect(page).toHaveLength(1000);
      expect(isSampleOf(page, allSet)).toBe(true);
    }
    expect(a.every(isTimeOrdered)).toBe(false);
    expect([...a[0]!].sort()).not.toEqual([...b[0]!].sort());
    expect(d.count(FROM, TO, false)).toBe(31_000);
    const { doubled, missed, extra, lacking } = difference(a.flat(), all);
    expect(doubled.length).toBeGreaterThan(100);
    expect(missed.length).toBeGreaterThan(100);
    expect(extra).toBe(lacking);
  });

  it('repeats a run from the seed', () => {
    for (const order of ['ties', 'random'] as const) {
      expect(pagesOf(d, order, 1000, mulberry32(5))).toEqual(pagesOf(d, order, 1000, mulberry32(5)));
    }
  });

  it.each(RECORD_ORDERS)('%s: one page holding the whole range is exactly the range', (order) => {
    const from = new Date('2026-10-31T10:00:00Z');
    const to = new Date('2026-10-31T10:30:00Z');
    const n = d.count(from, to, true);
    expect(n).toBeGreaterThan(600);
    const expected = d.pageJson(from, to, true, 0, n);
    for (const limit of [n, 1000]) {
      const page = d.pageJsonOrdered(from, to, true, 0, limit, order, mulberry32(6));
      expect([...page].sort()).toEqual([...expected].sort());
    }
  });

  it('ties: at 30,000 records a day, pages of 1000 from midnight cut no tie group and are exact; pages of 999 are not', () => {
    const d30 = dense(30_000);
    const exact = d30.pageJson(FROM, TO, false, 0, 30_000);
    expect([...pagesOf(d30, 'ties', 1000, mulberry32(7)).flat()].sort()).toEqual([...exact].sort());
    const { doubled } = difference(pagesOf(d30, 'ties', 999, mulberry32(7)).flat(), exact);
    expect(doubled.length).toBeGreaterThan(0);
  });

  it('ties: a tie group larger than a page, of base and inserted records, is sampled without replacement', () => {
    const crowded = new Dataset({ records: 5000, start: FROM, end: TO, timePrecisionMs: 60_000, duplicateEvery: 0 });
    const instant = new Date('2026-10-31T15:42:00Z');
    const bases = crowded.count(instant, instant, true);
    expect(bases).toBeGreaterThan(0);
    crowded.insert(crowded.plausibleRecords(2500, instant, instant, true, 1));
    const from = new Date('2026-10-31T15:40:00Z');
    const to = new Date('2026-10-31T15:44:00Z');
    const range = multiset(crowded.pageJson(from, to, false, 0, 10_000));
    const group = crowded.pageJson(instant, instant, true, 0, 10_000);
    expect(group).toHaveLength(2500 + bases);
    const random = mulberry32(8);
    let sawBase = false;
    for (let request = 0; request < 3; request++) {
      const pages = pagesOf(crowded, 'ties', 1000, random, from, to);
      for (const page of pages) {
        expect(isTimeOrdered(page)).toBe(true);
        expect(isSampleOf(page, range)).toBe(true);
      }
      // The group spans pages, and each page draws its part of it afresh.
      const drawn = pages.flat().filter((t) => timestampOf(t) === timestampOf(group[0]!));
      expect(drawn).toHaveLength(group.length);
      expect(difference(drawn, group).doubled.length).toBeGreaterThan(0);
      if (pages.flat().some((t) => group.indexOf(t) < bases && group.indexOf(t) >= 0)) sawBase = true;
    }
    expect(sawBase).toBe(true);
  });

  it('costs about a page, not a tie group or a range: draws per request of 1000 out of 1,000,000 records at one instant', () => {
    const day = 86_400_000;
    const one = new Dataset({ records: 1_000_000, start: FROM, end: TO, timePrecisionMs: day });
    expect(one.count(FROM, FROM, true)).toBe(1_000_000);
    for (const order of ['ties', 'random'] as const) {
      const counter = counting(mulberry32(9));
      const page = one.pageJsonOrdered(FROM, TO, false, 500_000, 1000, order, counter.random);
      expect(page).toHaveLength(1000);
      expect(counter.draws).toBeLessThanOrEqual(1000);
    }
  });

  it('refuses an unknown order', () => {
    expect(() => d.pageJsonOrdered(FROM, TO, false, 0, 10, 'sorted' as RecordOrder, mulberry32(1))).toThrow(InvalidArgumentError);
  });

  it('property: any range, offset and limit give the stable page’s length, a sample of the range, and under ties its timestamps', () => {
    const small = new Dataset({ records: 400, start: FROM, end: new Date(FROM.getTime() + 3_600_000), timePrecisionMs: 60_000, duplicateEvery: 7 });
    small.insert(small.plausibleRecords(60, FROM, new Date(FROM.getTime() + 3_600_000), false, 2));
    const minute = fc.integer({ min: -2, max: 62 }).map((m) => new Date(FROM.getTime() + m * 60_000));
    fc.assert(
      fc.property(
        minute,
        minute,
        fc.boolean(),
        fc.nat(500),
        fc.integer({ min: 0, max: 300 }),
        fc.constantFrom('ties', 'random') as fc.Arbitrary<RecordOrder>,
        fc.nat(),
        (from, to, inclusive, offset, limit, order, seed) => {
          const stable = small.pageJson(from, to, inclusive, offset, limit);
          const range = small.pageJson(from, to, inclusive, 0, 1000);
          const page = small.pageJsonOrdered(from, to, inclusive, offset, limit, order, mulberry32(seed));
          expect(page).toHaveLength(stable.length);
          expect(isSampleOf(page, multiset(range))).toBe(true);
          if (order === 'ties') expect(page.map(timestampOf)).toEqual(stable.map(timestampOf));
          if (offset === 0 && limit >= range.length) expect([...page].sort()).toEqual([...range].sort());
        },
      ),
      { numRuns: 300 },
    );
  });
});
