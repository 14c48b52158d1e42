/**
 * Paging through a range that holds more than a page and cannot be split (an instant, a boundary
 * set): E6 promises no order, so it is paged twice and taken only when both reads hold the same
 * multiset of record texts; both stopping after a full page is a paging limit, both ending short a
 * count that lies; no page copies another unless the records really repeat (page-copies.ts). See
 * docs/design/reader-budgets.md, docs/design/oversize-split.md.
 */
import { InconsistentWindowError, PagingLimitError, UpstreamHttpError } from '../../errors.js';
import { OverfullPageError, type AnalyticsPage } from '../../upstream/analytics.js';
import { sameBag } from '../membership/boundary.js';
import { bagOf, PageKeys, type TextBag } from '../membership/record-keys.js';
import { repeatedPages, withoutCopies, type RepeatedPagesEvent } from './page-copies.js';
import { iso, type Window } from '../windows.js';

/** A page as the reader takes it: `claimedRecords` when E6's `totalRecords` claimed more than it serves (then `totalRecords` is what it serves). */
export type ReadPage = AnalyticsPage & { claimedRecords?: number };

/** How the reader asks E6 for pages of a range. */
export interface RangeRequests {
  /** Page 1, checked against its envelope. */
  firstPage(range: Window, pageSize?: number): Promise<ReadPage>;
  request(range: Window, pageNumber: number, pageSize: number): Promise<AnalyticsPage>;
}

/** Where paging ended before `totalRecords`: the offset of the first page refused (HTTP 4xx) or empty, after a full page or a short one. */
interface PagingStop {
  offset: number;
  refused: boolean;
  afterFull: boolean;
}

/**
 * One read of a range; `consistent`: every record of totalRecords came, every page agreeing on it.
 * `claimed`: set on a read taken although E6 served fewer records than its count claims.
 */
export interface PagedRead {
  total: number;
  consistent: boolean;
  pages: ReadPage[];
  keys: TextBag;
  claimed?: number;
  stop?: PagingStop;
  served?: number;
  /** A page held more records than its envelope left for it (OverfullPageError): never consistent. */
  overfull?: boolean;
}

/** A 4xx for a page past the first, which page 1 of the same range was served: E6 refuses the offset (not the token, the rate or the path). */
export function isPageRefusal(err: unknown): boolean {
  return err instanceof UpstreamHttpError && err.status >= 400 && err.status < 500 && !NOT_REFUSALS.has(err.status);
}
const NOT_REFUSALS = new Set([401, 403, 404, 407, 408, 429]);

/** Pages through `range` once, at the size page 1 showed E6 serves (never by totalPages); stops at a page refused or empty. */
async function pageThrough(io: RangeRequests, range: Window, pageSize?: number): Promise<PagedRead> {
  const first = await io.firstPage(range, pageSize);
  const total = first.totalRecords;
  const size = Math.max(1, first.data.length);
  let overfull = false;
  // An overfull page is kept for the check for copies (an E6 ignoring pageNumber answers page 1 again).
  const refused = (err: unknown): AnalyticsPage | undefined => {
    if (err instanceof OverfullPageError) {
      overfull = true;
      return err.page;
    }
    if (isPageRefusal(err)) return undefined;
    throw err;
  };
  const rest = await Promise.all(Array.from({ length: Math.max(0, Math.ceil(total / size) - 1) }, (_, i) => io.request(range, i + 2, size).catch(refused)));
  const pages: ReadPage[] = [first];
  let stop: PagingStop | undefined;
  for (const [i, page] of rest.entries()) {
    if (page === undefined || page.data.length === 0) {
      stop = { offset: (i + 1) * size, refused: page === undefined, afterFull: pages[pages.length - 1]!.data.length === size };
      break;
    }
    pages.push(page);
  }
  const served = pages.reduce((sum, page) => sum + page.data.length, 0);
  let consistent = !overfull && stop === undefined && served === total;
  for (const page of pages) if (page.totalRecords !== total) consistent = false;
  const read: PagedRead = { total, consistent, pages, keys: bagOf(pages.flatMap((page) => PageKeys.of(page).allTexts())), served };
  if (first.claimedRecords !== undefined) read.claimed = first.claimedRecords;
  if (stop !== undefined) read.stop = stop;
  if (overfull) read.overfull = true;
  return read;
}

/**
 * Two reads that stopped at the same offset after a full page: a paging limit (docs/design/oversize-split.md).
 * Two that hold the same records, fewer than their agreed count, ending on a short page: E6 serves
 * them all and its count lies, so they are taken (`claimed`, `total` what is served).
 */
function limitOrShort(a: PagedRead, b: PagedRead): 'limit' | PagedRead | undefined {
  if (a.stop?.afterFull && b.stop?.afterFull && a.stop.offset === b.stop.offset) return 'limit';
  if (a.total !== b.total || a.served !== b.served || !sameBag(a.keys, b.keys)) return undefined;
  const served = b.served ?? 0;
  if (served >= b.total || b.stop?.refused || b.stop?.afterFull || b.pages.some((page) => page.totalRecords !== b.total)) return undefined;
  return { ...b, total: served, consistent: true, claimed: b.total, pages: b.pages.map((page) => ({ ...page, totalRecords: served })) };
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
    // Both overfull with pages that copy earlier ones: withoutCopies judges them (its read at another
    // size holds the count alone, so a read holding more is never taken).
    if (first.overfull && second.overfull && repeatedPages(second.pages).length > 0) return second;
    const judged = limitOrShort(first, second);
    if (judged === 'limit') throw pagingLimit(range, second, o.window);
    if (judged !== undefined) return judged;
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

function pagingLimit(range: Window, read: PagedRead, window: Window): PagingLimitError {
  const { offset, refused } = read.stop!;
  return new PagingLimitError(
    `E6 ${refused ? 'refuses' : 'answers empty'} the pages of instant ${iso(range.start)}..${iso(range.end)} from offset ${offset} on, ` +
      `while its totalRecords says ${read.total}: a paging limit, and the instant cannot be split further (SYNC_MIN_SPLIT); ` +
      `nothing of window ${iso(window.start)}..${iso(window.end)} was committed`,
  );
}
