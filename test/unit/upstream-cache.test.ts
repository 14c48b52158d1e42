/**
 * The E7 cache of E7Scraper on an injected clock: reuse within METRICS_CACHE_TTL, a new read
 * after it, nothing stale; and several sources read side by side, one failing or slow.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { UpstreamHttpError } from '../../src/errors.js';
import { parseExposition } from '../../src/exposition/index.js';
import { createLogger } from '../../src/log.js';
import { silentLogger } from '../helpers/silent-logger.js';
import { ExporterMetrics } from '../../src/metrics/registry.js';
import { E7Scraper } from '../../src/serve/scrape.js';
import type { AnalyticsClient, RequestOptions } from '../../src/upstream/analytics.js';
import { captureLog } from '../helpers/log-capture.js';

/** An E7 client that answers from a list, one entry per read: text, or an error to throw. */
function fakeClient(answers: Array<string | Error>): { client: AnalyticsClient; reads: () => number } {
  let reads = 0;
  const client = {
    fetchPrometheusText: () => {
      const answer = answers[Math.min(reads++, answers.length - 1)]!;
      return answer instanceof Error ? Promise.reject(answer) : Promise.resolve(answer);
    },
  } as unknown as AnalyticsClient;
  return { client, reads: () => reads };
}

function upstream(client: AnalyticsClient, clock: { now: number }, cacheTtlMs: number): { metrics: ExporterMetrics; upstream: E7Scraper } {
  const metrics = new ExporterMetrics({ processMetrics: false });
  const u = new E7Scraper({
    sources: [{ name: 'default', labels: {}, client }],
    metrics,
    windowMs: 86_400_000,
    cacheTtlMs,
    prefix: undefined,
    ownFamilies: () => metrics.families(),
    log: silentLogger,
    now: () => clock.now,
  });
  return { metrics, upstream: u };
}

describe('E7Scraper cache', () => {
  it('reuses a read for METRICS_CACHE_TTL and reads again after it', async () => {
    const clock = { now: 1_000_000 };
    const { client, reads } = fakeClient(['a_total 1\n', 'a_total 2\n']);
    const { upstream: u } = upstream(client, clock, 30_000);
    expect((await u.collect(1000)).text.toString()).toContain('a_total{source="default"} 1');
    clock.now += 29_999;
    expect((await u.collect(1000)).text.toString()).toContain('a_total{source="default"} 1');
    expect(reads()).toBe(1);
    clock.now += 1;
    expect((await u.collect(1000)).text.toString()).toContain('a_total{source="default"} 2');
    expect(reads()).toBe(2);
  });

  it('serves no upstream sample older than the TTL when a read fails', async () => {
    const clock = { now: 1_000_000 };
    const { client, reads } = fakeClient(['a_total 1\n', new UpstreamHttpError('prometheus', 404, 'E7: HTTP 404')]);
    const { metrics, upstream: u } = upstream(client, clock, 1_000);
    expect((await u.collect(1000)).samples).toBe(1);
    clock.now += 1_000;
    const part = await u.collect(1000);
    expect(reads()).toBe(2);
    expect(part.samples).toBe(0);
    expect(part.text.length).toBe(0);
    expect((await metrics.scrape.up.get()).values[0]!.value).toBe(0);
    expect((await metrics.scrape.errors.get()).values.find((v) => v.labels.reason === 'http_404')?.value).toBe(1);
  });
});

describe('E7Scraper and the names Prometheus reserves', () => {
  const e7 = ['up 0', 'scrape_duration_seconds 0.1', 'ALERTS{alertname="x"} 1', 'ALERTS_FOR_STATE 1', 'userlogin_event_count{customer="a"} 5', ''].join('\n');

  function reading(prefix: string | undefined): { metrics: ExporterMetrics; upstream: E7Scraper } {
    const metrics = new ExporterMetrics({ processMetrics: false });
    const u = new E7Scraper({
      sources: [{ name: 'default', labels: {}, client: fakeClient([e7]).client }],
      metrics,
      windowMs: 86_400_000,
      cacheTtlMs: 0,
      prefix,
      ownFamilies: () => metrics.families(),
      log: silentLogger,
    });
    return { metrics, upstream: u };
  }

  it('drops up, scrape_* and ALERTS* from the upstream and counts them in upstream_dropped_families_total', async () => {
    const { metrics, upstream: u } = reading(undefined);
    const part = await u.collect(1000);
    const served = parseExposition(part.text.toString()).families.map((f) => f.name);
    expect(served).toEqual(['userlogin_event_count']);
    expect(parseExposition(part.openMetrics.toString() + '# EOF\n').families.map((f) => f.name)).toEqual(['userlogin_event_count']);
    expect(part.samples).toBe(1);
    expect((await metrics.scrape.droppedFamilies.get()).values).toEqual([{ labels: { source: 'default' }, value: 4 }]);
    // Dropped on every read, not once.
    await u.collect(1000);
    expect((await metrics.scrape.droppedFamilies.get()).values[0]!.value).toBe(8);
  });

  it('judges the served name: with UPSTREAM_METRIC_PREFIX they no longer collide and are served', async () => {
    const { metrics, upstream: u } = reading('analytics_');
    const part = await u.collect(1000);
    expect(parseExposition(part.text.toString()).families.map((f) => f.name)).toEqual([
      'analytics_up',
      'analytics_scrape_duration_seconds',
      'analytics_ALERTS',
      'analytics_ALERTS_FOR_STATE',
      'analytics_userlogin_event_count',
    ]);
    expect((await metrics.scrape.droppedFamilies.get()).values).toEqual([{ labels: { source: 'default' }, value: 0 }]);
  });
});

describe('E7Scraper with two sources', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  function twoSources(a: AnalyticsClient, b: AnalyticsClient, clock: { now: number }) {
    const metrics = new ExporterMetrics({ processMetrics: false });
    const u = new E7Scraper({
      sources: [
        { name: 'a', labels: { environment: 'production' }, client: a },
        { name: 'b', labels: {}, client: b },
      ],
      metrics,
      windowMs: 86_400_000,
      cacheTtlMs: 30_000,
      prefix: undefined,
      ownFamilies: () => metrics.families(),
      log: silentLogger,
      now: () => clock.now,
    });
    const up = async (): Promise<Record<string, number>> => {
      const values = (await metrics.scrape.up.get()).values;
      return Object.fromEntries(values.map((v): [string, number] => [String(v.labels.source), v.value]));
    };
    return { metrics, u, up };
  }

  it('merges both into one family per name, and reuses the merged bytes while neither read changes', async () => {
    const clock = { now: 1_000_000 };
    const { u, up } = twoSources(fakeClient(['x 1\n']).client, fakeClient(['x 2\n']).client, clock);
    expect(await up()).toEqual({ a: 0, b: 0 });
    const first = await u.collect(1000);
    expect(first.text.toString()).toMatch(/# TYPE x untyped\nx\{source="a",environment="production"\} 1\nx\{source="b"\} 2\n$/);
    expect(first.samples).toBe(2);
    expect(await up()).toEqual({ a: 1, b: 1 });
    expect(await u.collect(1000)).toBe(first);
    expect((await u.collectSource('b', 1000)).text.toString()).toMatch(/\nx\{source="b"\} 2\n$/);
  });

  it("serves one source's samples when the other fails, with that source's upstream_up 0 and its error counted", async () => {
    const clock = { now: 1_000_000 };
    const failing = fakeClient([new UpstreamHttpError('prometheus', 503, 'E7: HTTP 503')]);
    const { metrics, u, up } = twoSources(fakeClient(['x 1\n']).client, failing.client, clock);
    const part = await u.collect(1000);
    expect(part.text.toString()).toContain('x{source="a",environment="production"} 1');
    expect(part.text.toString()).not.toContain('source="b"');
    expect(await up()).toEqual({ a: 1, b: 0 });
    expect((await metrics.scrape.errors.get()).values).toEqual([{ labels: { source: 'b', reason: 'http_503' }, value: 1 }]);
    expect((await u.collectSource('b', 1000)).samples).toBe(0);
  });

  it('answers within the budget when one source hangs, with the other served', async () => {
    vi.useFakeTimers();
    const clock = { now: 1_000_000 };
    const hanging = { fetchPrometheusText: () => new Promise<string>(() => undefined) } as unknown as AnalyticsClient;
    const { metrics, u, up } = twoSources(fakeClient(['x 1\n']).client, hanging, clock);
    let settled = false;
    const pending = u.collect(2000).finally(() => (settled = true));
    await vi.advanceTimersByTimeAsync(1999);
    expect(settled).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    const part = await pending;
    expect(part.samples).toBe(1);
    expect(part.text.toString()).toContain('x{source="a",environment="production"} 1');
    expect(await up()).toEqual({ a: 1, b: 0 });
    expect((await metrics.scrape.errors.get()).values).toEqual([{ labels: { source: 'b', reason: 'timeout' }, value: 1 }]);
  });

  it('refuses source labels that would break histograms and summaries or replace source', () => {
    const metrics = new ExporterMetrics({ processMetrics: false });
    for (const name of ['le', 'quantile', 'source', '__x', 'not-a-label']) {
      const options = { metrics, windowMs: 1, cacheTtlMs: 1, prefix: undefined, ownFamilies: () => metrics.families(), log: silentLogger };
      const sources = [{ name: 'a', labels: { [name]: 'v' }, client: fakeClient(['x 1\n']).client }];
      expect(() => new E7Scraper({ ...options, sources })).toThrow(`source a: label name ${JSON.stringify(name)} cannot be added to upstream samples`);
    }
  });

  it('reads nothing for a source that is not configured', async () => {
    const clock = { now: 1_000_000 };
    const a = fakeClient(['x 1\n']);
    const { u } = twoSources(a.client, fakeClient(['x 2\n']).client, clock);
    expect(u.has('nope')).toBe(false);
    expect(await u.collectSource('nope', 1000)).toMatchObject({ samples: 0 });
    expect(a.reads()).toBe(0);
  });
});

describe('E7Scraper and the E7 limits (sample_limit, label_limit, label_value_length_limit)', () => {
  /** An E7 client that sends each answer through the read's body inspector, in 7-byte chunks, as send() does. */
  function inspectingClient(answers: string[]): AnalyticsClient {
    let reads = 0;
    return {
      fetchPrometheusText: async (_query: unknown, options: RequestOptions = {}) => {
        await Promise.resolve();
        const text = answers[Math.min(reads++, answers.length - 1)]!;
        const inspect = options.inspectBody?.();
        const bytes = Buffer.from(text);
        for (let at = 0; at < bytes.length; at += 7) inspect?.(bytes.subarray(at, at + 7));
        return text;
      },
    } as unknown as AnalyticsClient;
  }

  it('fails the read over a limit (up 0, reason limit) and warns once per limit broken, again after a good read', async () => {
    const destination = captureLog();
    const metrics = new ExporterMetrics({ processMetrics: false });
    const over = 'x{a="1"} 1\nx{a="2"} 2\nx{a="3"} 3\n';
    const client = inspectingClient([over, over, 'x{a="1"} 1\n', over, 'x{a="toolong"} 1\n']);
    const u = new E7Scraper({
      sources: [{ name: 'default', labels: {}, client, limits: { sampleLimit: 2, labelLimit: 64, labelValueLengthLimit: 6 } }],
      metrics,
      windowMs: 86_400_000,
      cacheTtlMs: 0,
      prefix: undefined,
      ownFamilies: () => metrics.families(),
      log: createLogger('debug', { format: 'json', destination }),
    });
    const up = async () => (await metrics.scrape.up.get()).values[0]!.value;
    expect((await u.collect(1000)).samples).toBe(0);
    expect(await up()).toBe(0);
    expect((await u.collect(1000)).samples).toBe(0);
    expect((await u.collect(1000)).samples).toBe(1);
    expect(await up()).toBe(1);
    expect((await u.collect(1000)).samples).toBe(0);
    expect((await u.collect(1000)).samples).toBe(0);
    expect((await metrics.scrape.errors.get()).values).toEqual([{ labels: { source: 'default', reason: 'limit' }, value: 4 }]);
    const limitLines = destination.lines().filter((line) => line.reason === 'limit');
    expect(limitLines.map((line) => [line.level, line.limit, line.value, line.setting])).toEqual([
      ['warn', 'sample_limit', 2, 'UPSTREAM_SAMPLE_LIMIT'],
      ['debug', 'sample_limit', 2, 'UPSTREAM_SAMPLE_LIMIT'],
      ['warn', 'sample_limit', 2, 'UPSTREAM_SAMPLE_LIMIT'],
      ['warn', 'label_value_length_limit', 6, 'UPSTREAM_LABEL_VALUE_LENGTH_LIMIT'],
    ]);
    expect(limitLines[0]).toMatchObject({ source: 'default', msg: expect.stringContaining('E7 text of source default is over its sample_limit of 2 samples') });
    expect(destination.text()).not.toContain('reading the upstream Prometheus text failed');
  });
});
