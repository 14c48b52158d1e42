/**
 * Window membership by hashes (src/sync/membership/record-keys.ts): the records two slices share are found by
 * hashing their bytes, but a guess is always a multiset of exact texts. A forced hash collision
 * (two different records with the same hash) must never make them equal, and pages with bytes,
 * with text only, or with parsed records only must give the same texts.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { AnalyticsPage, AnalyticsRecord } from '../../src/upstream/analytics.js';
import { bagOf, dropIndexes, intersection, PageKeys, SliceKeys, recordHash, sharedTexts, type TextBag } from '../../src/sync/membership/record-keys.js';

type Mode = 'bytes' | 'text' | 'records';

/** An E6 page of these record texts (each a JSON object text), as E6 (bytes), a fake (text) or a test (records only) gives it. */
function page(texts: readonly string[], mode: Mode, spacing = ''): AnalyticsPage {
  const text = `{"pageNumber":1,${spacing}"data":[${spacing}${texts.join(`,${spacing}`)}${spacing}],"pageSize":1000,"totalRecords":${texts.length},"totalPages":1}`;
  const data = texts.map((t) => JSON.parse(t) as AnalyticsRecord);
  const envelope = { pageNumber: 1, pageSize: 1000, totalRecords: texts.length, totalPages: 1, data };
  if (mode === 'records') return envelope;
  if (mode === 'text') return { ...envelope, text };
  return { ...envelope, text, bytes: Buffer.from(text, 'utf8') };
}

function sliceKeys(pages: readonly AnalyticsPage[]): SliceKeys {
  return new SliceKeys(pages.map((p) => PageKeys.of(p)));
}

/** Two different record texts of the same length whose {@link recordHash} is the same (a birthday search over `{"id":"000000"}`…). */
function collidingTexts(): [string, string] {
  const seen = new Map<number, string>();
  for (let n = 0; ; n++) {
    const text = `{"id":"${n.toString(36).padStart(6, '0')}"}`;
    const bytes = Buffer.from(text);
    const h = recordHash(bytes, 0, bytes.length);
    const other = seen.get(h);
    if (other !== undefined) return [other, text];
    seen.set(h, text);
  }
}

function sorted(bag: TextBag): [string, number][] {
  return [...bag].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
}

describe('recordHash', () => {
  it('hashes equal bytes equally wherever they lie, into 30 bits', () => {
    const a = Buffer.from('xx{"a":"é😀"}');
    const b = Buffer.from('{"a":"é😀"}yyyy');
    expect(recordHash(a, 2, a.length)).toBe(recordHash(b, 0, b.length - 4));
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 40 }), fc.nat(7), fc.nat(7), (content, x, y) => {
        // The same bytes at any offset, in a view that starts inside its buffer too, hash alike.
        const at = (offset: number) => Buffer.concat([Buffer.alloc(offset, 0x20), content, Buffer.alloc(3, 0x7d)]);
        const inside = at(y + 1).subarray(1);
        expect(recordHash(at(x), x, x + content.length)).toBe(recordHash(inside, y, y + content.length));
      }),
    );
    for (let n = 0; n < 1000; n++) {
      const h = recordHash(Buffer.from(`{"n":${n}}`), 0, `{"n":${n}}`.length);
      expect(h >= 0 && h < 2 ** 30).toBe(true);
    }
  });
});

describe('sharedTexts', () => {
  it('never takes a hash collision for a shared record: the texts decide', () => {
    const [x, y] = collidingTexts();
    expect(x).not.toBe(y);
    expect(x.length).toBe(y.length);
    expect(recordHash(Buffer.from(x), 0, Buffer.byteLength(x))).toBe(recordHash(Buffer.from(y), 0, Buffer.byteLength(y)));
    for (const [ma, mb] of [
      ['bytes', 'bytes'],
      ['bytes', 'text'],
      ['records', 'bytes'],
    ] as const) {
      const left = sliceKeys([page([x, '{"id":"a"}'], ma)]);
      const right = sliceKeys([page([y, '{"id":"b"}'], mb)]);
      expect(sharedTexts(left, right).size, `${ma}/${mb}`).toBe(0);
      // With the same text on both sides, and the colliding one beside it, only the shared one counts.
      const both = sharedTexts(sliceKeys([page([x, x, y], ma)]), sliceKeys([page([x, '{"id":"c"}'], mb)]));
      expect(sorted(both)).toEqual([[x, 1]]);
    }
  });

  it('keeps records apart that JSON.parse makes equal, and finds shared ones across an instant’s pages', () => {
    const big = '{"id":9007199254740993}';
    const rounded = '{"id":9007199254740992}';
    expect(sharedTexts(sliceKeys([page([big], 'bytes')]), sliceKeys([page([rounded], 'bytes')])).size).toBe(0);
    const shared = sharedTexts(
      sliceKeys([page(['{"a":1}', big], 'bytes'), page([big], 'bytes', '\n ')]),
      sliceKeys([page([big, big, big, '{"a":2}'], 'text')]),
    );
    expect(sorted(shared)).toEqual([[big, 2]]);
  });

  it('is the multiset intersection of the slices’ exact texts, whatever the pages carry', () => {
    const pool = ['{"a":1}', '{"a":1.0}', '{"a":"é"}', '{"a":"\\u00e9"}', '{"b":[1,{"c":null}]}', '{"t":"2026-01-01T00:00:00Z","u":"x"}', '{}'];
    const pageArb = fc.record({
      picks: fc.array(fc.nat(pool.length - 1), { maxLength: 8 }),
      mode: fc.constantFrom<Mode>('bytes', 'text', 'records'),
      spacing: fc.constantFrom('', ' ', '\n\t'),
    });
    fc.assert(
      fc.property(fc.array(pageArb, { minLength: 1, maxLength: 3 }), fc.array(pageArb, { minLength: 1, maxLength: 3 }), (a, b) => {
        // A page of parsed records only is compared by their serialisation (`1.0` is `1` there).
        const texts = (pages: typeof a) => pages.flatMap((p) => p.picks.map((i) => (p.mode === 'records' ? JSON.stringify(JSON.parse(pool[i]!)) : pool[i]!)));
        const toKeys = (pages: typeof a) =>
          sliceKeys(
            pages.map((p) =>
              page(
                p.picks.map((i) => pool[i]!),
                p.mode,
                p.spacing,
              ),
            ),
          );
        expect(sorted(sharedTexts(toKeys(a), toKeys(b)))).toEqual(sorted(intersection(bagOf(texts(a)), bagOf(texts(b)))));
      }),
      { numRuns: 300 },
    );
  });
});

describe('dropIndexes', () => {
  it('drops one record per copy of an exact text, never one that only shares its hash or length', () => {
    const [x, y] = collidingTexts();
    for (const mode of ['bytes', 'text', 'records'] as const) {
      const keys = PageKeys.of(page([y, x, '{"id":"zz"}', x, x], mode));
      const drop = bagOf([x, x, '{"id":"yy"}']);
      expect([...dropIndexes(keys, drop)], mode).toEqual([1, 3]);
      expect(drop.get(x)).toBe(0);
      // Same length as x, another text the page does not hold: nothing dropped.
      const other = [...'0123456789'].map((d) => x.replace(/.("\})$/, `${d}$1`)).find((t) => t !== x && t !== y)!;
      expect(Buffer.byteLength(other)).toBe(Buffer.byteLength(x));
      expect(dropIndexes(keys, bagOf([other])).size).toBe(0);
      expect(dropIndexes(keys, new Map()).size).toBe(0);
    }
  });

  it('finds records holding characters beyond ASCII by their exact text', () => {
    const text = '{"name":"Zoë 😀","n":1}';
    const keys = PageKeys.of(page(['{"name":"Zoe 😀","n":1}', text], 'bytes'));
    expect(keys.text(1)).toBe(text);
    expect([...dropIndexes(keys, bagOf([text]))]).toEqual([1]);
  });
});
