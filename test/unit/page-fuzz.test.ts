/**
 * Fuzzing of E6 page bodies (the Prometheus text is fuzzed in
 * exposition-property.test.ts): arbitrary and mutated bodies fed to decodePage, the function
 * fetchPage decodes every response with, and through the client itself over a mock dispatcher.
 * Every body must give either a valid page whose text PostgreSQL jsonb can store, its records
 * exact and those it cannot store quarantined with their exact text, or a typed error naming E6 in
 * one printable line: never another exception, never an unhandled rejection.
 */
import { storablePage, type StorablePage } from '../../src/sync/rows/storable.js';
import fc from 'fast-check';
import { MockAgent } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ExporterError, UpstreamBodyError, type FailureReason } from '../../src/errors.js';
import { silentLogger } from '../helpers/silent-logger.js';
import { AnalyticsClient, decodePage, parsePage, type AnalyticsPage } from '../../src/upstream/analytics.js';
import { stringifyJson } from '../../src/upstream/page-text.js';
import { TokenClient } from '../../src/upstream/token.js';

/** UPSTREAM_MAX_BODY's default, in bytes. */
const MAX_BODY_BYTES = 64 * 1024 * 1024;

const url = new URL('https://stats.test/analytics?pageNumber=1&pageSize=5&startDate=2026-10-01T00:00:00Z');
const JSON_TYPE = { 'content-type': 'application/json; charset=utf-8' };
const BODY_REASONS: FailureReason[] = ['content_type', 'invalid_json', 'invalid_envelope', 'inconsistent_page'];

/** A page as the store sees it: its records, and the text and quarantine storablePage gives. */
type Kept = AnalyticsPage & StorablePage;
const keep = (page: AnalyticsPage): Kept => ({ ...page, text: undefined, ...storablePage(page) });

type Outcome = { page: Kept; error?: undefined } | { page?: undefined; error: UpstreamBodyError };

/**
 * Decodes `body` and checks the contract: a page that can be stored whole, or a typed E6 body error
 * with a bounded reason and a one-line printable message. Anything else fails the property.
 */
function decode(body: string, requestedPage = 1, headers: Record<string, string> = JSON_TYPE): Outcome {
  let page: Kept;
  try {
    page = keep(decodePage({ headers, body }, requestedPage, url));
  } catch (err) {
    expectTypedBodyError(err);
    return { error: err as UpstreamBodyError };
  }
  expectStorable(page, body);
  return { page };
}

function expectTypedBodyError(err: unknown): void {
  expect(err).toBeInstanceOf(UpstreamBodyError);
  const e = err as UpstreamBodyError;
  expect(e.endpoint).toBe('analytics');
  expect(BODY_REASONS).toContain(e.reason);
  expect(e.code).toBe('ERR_UPSTREAM_BODY');
  expect(e.retryable).toBe(true);
  expect(e.message).toMatch(/^E6 https:\/\/stats\.test\/analytics: \S/);
  // One printable line of bounded length, whatever the body held (the query string never shows).
  expect(e.message).not.toMatch(/[\u0000-\u001f\u007f]/);
  expect(e.message).not.toMatch(/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/);
  expect(e.message).not.toContain('startDate');
  expect(e.message.length).toBeLessThan(2000);
}

/**
 * An independent reading of PostgreSQL's jsonb rule on escapes (page-text.ts has its own): drop
 * escaped backslashes, then look for `\u0000`, a high surrogate escape not followed by a low one,
 * a low one not preceded by a high one.
 */
function holdsUnstorableEscape(text: string): boolean {
  const t = text.replace(/\\\\/g, '');
  return (
    /\\u0000/.test(t) || /\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F])/.test(t) || /(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2}/.test(t)
  );
}
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/** Nesting depth of a parsed JSON value (the value itself is level 1 when it is an object or array), without recursion. */
function depthOf(value: unknown): number {
  let max = 0;
  const stack: [unknown, number][] = [[value, 1]];
  while (stack.length > 0) {
    const [v, d] = stack.pop()!;
    if (v === null || typeof v !== 'object') continue;
    max = Math.max(max, d);
    for (const child of Object.values(v)) stack.push([child, d + 1]);
  }
  return max;
}

/**
 * What PostgreSQL will be given, and what the quarantine keeps: the page's text holds nothing jsonb
 * refuses (no escape it refuses, no raw unpaired surrogate, no record deeper than 1000 levels),
 * gives every kept record as parsed from the body and `null` for each quarantined one; and each
 * quarantined record's text is that record (the same JSON value), storable in a text column. The
 * text is the body itself unless something had to be left out.
 */
function expectStorable(page: Kept, body: string): void {
  expect(page.text).toBeDefined();
  const text = page.text!;
  expect(holdsUnstorableEscape(text)).toBe(false);
  expect(text).not.toMatch(LONE_SURROGATE);
  const quarantined = new Map((page.quarantined ?? []).map((q) => [q.index, q]));
  expect(quarantined.size).toBe(page.quarantined?.length ?? 0);
  if (text !== body) expect(text.startsWith('{"data":[')).toBe(true);
  else expect(quarantined.size).toBe(0);
  const stored = JSON.parse(text) as { data: unknown[] };
  expect(stored.data.length).toBe(page.data.length);
  for (let i = 0; i < page.data.length; i++) {
    const record = page.data[i];
    expect(typeof record === 'object' && record !== null && !Array.isArray(record)).toBe(true);
    const q = quarantined.get(i);
    if (q === undefined) {
      expect(stringifyJson(stored.data[i])).toBe(stringifyJson(record));
      expect(depthOf(stored.data[i])).toBeLessThanOrEqual(1000);
    } else {
      expect(stored.data[i]).toBeNull();
      expect(stringifyJson(JSON.parse(q.text))).toBe(stringifyJson(record));
      expect(q.text).not.toMatch(/\u0000/);
      expect(q.text).not.toMatch(LONE_SURROGATE);
      expect(q.path).toMatch(/^\$/);
      expect(q.reason).toMatch(/\S/);
    }
  }
}

// ------------------------------------------------------------------------------------------
// Arbitraries.

/** Strings jsonb can store: any code points but U+0000 (fast-check's binary unit never makes lone surrogates). */
const storableString = fc.string({ unit: 'binary', maxLength: 12 }).map((s) => s.replaceAll('\u0000', ''));
const storableJson: fc.Arbitrary<unknown> = fc.letrec<{ value: unknown }>((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    fc.constant(null),
    fc.boolean(),
    fc.integer(),
    fc.double({ noNaN: true, noDefaultInfinity: true }).filter((d) => !Object.is(d, -0)),
    storableString,
    fc.array(tie('value'), { maxLength: 4 }),
    fc.dictionary(storableString, tie('value'), { maxKeys: 4 }),
  ),
})).value;
const storableRecord = fc.dictionary(storableString, storableJson, { maxKeys: 6 });

/** A self-consistent page: the envelope agrees with itself and with the page asked for. */
const validPage = fc
  .record({ pageSize: fc.integer({ min: 1, max: 12 }), totalRecords: fc.integer({ min: 0, max: 60 }) })
  .chain(({ pageSize, totalRecords }) => {
    const totalPages = Math.ceil(totalRecords / pageSize);
    return fc.integer({ min: 1, max: totalPages + 1 }).chain((pageNumber) => {
      const length = pageNumber < totalPages ? pageSize : pageNumber === totalPages ? totalRecords - (totalPages - 1) * pageSize : 0;
      return fc.array(storableRecord, { minLength: length, maxLength: length }).map((data) => ({ pageNumber, pageSize, totalRecords, totalPages, data }));
    });
  });

/** What JSON.parse cannot hold or jsonb cannot store, as raw JSON text, and the problem it must be named for. */
const unstorableValue = fc.constantFrom(
  { text: '"a\\u0000b"', problem: /holds U\+0000/ },
  { text: '"\\u0000"', problem: /holds U\+0000/ },
  { text: '"x\\ud800"', problem: /unpaired UTF-16 surrogate/ },
  { text: '"\\udfffy"', problem: /unpaired UTF-16 surrogate/ },
  { text: '"\\udc00\\ud800"', problem: /unpaired UTF-16 surrogate/ },
  { text: `${'['.repeat(1001)}${']'.repeat(1001)}`, problem: /nests deeper than 1000 levels/ },
);

/** Values of the wrong JSON type for an envelope field (as raw text: some are beyond a double). */
const wrongType = fc.oneof(
  fc.string({ maxLength: 8 }).map((s) => JSON.stringify(s)),
  fc.constantFrom(
    'null',
    'true',
    'false',
    '[]',
    '{}',
    '[1]',
    '{"n":1}',
    '"1"',
    '1e400',
    '-1e400',
    '1.5',
    '-3',
    '0.0001',
    '1e21',
    '123456789012345678901234567890',
  ),
  fc
    .double({ noNaN: true, noDefaultInfinity: true })
    .filter((d) => !Number.isInteger(d))
    .map(String),
);

/** A page as JSON text with `field` replaced by raw `text`. */
/** An E6 client through `agent` (undici's MockAgent), retrying at once up to `maxAttempts` times. */
function fuzzClient(agent: MockAgent, maxAttempts: number): AnalyticsClient {
  const retry = { maxAttempts, maxDelayMs: 0, sleep: async () => undefined };
  const tokens = new TokenClient({
    tokenUrl: new URL('https://stats.test/connect/token'),
    clientId: 'fuzz',
    clientSecret: 'fuzz-secret',
    authMethod: 'client_secret_post',
    scope: 'api.external',
    dispatcher: agent,
    retry,
    log: silentLogger,
    maxBodyBytes: MAX_BODY_BYTES,
  });
  return new AnalyticsClient({
    statisticsUrl: new URL('https://stats.test/'),
    tokens,
    dispatcher: agent,
    retry,
    log: silentLogger,
    maxBodyBytes: MAX_BODY_BYTES,
  });
}

function withField(page: object, field: string, text: string): string {
  const marker = '"@@REPLACED@@"';
  return JSON.stringify({ ...page, [field]: '@@REPLACED@@' }).replace(marker, () => text);
}

// ------------------------------------------------------------------------------------------

describe('E6 page bodies under fuzzing (decodePage, as fetchPage uses it)', () => {
  it('accepts every self-consistent page of storable records and returns the records whole', () => {
    fc.assert(
      fc.property(validPage, (page) => {
        const out = decode(JSON.stringify(page), page.pageNumber);
        expect(out.error).toBeUndefined();
        expect(out.page!.data).toEqual(page.data);
      }),
      { numRuns: 300 },
    );
  });

  it('never throws anything but a typed error for arbitrary text', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 200 }), fc.integer({ min: 1, max: 3 }), (body, requested) => {
        decode(body, requested);
      }),
      { numRuns: 500 },
    );
  });

  it('never throws anything but a typed error for arbitrary JSON, with \\u0000 and every code point in strings', () => {
    fc.assert(
      fc.property(fc.jsonValue({ stringUnit: 'binary', maxDepth: 5 }), (value) => {
        decode(JSON.stringify(value));
      }),
      { numRuns: 500 },
    );
  });

  it('refuses every truncation of a valid page as invalid JSON', () => {
    fc.assert(
      fc.property(
        validPage.chain((page) => {
          const text = JSON.stringify(page);
          return fc.record({ page: fc.constant(page), text: fc.constant(text), cut: fc.integer({ min: 0, max: text.length - 1 }) });
        }),
        ({ page, text, cut }) => {
          const out = decode(text.slice(0, cut), page.pageNumber);
          expect(out.error?.reason).toBe('invalid_json');
        },
      ),
      { numRuns: 300 },
    );
  });

  it('refuses a wrong type in each envelope field, naming the field', () => {
    fc.assert(
      fc.property(validPage, fc.constantFrom('pageNumber', 'pageSize', 'totalRecords', 'totalPages', 'data'), wrongType, (page, field, text) => {
        const out = decode(withField(page, field, text), page.pageNumber);
        // A number of the right kind may still be consistent by chance (1.0 is 1); otherwise it is refused.
        if (out.page !== undefined) {
          // An empty data array passes too: the reader judges a page short of its count.
          if (field !== 'data' || text !== '[]') expect(JSON.parse(text)).toEqual((page as Record<string, unknown>)[field]);
          return;
        }
        expect(['invalid_envelope', 'inconsistent_page']).toContain(out.error.reason);
        if (out.error.reason === 'invalid_envelope') expect(out.error.message).toContain(field);
      }),
      { numRuns: 500 },
    );
  });

  it('refuses a missing envelope field', () => {
    fc.assert(
      fc.property(validPage, fc.constantFrom('pageNumber', 'pageSize', 'totalRecords', 'totalPages', 'data'), (page, field) => {
        const { [field]: _dropped, ...rest } = page;
        const out = decode(JSON.stringify(rest), page.pageNumber);
        expect(out.error?.reason).toBe('invalid_envelope');
        expect(out.error?.message).toContain(field);
      }),
      { numRuns: 100 },
    );
  });

  it('gives a page or a typed error for valid pages with characters replaced, inserted or deleted', () => {
    const mutated = validPage.chain((page) => {
      const text = JSON.stringify(page);
      return fc
        .array(
          fc.record({
            at: fc.nat({ max: Math.max(0, text.length - 1) }),
            op: fc.constantFrom('replace', 'insert', 'delete'),
            char: fc.constantFrom('"', '\\', '{', '}', '[', ']', ',', ':', '0', '9', '-', 'e', '.', ' ', 'n', '\u0000', '\ud800', 'ø', '\\u0000'),
          }),
          { minLength: 1, maxLength: 4 },
        )
        .map((edits) => {
          let body = text;
          for (const { at, op, char } of edits) {
            const i = Math.min(at, body.length);
            body =
              op === 'replace'
                ? body.slice(0, i) + char + body.slice(i + 1)
                : op === 'insert'
                  ? body.slice(0, i) + char + body.slice(i)
                  : body.slice(0, i) + body.slice(i + 1);
          }
          return { page, body };
        });
    });
    fc.assert(
      fc.property(mutated, ({ page, body }) => {
        decode(body, page.pageNumber);
      }),
      { numRuns: 1000 },
    );
  });

  it('quarantines anything jsonb cannot store, naming the record and the path, and keeps the rest of the page exact', () => {
    const withBadValue = fc
      .record({
        page: validPage.filter((p) => p.data.length > 0),
        index: fc.nat(),
        key: fc.oneof(
          fc.constantFrom('name', 'customer_id', 'a b', 'ø'),
          fc.string({ minLength: 1, maxLength: 6 }).map((s) => s.replaceAll('\u0000', '')),
        ),
        nest: fc.constantFrom('value', 'in-array', 'key'),
        bad: unstorableValue,
        spaced: fc.boolean(),
      })
      .filter(({ bad, nest }) => nest !== 'key' || bad.text.startsWith('"'));
    fc.assert(
      fc.property(withBadValue, ({ page, index, key, nest, bad, spaced }) => {
        const i = index % page.data.length;
        // Build the body as text: values like 1e400 and lone surrogates cannot round-trip through a JS object.
        const holder = '@@BAD@@';
        const records = page.data.map((r, n) => (n === i ? { ...r, [nest === 'key' ? holder : key]: nest === 'in-array' ? [1, holder] : holder } : r));
        let body = spaced ? JSON.stringify({ ...page, data: records }, null, 1) : JSON.stringify({ ...page, data: records });
        const recordText = (n: number) => JSON.stringify(records[n]);
        let badText = recordText(i);
        const put = (t: string) =>
          nest === 'key' ? t.replace(new RegExp(`"${holder}": ?"${holder}"`), () => `${bad.text}:1`) : t.replace(`"${holder}"`, () => bad.text);
        body = put(body);
        badText = put(badText);
        const out = decode(body, page.pageNumber);
        expect(out.error).toBeUndefined();
        const q = out.page!.quarantined ?? [];
        expect(q.map((r) => r.index)).toEqual([i]);
        expect(q[0]!.reason).toMatch(bad.problem);
        // The exact text as sent (the compact body's record is JSON.stringify's; the spaced one, its own layout).
        if (!spaced) expect(q[0]!.text).toBe(badText);
        if (nest === 'key') expect(q[0]!.path).toMatch(/^\$\[".*"\]$/);
        else {
          const at = `$${/^[A-Za-z_$][\w$]*$/.test(key) ? `.${key}` : `[${JSON.stringify(key)}]`}${nest === 'in-array' ? '[1]' : ''}`;
          // Too deep a value is named where its depth runs out, under `at` (the middle of a long path elided).
          if (bad.text.startsWith('[[')) expect(q[0]!.path.startsWith(at) && q[0]!.path.length <= 160).toBe(true);
          else expect(q[0]!.path).toBe(at);
        }
        // Every other record is stored from its own text as sent.
        if (!spaced) expect(out.page!.text).toBe(`{"data":[${records.map((_, n) => (n === i ? 'null' : recordText(n))).join(',')}]}`);
      }),
      { numRuns: 400 },
    );
  });

  it('decides as the full record scan does: the pre-check on the text never lets an unstorable string through', () => {
    const text = fc.oneof(storableString, fc.constantFrom('\u0000', 'a\u0000b', '\ud800', 'x\udc00', '\udc00\ud800', '\ud83d\ude00', 'ø'));
    const record = fc.dictionary(text, fc.oneof(text, fc.integer(), fc.array(text, { maxLength: 3 })), { maxKeys: 4 });
    fc.assert(
      fc.property(fc.array(record, { minLength: 1, maxLength: 5 }), (data) => {
        const body = JSON.stringify({ pageNumber: 1, pageSize: data.length, totalRecords: data.length, totalPages: 1, data });
        const full = storablePage(parsePage(JSON.parse(body), 1, url)).quarantined;
        // The compact body writes each record as JSON.stringify does: the same text both ways.
        expect(decode(body).page!.quarantined).toEqual(full);
      }),
      { numRuns: 500 },
    );
  });

  it('accepts nesting up to 1000 levels and quarantines deeper records, whatever the depth', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 20_000 }), fc.constantFrom('[', '{"k":'), (depth, open) => {
        const close = open === '[' ? ']' : '}';
        // The record is level 1; `depth` containers more sit inside it.
        const record = `{"deep":${open.repeat(depth)}1${close.repeat(depth)}}`;
        const body = `{"pageNumber":1,"pageSize":2,"totalRecords":2,"totalPages":1,"data":[{"a":1},${record}]}`;
        const out = decode(body);
        expect(out.page?.data).toHaveLength(2);
        if (depth + 1 <= 1000) {
          expect(out.page!.quarantined).toBeUndefined();
          expect(out.page!.text).toBe(body);
        } else {
          expect(out.page!.quarantined).toEqual([
            { index: 1, path: expect.stringMatching(/^\$\.deep/), reason: 'nests deeper than 1000 levels of objects and arrays', text: record },
          ]);
          expect(out.page!.text).toBe('{"data":[{"a":1},null]}');
        }
      }),
      // The limit's edges every run, then random depths.
      {
        numRuns: 20,
        examples: [
          [998, '['],
          [999, '{"k":'],
          [1000, '['],
          [1001, '{"k":'],
        ],
      },
    );
    // And a whole body nested far deeper than any record may be: a typed error, not a stack overflow.
    for (const depth of [10_000, 1_000_000]) expect(decode(`${'['.repeat(depth)}${']'.repeat(depth)}`).error?.reason).toBe('invalid_envelope');
  });

  it('refuses huge and fractional counts in the envelope without arithmetic surprises', () => {
    fc.assert(
      fc.property(
        fc.constantFrom('pageNumber', 'pageSize', 'totalRecords', 'totalPages'),
        fc.constantFrom('1e300', '9007199254740993', '1e16', '1.5', '-1', '0', '1e-7', '12345678901234567890'),
        (field, text) => {
          const page = { pageNumber: 1, pageSize: 2, totalRecords: 3, totalPages: 2, data: [{ a: 1 }, { a: 2 }] };
          expect(decode(withField(page, field, text)).error).toBeDefined();
        },
      ),
      { numRuns: 100 },
    );
  });

  it('refuses a body that is not labelled JSON, and accepts JSON labels', () => {
    fc.assert(
      fc.property(
        validPage,
        fc.oneof(
          fc.constantFrom('text/html', 'text/plain; charset=utf-8', 'application/xml', 'application/octet-stream', 'multipart/form-data; boundary=x'),
          fc.stringMatching(/^[a-z]{1,8}\/[a-z.+-]{1,12}$/),
        ),
        (page, type) => {
          const out = decode(JSON.stringify(page), page.pageNumber, { 'content-type': type });
          const json = type === 'application/json' || type.endsWith('+json');
          if (json) expect(out.page).toBeDefined();
          else expect(out.error?.reason).toBe('content_type');
        },
      ),
      { numRuns: 200 },
    );
    const page = { pageNumber: 1, pageSize: 1, totalRecords: 0, totalPages: 0, data: [] };
    for (const type of ['application/json', 'APPLICATION/JSON; charset=utf-8', 'application/vnd.api+json', '']) {
      expect(decode(JSON.stringify(page), 1, type === '' ? {} : { 'content-type': type }).page).toBeDefined();
    }
  });
});

describe('E6 page bodies under fuzzing, through the client (mock dispatcher: retries, tokens, promises)', () => {
  const agent = new MockAgent();
  let body: string | Buffer = '';
  let contentType = 'application/json';
  const unhandled: unknown[] = [];
  const onUnhandled = (reason: unknown): void => void unhandled.push(reason);

  beforeAll(() => {
    agent.disableNetConnect();
    const origin = agent.get('https://stats.test');
    origin
      .intercept({ path: '/connect/token', method: 'POST' })
      .reply(200, { access_token: 'fuzz-token', token_type: 'Bearer', expires_in: 3600 }, { headers: { 'content-type': 'application/json' } })
      .persist();
    origin
      .intercept({ path: (p) => p.startsWith('/analytics?'), method: 'GET' })
      .reply(() => ({ statusCode: 200, data: body, responseOptions: { headers: { 'content-type': contentType } } }))
      .persist();
    process.on('unhandledRejection', onUnhandled);
  });
  afterAll(async () => {
    process.off('unhandledRejection', onUnhandled);
    await agent.close();
  });

  it('resolves to a storable page or rejects with a typed error, for every body, with no unhandled rejection', async () => {
    const client = fuzzClient(agent, 2);
    const bodies = fc.oneof(
      validPage.map((p) => ({ text: JSON.stringify(p), page: p.pageNumber })),
      fc.string({ unit: 'binary', maxLength: 100 }).map((text) => ({ text, page: 1 })),
      fc.jsonValue({ stringUnit: 'binary', maxDepth: 4 }).map((v) => ({ text: JSON.stringify(v), page: 1 })),
      validPage.chain((p) => {
        const text = JSON.stringify(p);
        return fc.nat({ max: text.length - 1 }).map((cut) => ({ text: text.slice(0, cut), page: p.pageNumber }));
      }),
    );
    await fc.assert(
      fc.asyncProperty(bodies, fc.constantFrom('application/json', 'text/html', ''), async ({ text, page }, type) => {
        body = text;
        contentType = type;
        try {
          const result = await client.fetchPage({ startDate: new Date('2026-10-01T00:00:00Z'), pageNumber: page, pageSize: 12 });
          expectStorable(result, text);
        } catch (err) {
          expect(err).toBeInstanceOf(ExporterError);
          expectTypedBodyError(err);
        }
      }),
      { numRuns: 300 },
    );
    // Give any stray rejection its turn to surface before judging.
    await new Promise((resolve) => setImmediate(resolve));
    expect(unhandled).toEqual([]);
  });

  it('keeps the bytes a page was decoded from, after a byte order mark, only when they are valid UTF-8', async () => {
    const client = fuzzClient(agent, 1);
    const fetch = () => client.fetchPage({ startDate: new Date('2026-10-01T00:00:00Z'), pageSize: 12 });
    contentType = 'application/json';
    const text = '{"pageNumber":1,"pageSize":12,"totalRecords":1,"totalPages":1,"data":[{"name":"Grønn 😀"}]}';
    for (const prefix of [Buffer.alloc(0), Buffer.from([0xef, 0xbb, 0xbf])]) {
      body = Buffer.concat([prefix, Buffer.from(text, 'utf8')]);
      const page = await fetch();
      expect(page.text).toBe(text);
      expect(page.bytes?.equals(Buffer.from(text, 'utf8'))).toBe(true);
    }
    // A byte that is not UTF-8 inside a string: the text holds U+FFFD, and no bytes disagree with it.
    body = Buffer.from(text.replace('ø', 'Z'), 'utf8');
    body[body.indexOf('GrZnn')] = 0xff;
    const page = await fetch();
    expect(page.text).toContain('\ufffd');
    expect(page.bytes).toBeUndefined();
  });
});
