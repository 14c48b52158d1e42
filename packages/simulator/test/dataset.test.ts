import fc from 'fast-check';
import { describe, expect, it, vi } from 'vitest';
import { InvalidArgumentError } from '../src/errors.js';
import { CHECKPOINT_RECORDS, Dataset, EVENT_TYPES, parseIsoDateTime, type AnalyticsRecord, type EventCount } from '../src/index.js';

const HOUR_MS = 3_600_000;

/** Every record of the dataset in merged order, computed the slow, obvious way. */
function bruteForce(dataset: Dataset, inserted: readonly AnalyticsRecord[]): { record: AnalyticsRecord; ms: number }[] {
  const base = Array.from({ length: dataset.baseRecords }, (_, i) => dataset.record(i));
  // Array.prototype.sort is stable: base (already in time order) before inserted, inserted in insertion order.
  return [...base, ...inserted]
    .map((record, k) => ({ record, ms: Date.parse(record.timestamp), k }))
    .sort((x, y) => x.ms - y.ms || x.k - y.k)
    .map(({ record, ms }) => ({ record, ms }));
}

function inRange(ms: number, from: Date | undefined, to: Date | undefined, toInclusive: boolean): boolean {
  if (from !== undefined && ms < from.getTime()) return false;
  if (to !== undefined && (toInclusive ? ms > to.getTime() : ms >= to.getTime())) return false;
  return true;
}

const countKey = (eventType: string, customerId: string, customerName: string) => `${eventType}|${customerId}|${customerName}`;

function bruteCounts(records: readonly AnalyticsRecord[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const r of records) {
    const key = countKey(r.eventType, r.customerId, r.customerName);
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  return counts;
}

function nonZero(counts: readonly EventCount[]): Map<string, number> {
  return new Map(counts.filter((c) => c.count > 0).map((c) => [countKey(c.eventType, c.customerId, c.customerName), c.count]));
}

describe('Dataset generation', () => {
  it('is deterministic: the same seed gives the same records, another seed other records', () => {
    const a = new Dataset({ seed: 7, records: 5000 });
    const b = new Dataset({ seed: 7, records: 5000 });
    const c = new Dataset({ seed: 8, records: 5000 });
    const indexes = [0, 1, 2, 999, 2500, 4998, 4999];
    for (const i of indexes) expect(b.record(i)).toEqual(a.record(i));
    expect(b.pageJson(undefined, undefined, true, 0, 5000)).toEqual(a.pageJson(undefined, undefined, true, 0, 5000));
    let different = 0;
    for (let i = 0; i < 100; i++) if (JSON.stringify(a.record(i)) !== JSON.stringify(c.record(i))) different++;
    expect(different).toBeGreaterThan(95);
  });

  it('keeps timestamps non-decreasing, inside [start, end), as whole seconds by default', () => {
    const d = new Dataset({ records: 20_000 });
    let previous = -Infinity;
    for (let i = 0; i < d.baseRecords; i++) {
      const r = d.record(i);
      expect(r.timestamp).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$/);
      const ms = Date.parse(r.timestamp);
      expect(ms).toBe(d.timestampMs(i));
      expect(ms).toBeGreaterThanOrEqual(previous);
      previous = ms;
    }
    expect(d.timestampMs(0)).toBeGreaterThanOrEqual(d.start.getTime());
    expect(d.timestampMs(d.baseRecords - 1)).toBeLessThan(d.end.getTime());
  });

  it('writes milliseconds when the precision is 1 ms', () => {
    const d = new Dataset({ records: 1000, timePrecisionMs: 1 });
    const stamps = Array.from({ length: 1000 }, (_, i) => d.record(i).timestamp);
    for (const t of stamps) expect(t).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
    expect(stamps.some((t) => !t.endsWith('.000Z'))).toBe(true);
  });

  it('puts many records exactly on whole seconds when dense, so window boundaries hit records', () => {
    const d = new Dataset({ records: 10_000, start: new Date('2026-10-01T00:00:00Z'), end: new Date('2026-10-01T01:00:00Z') });
    const boundary = new Date(d.timestampMs(5000));
    expect(d.count(boundary, boundary, true)).toBeGreaterThan(1);
  });

  it('has the documented record shape, and JSON text identical to JSON.stringify of the record', () => {
    const d = new Dataset({ records: 3000 });
    const objects = d.page(undefined, undefined, true, 0, 3000);
    const texts = d.pageJson(undefined, undefined, true, 0, 3000);
    expect(texts).toEqual(objects.map((o) => JSON.stringify(o)));
    const seen = new Set<string>();
    for (const r of objects) {
      seen.add(r.eventType);
      expect(EVENT_TYPES).toContain(r.eventType);
      expect(r.customerId).toMatch(/^cust-\d{4}$/);
      expect(r.userId).toMatch(new RegExp(`^user-${r.customerId.slice(5)}-\\d{4}$`));
      expect(['web', 'api']).toContain(r.channel);
      expect(r.customerName.length).toBeGreaterThan(0);
      const dialog = ['DialogCreated', 'DialogSubmitted', 'SmsSent', 'EmailSent'].includes(r.eventType);
      const document = ['DocumentCreated', 'PdfCreated'].includes(r.eventType);
      expect(r.dialogDefinitionId !== undefined).toBe(dialog);
      if (dialog) expect(r.dialogDefinitionId).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
      expect(r.documentTemplate !== undefined).toBe(document);
      expect(Object.keys(r)).not.toContain('id');
    }
    expect(seen.size).toBe(EVENT_TYPES.length);
    const logins = objects.filter((r) => r.eventType === 'UserLogin').length;
    for (const type of EVENT_TYPES.slice(1)) expect(logins).toBeGreaterThan(objects.filter((r) => r.eventType === type).length);
  });

  it('makes every Nth record an exact copy of its predecessor, and none when duplicateEvery is 0', () => {
    const copies = (d: Dataset) => {
      const found: number[] = [];
      for (let i = 1; i < d.baseRecords; i++) if (JSON.stringify(d.record(i)) === JSON.stringify(d.record(i - 1))) found.push(i);
      return found;
    };
    // Sparse data (one record per ~10 minutes): a chance copy cannot happen.
    const sparse = { records: 4000 } as const;
    expect(copies(new Dataset({ ...sparse, duplicateEvery: 500 }))).toEqual([499, 999, 1499, 1999, 2499, 2999, 3499, 3999]);
    expect(copies(new Dataset({ ...sparse, duplicateEvery: 0 }))).toEqual([]);
    const d = new Dataset({ ...sparse, duplicateEvery: 500 });
    expect(d.record(499)).toEqual(d.record(498));
    expect(d.count(undefined, undefined, true)).toBe(4000);
  });

  it('rejects invalid options with an InvalidArgumentError naming the option', () => {
    expect(() => new Dataset({ records: -1 })).toThrow(/records/);
    expect(() => new Dataset({ records: 1.5 })).toThrow(InvalidArgumentError);
    expect(() => new Dataset({ duplicateEvery: 1 })).toThrow(/duplicateEvery/);
    expect(() => new Dataset({ customers: 0 })).toThrow(/customers/);
    expect(() => new Dataset({ start: new Date('2026-12-01T00:00:00Z') })).toThrow(/end must be after start/);
    expect(() => new Dataset({ end: new Date('nonsense') })).toThrow(/end/);
  });

  it('supports an empty dataset', () => {
    const d = new Dataset({ records: 0 });
    expect(d.count(undefined, undefined, true)).toBe(0);
    expect(d.page(undefined, undefined, true, 0, 10)).toEqual([]);
    expect(d.eventCounts(undefined, undefined, true).every((c) => c.count === 0)).toBe(true);
  });
});

describe('parseIsoDateTime', () => {
  it('accepts ISO 8601 date-times with a zone', () => {
    expect(parseIsoDateTime('2026-11-01T12:34:56Z')).toBe(Date.UTC(2026, 10, 1, 12, 34, 56));
    expect(parseIsoDateTime('2026-11-01T12:34:56.789Z')).toBe(Date.UTC(2026, 10, 1, 12, 34, 56, 789));
    expect(parseIsoDateTime('2026-11-01T12:34:56.7891234Z')).toBe(Date.UTC(2026, 10, 1, 12, 34, 56, 789));
    expect(parseIsoDateTime('2026-11-01T13:34:56+01:00')).toBe(Date.UTC(2026, 10, 1, 12, 34, 56));
    expect(parseIsoDateTime('2026-11-01T12:34Z')).toBe(Date.UTC(2026, 10, 1, 12, 34));
  });

  it('refuses dates without time or zone and impossible fields', () => {
    for (const text of [
      '2026-11-01',
      '2026-11-01T12:34:56',
      '2026-02-30T00:00:00Z',
      '2026-13-01T00:00:00Z',
      '2026-11-01T24:00:00Z',
      '2026-11-01 12:34:56Z',
      '2026-11-01T12:34:56 01:00',
      '',
    ]) {
      expect(parseIsoDateTime(text), text).toBeUndefined();
    }
  });
});

describe('Dataset queries agree with a brute-force scan', () => {
  // One hour, 3000 records at whole seconds: dense enough that boundaries often sit on records.
  const start = new Date('2026-10-10T10:00:00Z');
  const end = new Date('2026-10-10T11:00:00Z');

  /** Records inserted late: some exactly at base timestamps, some between, some outside the span. */
  function withInserted(): { dataset: Dataset; inserted: AnalyticsRecord[] } {
    const dataset = new Dataset({ seed: 3, records: 3000, start, end, duplicateEvery: 97 });
    const atBase = [10, 10, 1500, 2999].map((i) => ({ ...dataset.record((i * 7) % 3000), userId: `late-${i}` }));
    const inside = dataset.plausibleRecords(40, start, end, true, 1);
    const outside = dataset.plausibleRecords(3, new Date(end.getTime() + HOUR_MS), new Date(end.getTime() + 2 * HOUR_MS), true, 2);
    const inserted = [...atBase, ...inside, ...outside];
    dataset.insert(inserted.slice(0, 20));
    dataset.insert(inserted.slice(20));
    return { dataset, inserted };
  }

  const { dataset, inserted } = withInserted();
  const all = bruteForce(dataset, inserted);
  const stamps = all.map((x) => x.ms);

  /** A bound: often an existing timestamp, sometimes any instant around the span, sometimes none. */
  const bound = fc.oneof(
    { weight: 4, arbitrary: fc.integer({ min: 0, max: stamps.length - 1 }).map((k) => new Date(stamps[k]!)) },
    { weight: 2, arbitrary: fc.integer({ min: start.getTime() - 60_000, max: end.getTime() + 2 * HOUR_MS }).map((ms) => new Date(ms)) },
    { weight: 1, arbitrary: fc.constant(undefined) },
  );

  it('has the merged size', () => {
    expect(dataset.size).toBe(3000 + inserted.length);
    expect(dataset.count(undefined, undefined, true)).toBe(all.length);
  });

  it('count, iterate, page and eventCounts match for random ranges in both toDate modes', () => {
    fc.assert(
      fc.property(bound, bound, fc.boolean(), fc.nat({ max: 3200 }), fc.integer({ min: 1, max: 700 }), (from, to, toInclusive, offset, limit) => {
        const expected = all.filter((x) => inRange(x.ms, from, to, toInclusive)).map((x) => x.record);
        expect(dataset.count(from, to, toInclusive)).toBe(expected.length);
        expect([...dataset.iterate(from, to, toInclusive)]).toEqual(expected);
        expect(dataset.page(from, to, toInclusive, offset, limit)).toEqual(expected.slice(offset, offset + limit));
        expect(dataset.pageJson(from, to, toInclusive, offset, limit)).toEqual(expected.slice(offset, offset + limit).map((r) => JSON.stringify(r)));
        expect(nonZero(dataset.eventCounts(from, to, toInclusive))).toEqual(bruteCounts(expected));
      }),
      { numRuns: 100 },
    );
  });

  it('treats startDate as inclusive and toDate by the option at a boundary timestamp', () => {
    const t = new Date(stamps[1234]!);
    const atT = all.filter((x) => x.ms === t.getTime()).length;
    expect(atT).toBeGreaterThan(0);
    expect(dataset.count(t, t, true)).toBe(atT);
    expect(dataset.count(t, t, false)).toBe(0);
    expect(dataset.count(start, t, true) - dataset.count(start, t, false)).toBe(atT);
    expect([...dataset.iterate(t, undefined, true)][0]!.timestamp).toBe(all.find((x) => x.ms === t.getTime())!.record.timestamp);
  });

  it('is empty, not negative, when toDate is before startDate', () => {
    expect(dataset.count(end, start, true)).toBe(0);
    expect(dataset.page(end, start, true, 0, 10)).toEqual([]);
  });
});

describe('Dataset.insert', () => {
  const start = new Date('2026-10-10T10:00:00Z');
  const end = new Date('2026-10-10T12:00:00Z');

  it('orders inserted records after base records of the same instant, in insertion order', () => {
    const d = new Dataset({ records: 500, start, end });
    const base = d.record(100);
    const first = { ...base, userId: 'late-1' };
    const second = { ...base, userId: 'late-2', extraField: 'kept' } as AnalyticsRecord;
    d.insert([first]);
    d.insert([second]);
    const t = new Date(Date.parse(base.timestamp));
    const at = [...d.iterate(t, t, true)];
    expect(at.at(-2)).toEqual(first);
    expect(at.at(-1)).toEqual(second);
    expect(at.slice(0, -2).every((r) => r.userId !== 'late-1')).toBe(true);
    // Extra fields survive, in the JSON text too.
    expect(d.pageJson(t, t, true, at.length - 1, 1)[0]).toBe(JSON.stringify(second));
  });

  it('copies records, so changing the caller object later changes nothing', () => {
    const d = new Dataset({ records: 10, start, end });
    const r = { ...d.record(3), userId: 'late' };
    d.insert([r]);
    r.userId = 'changed';
    expect([...d.iterate(undefined, undefined, true)].some((x) => x.userId === 'late')).toBe(true);
  });

  it('refuses invalid records and inserts none of the batch', () => {
    const d = new Dataset({ records: 10, start, end });
    const good = d.record(1);
    expect(() => d.insert([good, { ...good, timestamp: '2026-10-10' }])).toThrow(/inserted record 1: timestamp/);
    expect(() => d.insert([{ ...good, eventType: 'Nope' as never }])).toThrow(/eventType/);
    expect(d.insertedRecords).toBe(0);
  });

  it('lists insertions in insertion order with the time of each insert call', () => {
    vi.useFakeTimers({ now: new Date('2026-11-01T00:00:00Z'), toFake: ['Date'] });
    try {
      const d = new Dataset({ records: 10, start, end });
      const later = { ...d.record(8), userId: 'later' };
      const earlier = { ...d.record(1), userId: 'earlier' };
      d.insert([later]);
      vi.setSystemTime(new Date('2026-11-01T00:05:00Z'));
      d.insert([earlier]);
      // Merged by timestamp for queries, listed by insertion for this accessor.
      expect(d.insertions()).toEqual([
        { json: JSON.stringify(later), insertedAtMs: Date.parse('2026-11-01T00:00:00Z') },
        { json: JSON.stringify(earlier), insertedAtMs: Date.parse('2026-11-01T00:05:00Z') },
      ]);
    } finally {
      vi.useRealTimers();
    }
  });

  it('counts customers that exist only in inserted records', () => {
    const d = new Dataset({ records: 10, start, end });
    d.insert([{ ...d.record(1), eventType: 'SmsSent', customerId: 'cust-9000', customerName: 'Quote "Q" \\ AS' }]);
    const counts = d.eventCounts(undefined, undefined, true);
    expect(counts.filter((c) => c.customerId === 'cust-9000')).toEqual([
      { eventType: 'SmsSent', customerId: 'cust-9000', customerName: 'Quote "Q" \\ AS', count: 1 },
    ]);
  });

  it('makes plausible records inside the range, deterministically, honouring an exclusive end', () => {
    const d = new Dataset({ records: 10, start, end });
    const from = new Date('2026-10-10T10:00:00Z');
    const to = new Date('2026-10-10T10:00:03Z');
    const made = d.plausibleRecords(200, from, to, false, 5);
    expect(made).toEqual(d.plausibleRecords(200, from, to, false, 5));
    expect(made).not.toEqual(d.plausibleRecords(200, from, to, false, 6));
    const stamps = new Set(made.map((r) => r.timestamp));
    expect([...stamps].sort()).toEqual(['2026-10-10T10:00:00Z', '2026-10-10T10:00:01Z', '2026-10-10T10:00:02Z']);
    // A range narrower than the precision falls back to millisecond timestamps inside it.
    const narrow = d.plausibleRecords(5, new Date('2026-10-10T10:00:00.100Z'), new Date('2026-10-10T10:00:00.200Z'), true);
    for (const r of narrow) expect(Date.parse(r.timestamp)).toBeGreaterThanOrEqual(Date.parse('2026-10-10T10:00:00.100Z'));
    expect(() => d.plausibleRecords(1, to, to, false)).toThrow(/holds no instant/);
  });
});

describe('Dataset.eventCounts across checkpoints', () => {
  it('matches brute force on ranges that span several checkpoint blocks', () => {
    const d = new Dataset({ seed: 11, records: 6 * CHECKPOINT_RECORDS + 123, duplicateEvery: 1000 });
    const stamps = Array.from({ length: d.baseRecords }, (_, i) => d.timestampMs(i));
    const records = Array.from({ length: d.baseRecords }, (_, i) => d.record(i));
    fc.assert(
      fc.property(fc.nat({ max: d.baseRecords - 1 }), fc.nat({ max: d.baseRecords - 1 }), fc.boolean(), (i, j, toInclusive) => {
        const from = new Date(stamps[Math.min(i, j)]!);
        const to = new Date(stamps[Math.max(i, j)]!);
        const expected = records.filter((_, k) => inRange(stamps[k]!, from, to, toInclusive));
        expect(nonZero(d.eventCounts(from, to, toInclusive))).toEqual(bruteCounts(expected));
      }),
      { numRuns: 60 },
    );
    const whole = d.eventCounts(undefined, undefined, true);
    expect(whole).toHaveLength(EVENT_TYPES.length * d.customerCount);
    expect(nonZero(whole)).toEqual(bruteCounts(records));
  });
});

describe('a 10,000,000-record dataset', () => {
  const d = new Dataset({ records: 10_000_000 });

  it('counts the whole span in O(log N)', () => {
    const t0 = performance.now();
    const n = d.count(d.start, d.end, false);
    const ms = performance.now() - t0;
    console.log(`count over 10M records: ${ms.toFixed(2)} ms`);
    expect(n).toBe(10_000_000);
    expect(d.count(undefined, undefined, true)).toBe(10_000_000);
  });

  it('computes eventCounts from checkpoints plus edge scans', () => {
    let t0 = performance.now();
    const whole = d.eventCounts(undefined, undefined, true);
    console.log(`first eventCounts over 10M records (builds checkpoints): ${(performance.now() - t0).toFixed(0)} ms`);
    expect(whole.reduce((s, c) => s + c.count, 0)).toBe(10_000_000);

    // A range of ~30,000 records with both edges inside checkpoint blocks, against brute force.
    const from = new Date(d.timestampMs(5_000_000 + 17));
    const to = new Date(d.timestampMs(5_030_000 + 5));
    t0 = performance.now();
    const counts = d.eventCounts(from, to, false);
    console.log(`eventCounts over a 30k-record range: ${(performance.now() - t0).toFixed(2)} ms`);
    expect(nonZero(counts)).toEqual(bruteCounts([...d.iterate(from, to, false)]));

    t0 = performance.now();
    const most = d.eventCounts(new Date(d.timestampMs(1234)), new Date(d.timestampMs(9_876_543)), true);
    console.log(`eventCounts over ~9.9M records: ${(performance.now() - t0).toFixed(2)} ms`);
    expect(most.reduce((s, c) => s + c.count, 0)).toBe(d.count(new Date(d.timestampMs(1234)), new Date(d.timestampMs(9_876_543)), true));
  });

  it('serves a page deep in the data quickly', () => {
    const t0 = performance.now();
    const page = d.pageJson(d.start, undefined, true, 7_654_321, 1000);
    console.log(`one 1000-record page at offset 7.6M: ${(performance.now() - t0).toFixed(2)} ms`);
    expect(page).toHaveLength(1000);
    expect(JSON.parse(page[0]!)).toEqual(d.record(7_654_321));
  });
});
