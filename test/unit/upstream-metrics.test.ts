import { describe, expect, it } from 'vitest';
import {
  DatabaseError,
  InconsistentWindowError,
  TokenRequestError,
  UpstreamBodyError,
  UpstreamHttpError,
  UpstreamNetworkError,
  UpstreamTimeoutError,
} from '../../src/errors.js';
import { failureReason } from '../../src/failures.js';
import { scrapeBudgetMs, scrapeTimeoutFromHeader } from '../../src/serve/scrape.js';
import { formatDuration } from '../../src/time.js';

describe('scrape budget', () => {
  it('keeps 20% of the scrape timeout, at most 1 s, for the response', () => {
    expect(scrapeBudgetMs(10_000)).toBe(9_000);
    expect(scrapeBudgetMs(1_000)).toBe(800);
    expect(scrapeBudgetMs(500)).toBe(400);
  });

  it('reads X-Prometheus-Scrape-Timeout-Seconds, falling back for absent or bad values', () => {
    expect(scrapeTimeoutFromHeader('2.5', 10_000)).toBe(2_500);
    expect(scrapeTimeoutFromHeader(undefined, 10_000)).toBe(10_000);
    expect(scrapeTimeoutFromHeader('soon', 10_000)).toBe(10_000);
    expect(scrapeTimeoutFromHeader('-1', 10_000)).toBe(10_000);
    expect(scrapeTimeoutFromHeader('1e7', 10_000)).toBe(300_000); // bounded: a huge value would overflow a timer
  });

  it('formats durations the Prometheus way', () => {
    expect(formatDuration(86_400_000)).toBe('24h');
    expect(formatDuration(5_400_000)).toBe('1h30m');
    expect(formatDuration(45_000)).toBe('45s');
  });
});

describe('failureReason, the one source of upstream_errors_total{reason}', () => {
  it.each([
    [new UpstreamTimeoutError('prometheus', 'x'), 'timeout'],
    [new UpstreamNetworkError('prometheus', 'x'), 'network'],
    [new UpstreamHttpError('prometheus', 503, 'x'), 'http_503'],
    [new UpstreamBodyError('prometheus', 'invalid_body', 'x'), 'invalid_body'],
    [new UpstreamBodyError('prometheus', 'content_type', 'x'), 'content_type'],
    [new TokenRequestError('x'), 'token'],
    [new InconsistentWindowError('x'), 'inconsistent_window'],
    [new DatabaseError('x'), 'database'],
    [new Error('x'), 'other'],
  ])('%s → %s', (err, reason) => expect(failureReason(err)).toBe(reason));
});
