import { describe, expect, it } from 'vitest';
import { parseExposition, type MetricFamily } from '../../src/exposition/index.js';
import { mergeFamilies } from '../../src/exposition/merge.js';
import { ExporterMetrics } from '../../src/metrics/registry.js';

describe('ExporterMetrics.families', () => {
  it("are the families of prom-client's own text, less its three _total gauges", async () => {
    const metrics = new ExporterMetrics({ cacheTtlMs: 30_000 });
    metrics.client.requestDuration.observe({ source: 'default', endpoint: 'analytics', code: '200' }, 0.2);
    metrics.client.requestDuration.observe({ source: 'default', endpoint: 'prometheus', code: 'error' }, 31);
    metrics.client.attemptFailures.inc({ source: 'default', endpoint: 'analytics', reason: 'http_503' });
    metrics.sync.windowsShrunk.inc({ action: 'kept' });
    metrics.process.databaseUp.set(1);
    const families = await metrics.families();
    const fromText = parseExposition(await metrics.registry.metrics());
    expect(fromText.invalid).toEqual([]);
    const omitted = ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total'];
    const expected = fromText.families.filter((f) => !omitted.includes(f.name));
    expect(families.map((f) => f.name)).toEqual(expected.map((f) => f.name));
    // Values of the process metrics move between the two reads; names, types, help and series must not.
    const shape = (list: typeof families) =>
      list.map((f) => ({ name: f.name, type: f.type, help: f.help, series: f.samples.map((s) => `${s.name}${JSON.stringify(s.labels)}`) }));
    expect(shape(families)).toEqual(shape(expected));
    const ours = (list: typeof families) => list.filter((f) => f.name.startsWith('analytics_exporter_'));
    expect(ours(families)).toEqual(ours(expected));
    expect(families.find((f) => f.name === 'analytics_exporter_database_up')?.samples[0]?.value).toBe(1);
  });
});

describe('ExporterMetrics.familyShapes', () => {
  it('names the families of families() with their types and help, without samples, and drops the same colliding upstream families', async () => {
    const metrics = new ExporterMetrics({ cacheTtlMs: 30_000 });
    metrics.client.requestDuration.observe({ source: 'default', endpoint: 'analytics', code: '200' }, 0.2);
    metrics.scrape.up.set({ source: 'default' }, 1);
    const families = await metrics.families();
    const shapes = metrics.familyShapes();
    expect(shapes.map((f) => ({ name: f.name, type: f.type, help: f.help }))).toEqual(families.map((f) => ({ name: f.name, type: f.type, help: f.help })));
    expect(shapes.every((f) => f.samples.length === 0)).toBe(true);
    // Every sample name of ours as an upstream family, and two names that are not ours.
    const upstream: MetricFamily[] = [...new Set(families.flatMap((f) => f.samples.map((s) => s.name))), 'userlogin_event_count', 'process_cpu'].map(
      (name) => ({ name, type: 'untyped' as const, help: undefined, samples: [{ name, labels: [], value: 1 }] }),
    );
    const byShape = mergeFamilies(shapes, upstream).dropped;
    expect(byShape).toEqual(mergeFamilies(families, upstream).dropped);
    expect(byShape).toContain('analytics_exporter_upstream_request_duration_seconds_bucket');
    expect(byShape).not.toContain('userlogin_event_count');
    expect(byShape).not.toContain('process_cpu');
  });
});

describe('ExporterMetrics.forgetSource', () => {
  it("removes every series of the source, histograms' buckets and labelled counters included, and nothing of another source", async () => {
    const metrics = new ExporterMetrics({ processMetrics: false });
    for (const source of ['gone', 'kept']) {
      metrics.syncObserver(source);
      metrics.auditScheduled(source);
      metrics.scrape.up.set({ source }, 1);
      metrics.client.requestDuration.observe({ source, endpoint: 'analytics', code: '200' }, 0.2);
      metrics.client.attemptFailures.inc({ source, endpoint: 'analytics', reason: 'http_503' });
    }
    metrics.process.databaseUp.set(1);
    const sources = async () => {
      const seen = new Map<string, Set<string>>();
      for (const family of await metrics.families()) {
        for (const sample of family.samples) {
          const source = sample.labels.find(([name]) => name === 'source')?.[1] ?? '';
          seen.set(source, (seen.get(source) ?? new Set()).add(family.name));
        }
      }
      return seen;
    };
    const before = await sources();
    expect(before.get('gone')).toEqual(before.get('kept'));
    expect(before.get('gone')!.size).toBeGreaterThan(20);
    await metrics.forgetSource('gone');
    const after = await sources();
    expect(after.has('gone')).toBe(false);
    expect(after.get('kept')).toEqual(before.get('kept'));
    expect(after.get('')).toEqual(before.get(''));
    // Added again, its series start afresh at 0.
    metrics.syncObserver('gone');
    const again = (await metrics.families()).find((f) => f.name === 'analytics_exporter_sync_runs_total')!;
    expect(again.samples.filter((s) => s.labels.some(([n, v]) => n === 'source' && v === 'gone')).map((s) => s.value)).toEqual([0]);
  });
});
