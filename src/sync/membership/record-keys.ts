/**
 * Records of E6 pages as keys for window membership (boundary.ts): each record's span of the
 * page's UTF-8 bytes and a 30-bit hash of them. Only records whose hashes two slices share are
 * made into text and compared exactly: a hash is never taken for equality.
 * See docs/design/membership-at-cuts.md.
 */
import type { AnalyticsPage } from '../../upstream/analytics.js';
import { dataElementSpans, pageByteSpans, stringifyJson } from '../../upstream/page-text.js';

/** A multiset of record texts: text → copies. */
export type TextBag = Map<string, number>;

/** Each record of a page as its text in the body, else (no text) its JSON serialisation. */
function recordTexts(page: AnalyticsPage): string[] {
  const text = page.text;
  const spans = text === undefined ? undefined : dataElementSpans(text);
  return page.data.map((record, i) => {
    const span = spans?.[i];
    return span !== undefined && text !== undefined ? text.slice(span.start, span.end) : stringifyJson(record);
  });
}

/** The multiset of `texts`. */
export function bagOf(texts: Iterable<string>): TextBag {
  const bag: TextBag = new Map();
  for (const text of texts) bag.set(text, (bag.get(text) ?? 0) + 1);
  return bag;
}

/** The multiset intersection. */
export function intersection(a: TextBag, b: TextBag): TextBag {
  const [small, large] = a.size <= b.size ? [a, b] : [b, a];
  const out: TextBag = new Map();
  for (const [key, count] of small) {
    const other = large.get(key);
    if (other !== undefined) out.set(key, Math.min(count, other));
  }
  return out;
}

/**
 * A 30-bit hash of bytes [start, end): equal bytes give equal hashes wherever they lie.
 * @internal the product hashes through a view it keeps ({@link hashView}); the tests call this.
 */
export function recordHash(bytes: Uint8Array, start: number, end: number): number {
  return hashView(new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength), start, end);
}

function hashView(view: DataView, start: number, end: number): number {
  let h = Math.imul(end - start, 0x9e3779b1);
  let g = 0x2545f491;
  let i = start;
  for (const last = end - 7; i < last; i += 8) {
    h = Math.imul(h ^ view.getInt32(i, true), 0x01000193);
    g = Math.imul(g ^ view.getInt32(i + 4, true), 0x01000193);
  }
  for (; i < end; i++) h = Math.imul(h ^ view.getUint8(i), 0x01000193);
  h ^= Math.imul(g, 0x9e3779b1);
  h ^= h >>> 15;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  return h & 0x3fffffff;
}

/** One page's records as keys: their UTF-8 bytes, spans and hashes. */
export class PageKeys {
  readonly length: number;
  #hashes: Int32Array | undefined;
  readonly #buffer: Buffer;

  /**
   * @param spans [start, end) of record i in `bytes` at 2i, 2i + 1.
   * @param texts the records' texts, when `bytes` is their encoding rather than E6's body.
   */
  constructor(
    readonly bytes: Uint8Array,
    readonly spans: readonly number[],
    readonly texts?: readonly string[],
  ) {
    this.length = spans.length / 2;
    this.#buffer = Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  /** The keys of a page, cached with it. */
  static of(page: AnalyticsPage): PageKeys {
    let keys = CACHE.get(page);
    if (keys === undefined) {
      keys = keysOf(page);
      CACHE.set(page, keys);
    }
    return keys;
  }

  /** {@link recordHash} of each record, in page order. */
  hashes(): Int32Array {
    if (this.#hashes !== undefined) return this.#hashes;
    const { bytes, spans } = this;
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    const out = new Int32Array(this.length);
    for (let i = 0; i < out.length; i++) out[i] = hashView(view, spans[2 * i]!, spans[2 * i + 1]!);
    return (this.#hashes = out);
  }

  text(i: number): string {
    if (this.texts !== undefined) return this.texts[i]!;
    return this.#buffer.toString('utf8', this.spans[2 * i], this.spans[2 * i + 1]);
  }

  byteLength(i: number): number {
    return this.spans[2 * i + 1]! - this.spans[2 * i]!;
  }

  /** Every record's text (a string each: small or rare pages only). */
  allTexts(): string[] {
    return Array.from({ length: this.length }, (_, i) => this.text(i));
  }
}

const CACHE = new WeakMap<AnalyticsPage, PageKeys>();

function keysOf(page: AnalyticsPage): PageKeys {
  if (page.bytes !== undefined) {
    const spans = pageByteSpans(page.bytes)?.spans;
    if (spans !== undefined && spans.length === 2 * page.data.length) return new PageKeys(page.bytes, spans);
  }
  const texts = recordTexts(page);
  const spans: number[] = [];
  let at = 0;
  for (const text of texts) {
    const end = at + Buffer.byteLength(text, 'utf8');
    spans.push(at, end);
    at = end;
  }
  return new PageKeys(Buffer.from(texts.join(''), 'utf8'), spans, texts);
}

/** The records of one slice (one page, or an instant's pages) as keys. */
export class SliceKeys {
  #sorted: Int32Array | undefined;

  constructor(readonly pages: readonly PageKeys[]) {}

  /** Every record's hash, ascending. */
  sortedHashes(): Int32Array {
    if (this.#sorted !== undefined) return this.#sorted;
    const out = new Int32Array(this.pages.reduce((n, p) => n + p.length, 0));
    let at = 0;
    for (const page of this.pages) {
      out.set(page.hashes(), at);
      at += page.length;
    }
    return (this.#sorted = out.sort());
  }

  /** The texts of the records whose hash is in `hashes`, as a multiset. */
  bagWhere(hashes: ReadonlySet<number>): TextBag {
    const bag: TextBag = new Map();
    for (const page of this.pages) {
      const h = page.hashes();
      for (let i = 0; i < h.length; i++) {
        if (!hashes.has(h[i]!)) continue;
        const text = page.text(i);
        bag.set(text, (bag.get(text) ?? 0) + 1);
      }
    }
    return bag;
  }
}

/** The multiset of exact texts two slices share: their sorted hashes merged, then texts compared. */
export function sharedTexts(a: SliceKeys, b: SliceKeys): TextBag {
  const x = a.sortedHashes();
  const y = b.sortedHashes();
  let common: Set<number> | undefined;
  for (let i = 0, j = 0; i < x.length && j < y.length;) {
    const hx = x[i]!;
    const hy = y[j]!;
    if (hx < hy) i++;
    else if (hx > hy) j++;
    else {
      (common ??= new Set()).add(hx);
      i++;
      j++;
    }
  }
  if (common === undefined) return new Map();
  return intersection(a.bagWhere(common), b.bagWhere(common));
}

/** The positions on a page of the records `drop` holds, one per copy; `drop` is consumed. */
export function dropIndexes(keys: PageKeys, drop: TextBag): Set<number> {
  const out = new Set<number>();
  if (drop.size === 0) return out;
  const lengths = new Set<number>();
  for (const text of drop.keys()) lengths.add(Buffer.byteLength(text, 'utf8'));
  for (let i = 0; i < keys.length; i++) {
    if (!lengths.has(keys.byteLength(i))) continue;
    const text = keys.text(i);
    const left = drop.get(text);
    if (left === undefined || left === 0) continue;
    drop.set(text, left - 1);
    out.add(i);
  }
  return out;
}
