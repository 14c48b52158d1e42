import { Counter, Gauge, Histogram, Registry, Summary } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { serializeOpenMetricsBuffer, serializeTextBuffer, type MetricFamily } from '../../src/exposition/index.js';
import { COLLECTED_MAX_AGE_MS, OwnExposition, toFamily } from '../../src/metrics/own-part.js';
import { ExporterMetrics } from '../../src/metrics/registry.js';

/** The registry's families as a whole-list serializer gets them (getMetricsAsJSON, as ExporterMetrics.families). */
async function families(registry: Registry): Promise<MetricFamily[]> {
  return (await registry.getMetricsAsJSON()).map((metric) => toFamily(metric as Parameters<typeof toFamily>[0]));
}

/** Collects and expects both formats to be what the whole-list serializers write for the registry now. */
async function expectWholeListBytes(own: OwnExposition, registry: Registry): Promise<void> {
  const snapshot = await own.collect();
  const expected = await families(registry);
  expect(own.text(snapshot).toString()).toBe(serializeTextBuffer(expected).toString());
  expect(own.openMetrics(snapshot).toString()).toBe(serializeOpenMetricsBuffer(expected, { eof: false }).toString());
}

describe('OwnExposition', () => {
  it('writes the bytes of the whole-list serializers while series are added, changed, reset and removed', async () => {
    const registry = new Registry();
    const requests = new Counter({ name: 'requests_total', help: 'Requests.', labelNames: ['source', 'code'], registers: [registry] });
    // Takes `requests` and `requests_created`, which counter requests_total would claim in OpenMetrics: it becomes unknown there.
    const plain = new Gauge({ name: 'requests', help: 'A gauge named as the counter without _total.', registers: [registry] });
    const other = new Counter({ name: 'other_total', help: 'Claims its names in OpenMetrics.', registers: [registry] });
    const level = new Gauge({ name: 'level', help: 'With "quotes" and \\ a backslash\nand a line.', labelNames: ['source'], registers: [registry] });
    const duration = new Histogram({ name: 'duration_seconds', help: 'Durations.', labelNames: ['source'], buckets: [0.1, 1], registers: [registry] });
    const quantiles = new Summary({ name: 'size_bytes', help: 'Sizes.', percentiles: [0.5], registers: [registry] });
    const own = new OwnExposition(registry);
    await expectWholeListBytes(own, registry);
    requests.inc({ source: 'a', code: '200' });
    level.set({ source: 'a"b\\c\nd' }, 1.5);
    duration.observe({ source: 'a' }, 0.05);
    await expectWholeListBytes(own, registry);
    // Nothing changed, then the same values set again: the same bytes.
    await expectWholeListBytes(own, registry);
    level.set({ source: 'a"b\\c\nd' }, 1.5);
    await expectWholeListBytes(own, registry);
    requests.inc({ source: 'a', code: '200' }, 2);
    requests.inc({ source: 'b', code: '500' });
    plain.set(Number.NaN);
    other.inc();
    duration.observe({ source: 'a' }, 0.05);
    duration.observe({ source: 'b' }, 5);
    quantiles.observe(10);
    await expectWholeListBytes(own, registry);
    plain.set(-0);
    level.set({ source: 'x' }, Number.POSITIVE_INFINITY);
    duration.zero({ source: 'c' });
    await expectWholeListBytes(own, registry);
    requests.remove({ source: 'a', code: '200' });
    duration.reset();
    level.reset();
    await expectWholeListBytes(own, registry);
    registry.removeSingleMetric('requests');
    // Counter requests_total may claim its OpenMetrics names now.
    await expectWholeListBytes(own, registry);
    new Gauge({ name: 'late', help: 'Registered after the first scrapes.', registers: [registry] }).set(3);
    await expectWholeListBytes(own, registry);
  });

  it('serialises the whole list when two families claim one name (histogram x owns x_bucket)', async () => {
    const registry = new Registry();
    new Histogram({ name: 'x', help: 'A histogram.', buckets: [1], registers: [registry] }).observe(0.5);
    new Gauge({ name: 'x_bucket', help: 'Taken by the histogram: left out.', registers: [registry] }).set(1);
    const own = new OwnExposition(registry);
    await expectWholeListBytes(own, registry);
    expect(own.text(await own.collect()).toString()).not.toContain('# TYPE x_bucket');
  });

  it('reads a metric with a collect function once per COLLECTED_MAX_AGE_MS, and gives the same snapshot while nothing changed', async () => {
    const registry = new Registry();
    let reads = 0;
    new Gauge({
      name: 'collected',
      help: 'Set when read.',
      registers: [registry],
      collect() {
        reads++;
        this.set(reads);
      },
    });
    const counter = new Counter({ name: 'events_total', help: 'Events.', registers: [registry] });
    let now = 0;
    const own = new OwnExposition(registry, () => now);
    const first = await own.collect();
    expect(own.text(first).toString()).toContain('collected 1\n');
    now = COLLECTED_MAX_AGE_MS - 1;
    expect(await own.collect()).toBe(first);
    counter.inc();
    const second = await own.collect();
    expect(second).not.toBe(first);
    expect(own.text(second).toString()).toMatch(/collected 1\n[^]*events_total 1\n/);
    now = COLLECTED_MAX_AGE_MS;
    expect(own.text(await own.collect()).toString()).toContain('collected 2\n');
    expect(reads).toBe(2);
  });

  it("writes the exporter's own metrics as their families serialise whole", async () => {
    const metrics = new ExporterMetrics({ cacheTtlMs: 30_000, processMetrics: false });
    const own = new OwnExposition(metrics.registry);
    await expectWholeListBytes(own, metrics.registry);
    for (const source of ['s01', 's02']) {
      const observer = metrics.clientObserver(source);
      observer.onResponse?.({ endpoint: 'prometheus', status: 200, durationSeconds: 0.02 });
      observer.onTokenRequest?.('success');
      metrics.syncObserver(source);
      metrics.scrape.up.set({ source }, 1);
    }
    await expectWholeListBytes(own, metrics.registry);
    metrics.clientObserver('s02').onResponse?.({ endpoint: 'prometheus', status: undefined, durationSeconds: 31 });
    metrics.scrape.up.set({ source: 's01' }, 0);
    await expectWholeListBytes(own, metrics.registry);
  });
});
