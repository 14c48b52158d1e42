/**
 * What the store keeps of an E6 page (src/sync/rows/storable.ts): records PostgreSQL jsonb cannot
 * store are quarantined with their exact text, the others stored from theirs.
 */
import { describe, expect, it } from 'vitest';
import { storablePage } from '../../src/sync/rows/storable.js';
import { decodePage, parsePage, type AnalyticsPage } from '../../src/upstream/analytics.js';
import type { RawResponse } from '../../src/upstream/http.js';

const url = new URL('https://stats.test/analytics?pageNumber=1');

/** The page as the store sees it: its records, and the text and quarantine storablePage gives. */
const keep = (page: AnalyticsPage) => ({ ...page, text: undefined, ...storablePage(page) });
const keepDecoded = (res: Pick<RawResponse, 'headers' | 'body' | 'bytes'>, requestedPage: number, at: URL) => keep(decodePage(res, requestedPage, at));

describe('records PostgreSQL jsonb cannot store: quarantined, not refused', () => {
  const nested = (levels: number): unknown => (levels === 0 ? 1 : [nested(levels - 1)]);
  it.each([
    ['U+0000 in a value', { name: 'a\u0000b' }, '$.name', /^is a string that holds U\+0000 \(\\u0000\), which PostgreSQL jsonb cannot store$/],
    ['U+0000 in a key', { ['k\u0000']: 1 }, '$["k\\u0000"]', /^has a key that holds U\+0000/],
    ['an unpaired surrogate', { a: ['x', 'y\ud800'] }, '$.a[1]', /unpaired UTF-16 surrogate/],
    ['a number JSON.parse made Infinity (1e400)', { n: { m: Infinity } }, '$.n.m', /beyond the range of a double \(it would be stored as null\)/],
    ['1001 levels of nesting', { deep: nested(1000) }, /^\$\.deep\[0\]\[0\].*….*\[0\]$/, /nests deeper than 1000 levels/],
    ['U+0000 under a long key of emoji', { [`a${'😀'.repeat(100)}b`]: 'x\u0000' }, /^\$\["a(?:😀)+…(?:😀)+b"\]$/, /holds U\+0000/],
  ])('quarantines %s on a page without text, naming position, path and problem, with JSON.stringify text', (_name, record, path, problem) => {
    const body = { pageNumber: 2, pageSize: 2, totalRecords: 4, totalPages: 2, data: [{ ok: true }, record] };
    const page = keep(parsePage(body, 2, url));
    expect(page.data).toHaveLength(2);
    expect(page.data[1]).toBe(record);
    expect(page.text).toBeUndefined();
    expect(page.quarantined).toHaveLength(1);
    const q = page.quarantined![0]!;
    expect(q.index).toBe(1);
    if (typeof path === 'string') expect(q.path).toBe(path);
    else expect(q.path).toMatch(path);
    expect(q.reason).toMatch(problem);
    expect(q.text).toBe(JSON.stringify(record));
    // Nothing a text column or a log line refuses.
    for (const s of [q.path, q.reason, q.text]) expect(s).not.toMatch(/\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/);
  });

  it('keeps what jsonb can store: paired surrogates, 1000 levels, big finite numbers', () => {
    const data = [{ emoji: '\ud83d\ude00', deep: nested(999), big: 1.7e308, tiny: 5e-324 }];
    const page = keep(parsePage({ pageNumber: 1, pageSize: 1, totalRecords: 1, totalPages: 1, data }, 1, url));
    expect(page.data[0]).toBe(data[0]);
    expect(page.quarantined).toBeUndefined();
  });

  it('writes the text of a record too deep for JSON.stringify without it (page without text)', () => {
    let deep: unknown = 1;
    for (let i = 0; i < 200_000; i++) deep = [deep];
    const record = { deep, n: Infinity };
    const page = keep(parsePage({ pageNumber: 1, pageSize: 1, totalRecords: 1, totalPages: 1, data: [record] }, 1, url));
    expect(page.quarantined![0]!.text).toBe(`{"deep":${'['.repeat(200_000)}1${']'.repeat(200_000)},"n":null}`);
  });
});

// A page read off the wire carries its bytes (valid UTF-8 only: never a raw unpaired surrogate);
// a fake's or a test's may carry its text only. Both must be kept alike.
describe.each([
  ['text', false],
  ['text and UTF-8 bytes', true],
])('records PostgreSQL jsonb cannot store, on a page read from E6 (decodePage, %s)', (_carries, withBytes) => {
  const res = (headers: Record<string, string>, body: string): Pick<RawResponse, 'headers' | 'body' | 'bytes'> =>
    withBytes && Buffer.from(body, 'utf8').toString('utf8') === body ? { headers, body, bytes: Buffer.from(body, 'utf8') } : { headers, body };
  const decode = (data: string[], envelope = '') =>
    keepDecoded(
      res(
        { 'content-type': 'application/json' },
        `{"pageNumber":1,"pageSize":${Math.max(1, data.length)},"totalRecords":${data.length},"totalPages":1,${envelope}"data":[${data.join(',')}]}`,
      ),
      1,
      url,
    );

  it('keeps records of 1000 levels and a paired surrogate, stored from the body as sent (its bytes when it has them)', () => {
    const records = [`{"d":${'['.repeat(999)}${']'.repeat(999)}}`, '{"e":"😀","f":"\ud83d\ude00"}'];
    const page = decode(records);
    expect(page.quarantined).toBeUndefined();
    expect(page.text).toContain(records.join(','));
    expect(page.bytes !== undefined).toBe(withBytes);
    // One level more, on a page with no string to fear: found by depth alone.
    const deeper = decode(['{"a":1}', `{"d":${'['.repeat(1000)}${']'.repeat(1000)}}`, '{"b":[[{}]]}']);
    expect(deeper.quarantined?.map((q) => [q.index, q.path])).toEqual([[1, expect.stringMatching(/^\$\.d\[0\]/)]]);
    expect(deeper.text).toBe(`{"data":[{"a":1},null,{"b":[[{}]]}]}`);
  });

  it('quarantines the record with its exact text and stores the others from theirs, null in its place', () => {
    const records = ['{"id":12345678901234567891,"a":1.10}', ' {"name":"a\\u0000b", "n": 1e400 } ', '{"emoji":"\\ud83d\\ude00","e":2.50E+3}'];
    const page = decode(records);
    expect(page.quarantined).toEqual([{ index: 1, path: '$.name', reason: expect.stringMatching(/holds U\+0000/), text: '{"name":"a\\u0000b", "n": 1e400 }' }]);
    expect(page.text).toBe(`{"data":[${records[0]},null,${records[2]}]}`);
    expect(page.data).toHaveLength(3);
  });

  it.each([
    ['an unpaired high surrogate escape', '{"s":"x\\ud800"}', '$.s', /unpaired UTF-16 surrogate/],
    ['an unpaired low surrogate escape', '{"s":"\\udfffy"}', '$.s', /unpaired UTF-16 surrogate/],
    ['surrogate escapes in the wrong order', '{"s":"\\udc00\\ud800"}', '$.s', /unpaired UTF-16 surrogate/],
    ['U+0000 in a key', '{"k\\u0000":1}', '$["k\\u0000"]', /has a key that holds U\+0000/],
    ['1001 levels of nesting', `{"d":${'['.repeat(1000)}${']'.repeat(1000)}}`, /^\$\.d\[0\]/, /nests deeper than 1000 levels/],
    ['a million levels of nesting', `{"d":${'['.repeat(1_000_000)}${']'.repeat(1_000_000)}}`, /^\$\.d\[0\]/, /nests deeper than 1000 levels/],
    ['U+0000 in a member a duplicate key hides', '{"s":"\\u0000","s":"fine"}', '$', /\\u0000 escape .* duplicate key/],
    ['an unpaired surrogate a duplicate key hides', '{"s":"\\ud800","s":"fine"}', '$', /unpaired UTF-16 surrogate escape.* duplicate key/],
  ])('quarantines %s', (_name, bad, path, reason) => {
    const page = decode(['{"ok":"\\\\u0000 is not U+0000"}', bad]);
    expect(page.quarantined).toHaveLength(1);
    const q = page.quarantined![0]!;
    expect(q).toMatchObject({ index: 1, text: bad });
    if (typeof path === 'string') expect(q.path).toBe(path);
    else expect(q.path).toMatch(path);
    expect(q.reason).toMatch(reason);
    expect(page.text).toBe('{"data":[{"ok":"\\\\u0000 is not U+0000"},null]}');
  });

  it('keeps the body as sent when the pre-check clears it; otherwise stores {"data":[…]} of exact records, without the envelope', () => {
    for (const a of ['"ø"', '1e400', '[[[]]]']) {
      const plain = `{"pageNumber":1,"pageSize":1,"totalRecords":1,"totalPages":1,"data":[{"a":${a}}]}`;
      const page = keep(decodePage(res({}, plain), 1, url));
      expect(page.text).toBe(plain);
      expect(page.quarantined).toBeUndefined();
    }
    // A text the pre-check cannot clear (a \\u0000 that is an escaped backslash) is rebuilt, every record exact.
    const escaped = decode(['{"a":"\\\\u0000"}', '{"b":"\\ud83d\\ude00"}']);
    expect(escaped.quarantined).toBeUndefined();
    expect(escaped.text).toBe('{"data":[{"a":"\\\\u0000"},{"b":"\\ud83d\\ude00"}]}');
    const page = decode(['{"a":1}'], '"note":"\\u0000","deep":[[]],');
    expect(page.quarantined).toBeUndefined();
    expect(page.text).toBe('{"data":[{"a":1}]}');
    // Too deep an envelope field for PostgreSQL's parser, on a page without a string to fear.
    const deep = decode(['{"a":1}'], `"deep":${'['.repeat(100_000)}${']'.repeat(100_000)},`);
    expect(deep.text).toBe('{"data":[{"a":1}]}');
  });

  it('escapes an unpaired surrogate held raw (never off the wire) in the quarantined text, the same JSON value', () => {
    const page = decode(['{"s":"x\ud800y"}']);
    expect(page.quarantined![0]!.text).toBe('{"s":"x\\ud800y"}');
    expect(JSON.parse(page.quarantined![0]!.text)).toEqual({ s: 'x\ud800y' });
  });

  it('stores a duplicated data member as JSON.parse and PostgreSQL read it: the last', () => {
    const body = '{"data":[{"s":"\\u0000"}],"pageNumber":1,"pageSize":1,"totalRecords":1,"totalPages":1,"d\\u0061ta":[{"a":"\\ud83d\\ude00"}]}';
    const page = keep(decodePage(res({}, body), 1, url));
    expect(page.data).toEqual([{ a: '😀' }]);
    expect(page.quarantined).toBeUndefined();
    expect(page.text).toBe('{"data":[{"a":"\\ud83d\\ude00"}]}');
  });
});
