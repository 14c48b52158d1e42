import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  AbortedError,
  InconsistentWindowError,
  InvalidArgumentError,
  TokenRequestError,
  UpstreamBodyError,
  UpstreamError,
  UpstreamHttpError,
  UpstreamNetworkError,
  UpstreamTimeoutError,
} from '../../src/errors.js';
import { failureReason } from '../../src/failures.js';
import { formatApiDate, parsePage, validatePageQuery } from '../../src/upstream/analytics.js';
import { excerpt } from '../../src/upstream/http.js';
import { formUrlEncode } from '../../src/upstream/token.js';

const url = new URL('https://stats.test/analytics?pageNumber=1');
const records = (n: number) => Array.from({ length: n }, (_, i) => ({ i }));

function bodyErrorOf(body: unknown, page = 1): UpstreamError {
  try {
    parsePage(body, page, url);
  } catch (err) {
    expect(err).toBeInstanceOf(UpstreamError);
    expect(err).toMatchObject({ code: 'ERR_UPSTREAM_BODY', endpoint: 'analytics', retryable: true });
    return err as UpstreamError;
  }
  throw new Error('expected a body error');
}

describe('parsePage', () => {
  it('accepts a consistent page and keeps records whole', () => {
    const data = [
      { a: 1, nested: { b: [1, 2] } },
      { a: 1, nested: { b: [1, 2] } },
    ];
    const page = parsePage({ pageNumber: 2, pageSize: 2, totalRecords: 4, totalPages: 2, data, extra: 'ignored' }, 2, url);
    expect(page.data).toEqual(data);
  });

  it('accepts an empty result as zero or one page', () => {
    expect(parsePage({ pageNumber: 1, pageSize: 10, totalRecords: 0, totalPages: 0, data: [] }, 1, url).data).toEqual([]);
    expect(parsePage({ pageNumber: 1, pageSize: 10, totalRecords: 0, totalPages: 1, data: [] }, 1, url).data).toEqual([]);
  });

  it.each([
    ['data missing', { pageNumber: 1, pageSize: 10, totalRecords: 0, totalPages: 0 }, /data/],
    ['data not an array', { pageNumber: 1, pageSize: 10, totalRecords: 0, totalPages: 0, data: {} }, /data/],
    ['a record not an object', { pageNumber: 1, pageSize: 10, totalRecords: 2, totalPages: 1, data: [{}, 3] }, /data\[1\] is not a JSON object/],
    ['a fractional count', { pageNumber: 1, pageSize: 10, totalRecords: 1.5, totalPages: 1, data: [{}] }, /totalRecords/],
    ['another page', { pageNumber: 2, pageSize: 1, totalRecords: 2, totalPages: 2, data: [{}] }, /answered pageNumber 2/],
    ['too many records', { pageNumber: 1, pageSize: 2, totalRecords: 3, totalPages: 2, data: records(3) }, /more than pageSize/],
    ['totalPages off', { pageNumber: 1, pageSize: 2, totalRecords: 3, totalPages: 3, data: records(2) }, /totalPages 3 does not match/],
    ['more records than totalRecords', { pageNumber: 1, pageSize: 5, totalRecords: 3, totalPages: 1, data: records(4) }, /4 records, expected 3/],
  ])('rejects %s', (_name, body, pattern) => {
    expect(bodyErrorOf(body).message).toMatch(pattern);
  });

  it('passes a page holding fewer records than its envelope promises: whether a slice is complete is for the reader to judge', () => {
    // An upstream that clamps the page size to 2 while echoing the 5 asked (src/sync/read/reader.ts never takes it as complete).
    const page = parsePage({ pageNumber: 1, pageSize: 5, totalRecords: 3, totalPages: 1, data: records(2) }, 1, url);
    expect(page.data).toHaveLength(2);
    expect(page.totalRecords).toBe(3);
  });

  it('passes an empty page of a non-empty result: a paging limit or a count that lies is for the reader to judge (issue 39)', () => {
    expect(parsePage({ pageNumber: 1, pageSize: 5, totalRecords: 3, totalPages: 1, data: [] }, 1, url).data).toEqual([]);
    expect(parsePage({ pageNumber: 3, pageSize: 2, totalRecords: 9, totalPages: 5, data: [] }, 3, url).totalRecords).toBe(9);
  });

  it('accepts the self-consistent envelopes and short pages, never one record too many (property)', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 50 }), fc.integer({ min: 0, max: 200 }), fc.integer({ min: 1, max: 10 }), (pageSize, total, pageNumber) => {
        const totalPages = Math.ceil(total / pageSize);
        const length = pageNumber < totalPages ? pageSize : pageNumber === totalPages ? total - (totalPages - 1) * pageSize : 0;
        const body = { pageNumber, pageSize, totalRecords: total, totalPages, data: records(length) };
        expect(parsePage(body, pageNumber, url).data).toHaveLength(length);
        // One more than the page's share is refused; fewer, none included, is passed on for the reader to judge.
        expect(() => parsePage({ ...body, data: records(length + 1) }, pageNumber, url)).toThrow(UpstreamError);
        if (length > 1) expect(parsePage({ ...body, data: records(length - 1) }, pageNumber, url).data).toHaveLength(length - 1);
        expect(parsePage({ ...body, data: [] }, pageNumber, url).data).toEqual([]);
      }),
    );
  });
});

describe('validatePageQuery', () => {
  const startDate = new Date('2026-11-01T00:00:00Z');
  it('fills the reference defaults', () => {
    expect(validatePageQuery({ startDate })).toEqual({ startDate, toDate: undefined, pageNumber: 1, pageSize: 500 });
  });
  it.each([
    [{ startDate, pageSize: 0 }, /pageSize must be a whole number from 1 to 1000, got 0/],
    [{ startDate, pageSize: 1001 }, /got 1001/],
    [{ startDate, pageSize: 2.5 }, /pageSize/],
    [{ startDate, pageNumber: 0 }, /pageNumber/],
    [{ startDate: new Date('nope') }, /startDate must be a valid date/],
    [{ startDate, toDate: new Date('2026-10-01T00:00:00Z') }, /toDate .* is before startDate/],
    [{} as { startDate: Date }, /startDate is required/],
  ])('rejects %o', (query, pattern) => {
    expect(() => validatePageQuery(query)).toThrow(InvalidArgumentError);
    expect(() => validatePageQuery(query)).toThrow(pattern);
  });
});

describe('small encoders', () => {
  it('formats API dates as ISO 8601 UTC, milliseconds only when present', () => {
    expect(formatApiDate(new Date('2026-11-01T10:20:30.000Z'))).toBe('2026-11-01T10:20:30Z');
    expect(formatApiDate(new Date('2026-11-01T10:20:30.120Z'))).toBe('2026-11-01T10:20:30.120Z');
  });

  it('form-urlencodes client credentials as RFC 6749 §2.3.1 asks', () => {
    expect(formUrlEncode('a b+c:d/é%')).toBe('a+b%2Bc%3Ad%2F%C3%A9%25');
  });

  it('redacts secrets from body excerpts', () => {
    expect(excerpt('{"echo":"Bearer tok-123"}', 120, ['tok-123'])).toBe('{"echo":"Bearer [redacted]"}');
    expect(excerpt('x'.repeat(200), 10)).toBe('xxxxxxxxxx…');
  });
});

describe('failureReason', () => {
  it.each([
    [new UpstreamNetworkError('analytics', 'x'), 'network'],
    [new UpstreamTimeoutError('analytics', 'x'), 'timeout'],
    [new UpstreamHttpError('analytics', 503, 'x'), 'http_503'],
    [new UpstreamBodyError('analytics', 'invalid_body', 'x'), 'invalid_body'],
    [new UpstreamBodyError('analytics', 'invalid_json', 'x'), 'invalid_json'],
    [new TokenRequestError('x', { status: 503 }), 'token'],
    [new InconsistentWindowError('reads of an instant disagreed'), 'inconsistent_window'],
    // A class is never matched by its name: an error merely called so is "other".
    [Object.assign(new Error('window changed'), { name: 'InconsistentWindowError' }), 'other'],
    [new AbortedError('stopped'), 'aborted'],
    [Object.assign(new Error('unsupported Unicode escape sequence'), { code: '22P05' }), 'database'],
    [new Error('boom'), 'other'],
    ['a string', 'other'],
    [undefined, 'other'],
  ])('%o → %s', (err, reason) => {
    expect(failureReason(err)).toBe(reason);
  });
});
