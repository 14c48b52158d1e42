/**
 * A page is data only if it is not a copy: a read of a range in pages (paging.ts) whose page
 * repeats an earlier page of the same read, record text for record text in order, is taken only
 * when a read at another page size holds the same records (they really repeat); otherwise E6 does
 * not honour `pageNumber` and the window fails with {@link RepeatedPagesError}.
 * See docs/design/reader-budgets.md#pages-that-repeat.
 */
import { RepeatedPagesError } from '../../errors.js';
import type { AnalyticsPage } from '../../upstream/analytics.js';
import { sameBag } from '../membership/boundary.js';
import { PageKeys, type TextBag } from '../membership/record-keys.js';
import { iso, type Window } from '../windows.js';

/** A page of a read that repeats an earlier one; page numbers from 1. */
export interface RepeatedPage {
  page: number;
  copyOf: number;
}

/** What {@link withoutCopies} found; `outcome`: `stored` when the records line up at `otherPageSize`. */
export interface RepeatedPagesEvent {
  range: Window;
  window: Window;
  pageSize: number;
  repeated: RepeatedPage[];
  otherPageSize: number;
  outcome: 'stored' | 'parked';
}

/** One read of a range in pages (paging.ts): `keys`, the multiset of its record texts. */
interface PagesRead {
  total: number;
  pages: AnalyticsPage[];
  keys: TextBag;
}

/** The pages (after the first) whose records equal an earlier page's, text for text in order. */
export function repeatedPages(pages: readonly AnalyticsPage[]): RepeatedPage[] {
  const out: RepeatedPage[] = [];
  const seen = new Map<number, number[]>();
  const keys = pages.map((page) => PageKeys.of(page));
  keys.forEach((page, p) => {
    if (page.length === 0) return;
    const hash = pageHash(page.hashes());
    const earlier = seen.get(hash) ?? [];
    const same = earlier.find((q) => samePage(keys[q]!, page));
    if (same === undefined) seen.set(hash, [...earlier, p]);
    else out.push({ page: p + 1, copyOf: same + 1 });
  });
  return out;
}

/** A page's records' hashes folded in order. */
function pageHash(hashes: Int32Array): number {
  let h = hashes.length;
  for (const x of hashes) h = Math.imul(h ^ x, 0x01000193);
  return h;
}

/** Hashes first, then texts: a hash is never taken for equality. */
function samePage(a: PageKeys, b: PageKeys): boolean {
  if (a.length !== b.length) return false;
  const [x, y] = [a.hashes(), b.hashes()];
  for (let i = 0; i < a.length; i++) if (x[i] !== y[i]) return false;
  for (let i = 0; i < a.length; i++) if (a.byteLength(i) !== b.byteLength(i) || a.text(i) !== b.text(i)) return false;
  return true;
}

/**
 * A page size other than `size` for a range of `total` records: the largest divisor of `total`
 * from a quarter of `size` up (an E6 that ignores `pageNumber` then still answers a full last
 * page its envelope accepts), else half of `size`; 2 for 1.
 */
export function otherPageSize(total: number, size: number): number {
  if (size <= 1) return 2;
  for (let d = size - 1; d >= Math.max(2, Math.ceil(size / 4)); d--) if (total % d === 0) return d;
  return Math.floor(size / 2);
}

/**
 * `read` if none of its pages repeats an earlier one, or if the records it holds line up with a
 * read at {@link otherPageSize} (the same multiset of texts).
 *
 * @param again reads the range twice at a page size, as paging.ts does (without this check).
 * @throws {RepeatedPagesError} when they do not: E6 answers the same records whatever page is asked.
 */
export async function withoutCopies<R extends PagesRead>(
  read: R,
  again: (pageSize: number) => Promise<PagesRead>,
  o: { range: Window; window: Window; onRepeated?: ((event: RepeatedPagesEvent) => void) | undefined },
): Promise<R> {
  const repeated = repeatedPages(read.pages);
  if (repeated.length === 0) return read;
  const pageSize = read.pages[0]!.data.length;
  const otherSize = otherPageSize(read.total, pageSize);
  const other = await again(otherSize);
  const stored = sameBag(read.keys, other.keys);
  o.onRepeated?.({ range: o.range, window: o.window, pageSize, repeated, otherPageSize: otherSize, outcome: stored ? 'stored' : 'parked' });
  if (stored) return read;
  const { range, window } = o;
  const shown = repeated.slice(0, 5).map((r) => `${r.page} = ${r.copyOf}`);
  const pages = shown.join(', ') + (repeated.length > shown.length ? ` and ${repeated.length - shown.length} more` : '');
  throw new RepeatedPagesError(
    `pages repeat: E6 answered ${iso(range.start)}..${iso(range.end)} (${read.total} records, ${pageSize} a page) with pages that ` +
      `copy earlier pages record for record (page ${pages}), and a read at ${otherSize} a page held other records: ` +
      `E6 (or a proxy before it) does not honour pageNumber, so paging would store copies and miss records; ` +
      `nothing of window ${iso(window.start)}..${iso(window.end)} was committed`,
  );
}
