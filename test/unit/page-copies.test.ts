// A page is data only if it is not a copy (src/sync/read/page-copies.ts): which pages of a read
// repeat an earlier one, the page size read again at, and what is taken.
import { describe, expect, it } from 'vitest';
import { RepeatedPagesError } from '../../src/errors.js';
import { ExporterMetrics } from '../../src/metrics/registry.js';
import { otherPageSize, repeatedPages, withoutCopies, type RepeatedPagesEvent } from '../../src/sync/read/page-copies.js';
import { bagOf } from '../../src/sync/membership/record-keys.js';
import type { AnalyticsPage, AnalyticsRecord } from '../../src/upstream/analytics.js';

/** A page as E6 sends it: its text and bytes, as the analytics client gives them. */
function page(pageNumber: number, data: AnalyticsRecord[], totalRecords = 0): AnalyticsPage {
  const text = JSON.stringify({ pageNumber, pageSize: data.length, totalRecords, totalPages: 0, data });
  return { pageNumber, pageSize: data.length, totalRecords, totalPages: 0, data, text, bytes: Buffer.from(text, 'utf8') };
}

function read(pages: AnalyticsRecord[][]) {
  const total = pages.flat().length;
  return { total, pages: pages.map((p, i) => page(i + 1, p, total)), keys: bagOf(pages.flat().map((r) => JSON.stringify(r))) };
}

const r = (id: number, extra: Record<string, unknown> = {}) => ({ id, ...extra });

describe('repeatedPages', () => {
  it('finds pages equal to an earlier one, text for text in order', () => {
    const a = [r(1), r(2)];
    expect(repeatedPages(read([a, [r(3), r(4)], a, a]).pages)).toEqual([
      { page: 3, copyOf: 1 },
      { page: 4, copyOf: 1 },
    ]);
  });

  it('does not take the same records in another order, a page of other length, or texts that differ in a byte for copies', () => {
    expect(
      repeatedPages(
        read([
          [r(1), r(2)],
          [r(2), r(1)],
        ]).pages,
      ),
    ).toEqual([]);
    expect(repeatedPages(read([[r(1), r(2)], [r(1)]]).pages)).toEqual([]);
    // The same value, other texts: 1.0 and 1.
    const first = page(1, [r(1)]);
    const text = first.text!.replace('"id":1', '"id":1.0');
    const second = { ...first, pageNumber: 2, text, bytes: Buffer.from(text, 'utf8') };
    expect(repeatedPages([first, second])).toEqual([]);
    expect(repeatedPages([first, { ...first, pageNumber: 2 }])).toEqual([{ page: 2, copyOf: 1 }]);
  });

  it('takes a page of identical records equal to the page before (that is for the re-read to settle)', () => {
    expect(repeatedPages(read([[r(1), r(1)], [r(1), r(1)], [r(2)]]).pages)).toEqual([{ page: 2, copyOf: 1 }]);
  });
});

describe('otherPageSize', () => {
  it('is a divisor of the total below the size, at least a quarter of it; else half; 2 for 1', () => {
    expect(otherPageSize(5000, 1000)).toBe(625);
    expect(otherPageSize(3000, 1000)).toBe(750);
    expect(otherPageSize(2500, 500)).toBe(250);
    // 1009 is prime: no divisor of 2018 from 253 to 1008.
    expect(otherPageSize(2018, 1009)).toBe(504);
    expect(otherPageSize(7, 1)).toBe(2);
  });
});

describe('withoutCopies', () => {
  const where = { range: { start: 1000, end: 1000 }, window: { start: 0, end: 3_600_000 } };

  it('takes a read without copies without reading again', async () => {
    const first = read([[r(1), r(2)], [r(3)]]);
    expect(await withoutCopies(first, () => Promise.reject(new Error('read again')), where)).toBe(first);
  });

  it('takes records that line up at another page size, and says so', async () => {
    const events: RepeatedPagesEvent[] = [];
    const first = read([
      [r(1), r(1)],
      [r(1), r(1)],
      [r(2), r(3)],
    ]);
    const sizes: number[] = [];
    const again = async (size: number) => (
      sizes.push(size),
      read([
        [r(1), r(1), r(1)],
        [r(1), r(2), r(3)],
      ])
    );
    expect(await withoutCopies(first, again, { ...where, onRepeated: (e) => events.push(e) })).toBe(first);
    expect(sizes).toEqual([otherPageSize(6, 2)]);
    expect(events).toEqual([{ ...where, pageSize: 2, repeated: [{ page: 2, copyOf: 1 }], otherPageSize: sizes[0], outcome: 'stored' }]);
  });

  it('fails with RepeatedPagesError when page 1 comes back at another page size', async () => {
    const events: RepeatedPagesEvent[] = [];
    const a = [r(1), r(2), r(3), r(4)];
    const first = read([a, a, a]);
    const again = async () => read([a.slice(0, 3), a.slice(0, 3), a.slice(0, 3), a.slice(0, 3)]);
    const err = await withoutCopies(first, again, { ...where, onRepeated: (e) => events.push(e) }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RepeatedPagesError);
    expect((err as Error).message).toMatch(/^pages repeat: .*\(page 2 = 1, 3 = 1\).*does not honour pageNumber/);
    expect(events.map((e) => e.outcome)).toEqual(['parked']);
  });
});

describe('analytics_exporter_sync_repeated_pages_total', () => {
  it('is at 0 for both outcomes from the observer on, and counts the pages of each event', async () => {
    const metrics = new ExporterMetrics({ processMetrics: false });
    const observer = metrics.syncObserver('default');
    const lines = async () => (await metrics.registry.metrics()).split('\n').filter((l) => l.startsWith('analytics_exporter_sync_repeated_pages_total{'));
    expect(await lines()).toEqual([
      'analytics_exporter_sync_repeated_pages_total{source="default",outcome="stored"} 0',
      'analytics_exporter_sync_repeated_pages_total{source="default",outcome="parked"} 0',
    ]);
    observer.repeatedPages?.({ repeated: [{ page: 2, copyOf: 1 }], outcome: 'stored' });
    observer.repeatedPages?.({ repeated: [2, 3, 4, 5].map((page) => ({ page, copyOf: 1 })), outcome: 'parked' });
    expect(await lines()).toEqual([
      'analytics_exporter_sync_repeated_pages_total{source="default",outcome="stored"} 1',
      'analytics_exporter_sync_repeated_pages_total{source="default",outcome="parked"} 4',
    ]);
  });
});
