/**
 * Paging through a range that holds more than a page and cannot be split (an instant, a boundary
 * set): E6 promises no order, so it is paged twice and taken only when both reads hold the same
 * multiset of record texts, and no page copies another unless the records really repeat
 * (page-copies.ts). See docs/design/reader-budgets.md.
 */
import { InconsistentWindowError } from '../../errors.js';
import type { AnalyticsPage } from '../../upstream/analytics.js';
import { sameBag } from '../membership/boundary.js';
import { bagOf, PageKeys, type TextBag } from '../membership/record-keys.js';
import { withoutCopies, type RepeatedPagesEvent } from './page-copies.js';
import { iso, type Window } from '../windows.js';

/** How the reader asks E6 for pages of a range. */
export interface RangeRequests {
  /** Page 1, checked against its envelope. */
  firstPage(range: Window, pageSize?: number): Promise<AnalyticsPage>;
  request(range: Window, pageNumber: number, pageSize: number): Promise<AnalyticsPage>;
}

/** One read of a range; `consistent`: every record of totalRecords came, every page agreeing on it. */
export interface PagedRead {
  total: number;
  consistent: boolean;
  pages: AnalyticsPage[];
  keys: TextBag;
}

/** Pages through `range` once, at the size page 1 showed E6 serves (never by totalPages). */
async function pageThrough(io: RangeRequests, range: Window, pageSize?: number): Promise<PagedRead> {
  const first = await io.firstPage(range, pageSize);
  const total = first.totalRecords;
  const size = Math.max(1, first.data.length);
  const rest = await Promise.all(Array.from({ length: Math.max(0, Math.ceil(total / size) - 1) }, (_, i) => io.request(range, i + 2, size)));
  const pages = [first, ...rest];
  let consistent = pages.reduce((sum, page) => sum + page.data.length, 0) === total;
  for (const page of pages) if (page.totalRecords !== total) consistent = false;
  return { total, consistent, pages, keys: bagOf(pages.flatMap((page) => PageKeys.of(page).allTexts())) };
}

/** How {@link pagedTwice} reads a range. */
export interface PagingOptions {
  attempts: number;
  configured: number;
  served: number;
  window: Window;
  pageSize?: number;
  onUnstable?: ((event: { instant: Window; records: number; attempt: number }) => void) | undefined;
  onRepeated?: ((event: RepeatedPagesEvent) => void) | undefined;
}

/**
 * The second of two reads of `range` that are consistent and hold the same multiset, and whose
 * pages are no copies of one another unless the records line up at another page size (page-copies.ts).
 *
 * @param o `attempts`: SYNC_WINDOW_ATTEMPTS; `pageSize`: a smaller page (oversize.ts).
 * @throws {InconsistentWindowError} after `attempts` pairs that disagreed; RepeatedPagesError; what a request throws.
 */
export async function pagedTwice(io: RangeRequests, range: Window, o: PagingOptions): Promise<PagedRead> {
  const read = await agreeingPair(io, range, o);
  return withoutCopies(read, (pageSize) => agreeingPair(io, range, { ...o, pageSize }), { range, window: o.window, onRepeated: o.onRepeated });
}

async function agreeingPair(io: RangeRequests, range: Window, o: PagingOptions): Promise<PagedRead> {
  let records = 0;
  for (let attempt = 1; attempt <= o.attempts; attempt++) {
    const [first, second] = await Promise.all([pageThrough(io, range, o.pageSize), pageThrough(io, range, o.pageSize)]);
    records = second.total;
    if (first.total === second.total && first.consistent && second.consistent && sameBag(first.keys, second.keys)) return second;
    o.onUnstable?.({ instant: range, records, attempt });
  }
  throw new InconsistentWindowError(
    `instant ${iso(range.start)}..${iso(range.end)} holds ${records} records, more than a page of ${o.pageSize ?? o.served} ` +
      `(${o.pageSize !== undefined ? 'the smaller pages read after an answer over UPSTREAM_MAX_BODY' : o.served < o.configured ? `the size E6 serves; SYNC_PAGE_SIZE is ${o.configured}` : 'SYNC_PAGE_SIZE'}), ` +
      `and ${o.attempts} pairs of reads of it (SYNC_WINDOW_ATTEMPTS) returned different records: E6's order within it is not stable, ` +
      `so paging it could double or lose records; nothing of window ${iso(o.window.start)}..${iso(o.window.end)} was committed. ` +
      `If the API resolves finer times than SYNC_MIN_SPLIT, lower it`,
  );
}
