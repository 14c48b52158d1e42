import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { DatabaseError, InconsistentWindowError, TokenError, UpstreamError, failureReason } from '../../src/errors.js';
import { silentLogger } from '../../src/log.js';
import { ExporterMetrics } from '../../src/metrics/registry.js';
import { UpstreamMetrics, scrapeBudgetMs, scrapeTimeoutFromHeader } from '../../src/metrics/upstream.js';
import { formatDuration } from '../../src/time.js';
import { AnalyticsClient } from '../../src/upstream/analytics.js';

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
    [new UpstreamError('ERR_UPSTREAM_TIMEOUT', 'prometheus', 'x'), 'timeout'],
    [new UpstreamError('ERR_UPSTREAM_NETWORK', 'prometheus', 'x'), 'network'],
    [new UpstreamError('ERR_UPSTREAM_HTTP', 'prometheus', 'x', { status: 503 }), 'http_503'],
    [new UpstreamError('ERR_UPSTREAM_BODY', 'prometheus', 'x'), 'invalid_body'],
    [new UpstreamError('ERR_UPSTREAM_BODY', 'prometheus', 'x', { reason: 'content_type' }), 'content_type'],
    [new TokenError('ERR_TOKEN_REQUEST', 'x'), 'token'],
    [new InconsistentWindowError('x'), 'inconsistent_window'],
    [new DatabaseError('x'), 'database'],
    [new Error('x'), 'other'],
  ])('%s → %s', (err, reason) => expect(failureReason(err)).toBe(reason));
});

describe('UpstreamMetrics with an upstream that reuses our names', () => {
  let server: Server;
  let url: string;
  const queries: URLSearchParams[] = [];
  const e7 = [
    'analytics_exporter_upstream_up 7',
    'analytics_exporter_sync_runs_total 3',
    'userlogin_event_count{customer="a"} 5',
    'not valid {',
    '',
  ].join('\n');

  beforeAll(async () => {
    server = createServer((req, res) => {
      if (req.url === '/connect/token') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ access_token: 't', token_type: 'Bearer', expires_in: 3600 }));
        return;
      }
      queries.push(new URL(req.url ?? '/', 'http://x').searchParams);
      res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4' });
      res.end(e7);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await new Promise((resolve) => server.close(resolve));
  });

  it('drops and counts colliding families and invalid lines, and gives the rest a HELP', async () => {
    const config = loadConfig({ STATISTICS_URL: url, AUTH_URL: url, CLIENT_ID: 'c', CLIENT_SECRET: 's' });
    const client = AnalyticsClient.fromConfig(config.upstream!, { log: silentLogger });
    const metrics = new ExporterMetrics({ processMetrics: false, cacheTtlMs: 30_000 });
    const upstream = new UpstreamMetrics({ client, metrics, windowMs: 86_400_000, cacheTtlMs: 0, prefix: undefined, ownFamilies: () => metrics.families(), log: silentLogger });
    try {
      const part = await upstream.collect(5000);
      const help = 'Platform analytics metric (E7), a count over the last 24h (METRICS_WINDOW), as read from the upstream.';
      expect(part.text.toString()).toBe(`# HELP userlogin_event_count ${help}\n# TYPE userlogin_event_count untyped\nuserlogin_event_count{customer="a"} 5\n`);
      // OpenMetrics without # EOF: the body ends with it after the own part.
      expect(part.openMetrics.toString()).toBe(`# TYPE userlogin_event_count unknown\n# HELP userlogin_event_count ${help}\nuserlogin_event_count{customer="a"} 5\n`);
      expect(part.samples).toBe(1);
      expect((await metrics.upstreamDroppedFamilies.get()).values[0]!.value).toBe(2);
      expect((await metrics.upstreamInvalidLines.get()).values.reduce((n, v) => n + v.value, 0)).toBe(1);
      expect((await metrics.upstreamUp.get()).values[0]!.value).toBe(1);
      expect((await metrics.upstreamUp.get()).help).toContain('a successful read is reused for 30s (METRICS_CACHE_TTL)');
      expect((await metrics.upstreamSamples.get()).values[0]!.value).toBe(1);
      // E7 is asked for [now − METRICS_WINDOW, now].
      const query = queries[queries.length - 1]!;
      const from = Date.parse(query.get('startDate')!);
      const to = Date.parse(query.get('toDate')!);
      expect(to - from).toBe(86_400_000);
      expect(Math.abs(Date.now() - to)).toBeLessThan(10_000);
    } finally {
      await client.close();
    }
  });
});
