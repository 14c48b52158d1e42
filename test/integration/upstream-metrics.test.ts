/** E7Scraper against a small E0/E7 server on loopback: what it drops, counts and serves. */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { silentLogger } from '../helpers/silent-logger.js';
import { ExporterMetrics } from '../../src/metrics/registry.js';
import { E7Scraper } from '../../src/serve/scrape.js';
import { AnalyticsClient } from '../../src/upstream/analytics.js';

describe("E7Scraper with an upstream that reuses our names and Prometheus's", () => {
  let server: Server;
  let url: string;
  const queries: URLSearchParams[] = [];
  const e7 = [
    'analytics_exporter_upstream_up 7',
    'analytics_exporter_sync_runs_total 3',
    // Names Prometheus gives its own series: reserved like ours.
    'up 0',
    'scrape_duration_seconds 0.1',
    'ALERTS{alertname="x"} 1',
    'ALERTS_FOR_STATE 1',
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

  it('drops and counts colliding families (ours, up, scrape_*, ALERTS*) and invalid lines, and gives the rest a HELP', async () => {
    const config = loadConfig({ STATISTICS_URL: url, AUTH_URL: url, CLIENT_ID: 'c', CLIENT_SECRET: 's' });
    const client = AnalyticsClient.fromConfig(config.sources[0]!.upstream!, { log: silentLogger });
    const metrics = new ExporterMetrics({ processMetrics: false, cacheTtlMs: 30_000 });
    const upstream = new E7Scraper({
      sources: [{ name: 'default', labels: {}, client }],
      metrics,
      windowMs: 86_400_000,
      cacheTtlMs: 0,
      prefix: undefined,
      ownFamilies: () => metrics.families(),
      log: silentLogger,
    });
    try {
      const part = await upstream.collect(5000);
      const help = 'Platform analytics metric (E7), a count over the last 24h (METRICS_WINDOW), as read from the upstream.';
      expect(part.text.toString()).toBe(
        `# HELP userlogin_event_count ${help}\n# TYPE userlogin_event_count untyped\nuserlogin_event_count{source="default",customer="a"} 5\n`,
      );
      // OpenMetrics without # EOF: the body ends with it after the own part.
      expect(part.openMetrics.toString()).toBe(
        `# TYPE userlogin_event_count unknown\n# HELP userlogin_event_count ${help}\nuserlogin_event_count{source="default",customer="a"} 5\n`,
      );
      expect(part.samples).toBe(1);
      expect((await metrics.scrape.droppedFamilies.get()).values[0]!.value).toBe(6);
      expect((await metrics.scrape.invalidLines.get()).values.reduce((n, v) => n + v.value, 0)).toBe(1);
      expect((await metrics.scrape.up.get()).values[0]!.value).toBe(1);
      expect((await metrics.scrape.up.get()).help).toContain('a successful read is reused for 30s (METRICS_CACHE_TTL)');
      expect((await metrics.scrape.samples.get()).values[0]!.value).toBe(1);
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
