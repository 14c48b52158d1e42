/** The E7 cache of UpstreamMetrics on an injected clock: reuse within METRICS_CACHE_TTL, a new read after it, nothing stale. */
import { describe, expect, it } from 'vitest';
import { UpstreamError } from '../../src/errors.js';
import { silentLogger } from '../../src/log.js';
import { ExporterMetrics } from '../../src/metrics/registry.js';
import { UpstreamMetrics } from '../../src/metrics/upstream.js';
import type { AnalyticsClient } from '../../src/upstream/analytics.js';

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

function upstream(client: AnalyticsClient, clock: { now: number }, cacheTtlMs: number): { metrics: ExporterMetrics; upstream: UpstreamMetrics } {
  const metrics = new ExporterMetrics({ processMetrics: false });
  const u = new UpstreamMetrics({
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

describe('UpstreamMetrics cache', () => {
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
    const { client, reads } = fakeClient(['a_total 1\n', new UpstreamError('ERR_UPSTREAM_HTTP', 'prometheus', 'E7: HTTP 404', { status: 404 })]);
    const { metrics, upstream: u } = upstream(client, clock, 1_000);
    expect((await u.collect(1000)).samples).toBe(1);
    clock.now += 1_000;
    const part = await u.collect(1000);
    expect(reads()).toBe(2);
    expect(part.samples).toBe(0);
    expect(part.text.length).toBe(0);
    expect((await metrics.upstreamUp.get()).values[0]!.value).toBe(0);
    expect((await metrics.upstreamErrors.get()).values.find((v) => v.labels.reason === 'http_404')?.value).toBe(1);
  });
});
