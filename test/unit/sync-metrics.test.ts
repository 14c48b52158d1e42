/**
 * The sync's quarantine and unstable-instant counters (src/metrics/registry.ts): present at 0 from
 * the source's observer on, so increase() sees the first event, and moved by the SyncObserver hooks
 * run.ts calls, each source's under its own `source` label.
 */
import { describe, expect, it } from 'vitest';
import { ExporterMetrics } from '../../src/metrics/registry.js';

const window = { start: Date.parse('2026-10-01T00:00:00Z'), end: Date.parse('2026-10-02T00:00:00Z') };

async function sample(metrics: ExporterMetrics, name: string): Promise<string | undefined> {
  const text = await metrics.registry.metrics();
  return text.split('\n').find((line) => line.startsWith(`${name} `) || line.startsWith(`${name}{`));
}

describe('sync counters of quarantined records and unstable instants', () => {
  it('exports both counters at 0 before any run, with help naming where to look', async () => {
    const metrics = new ExporterMetrics({ processMetrics: false });
    metrics.syncObserver('default');
    expect(await sample(metrics, 'analytics_exporter_sync_records_quarantined_total')).toBe(
      'analytics_exporter_sync_records_quarantined_total{source="default"} 0',
    );
    expect(await sample(metrics, 'analytics_exporter_sync_unstable_instants_total')).toBe(
      'analytics_exporter_sync_unstable_instants_total{source="default"} 0',
    );
    const text = await metrics.registry.metrics();
    expect(text).toMatch(
      /# HELP analytics_exporter_sync_records_quarantined_total .*records_quarantine \(payload_text; json_path and reason, or sqlstate and message\)/,
    );
    expect(text).toMatch(/# HELP analytics_exporter_sync_unstable_instants_total .*SYNC_MIN_SPLIT.*SYNC_WINDOW_ATTEMPTS/);
  });

  it('counts quarantined records and unstable instants from the observer hooks', async () => {
    const metrics = new ExporterMetrics({ processMetrics: false });
    const observer = metrics.syncObserver();
    observer.recordsQuarantined?.({ window, records: 3 });
    observer.recordsQuarantined?.({ window, records: 2 });
    observer.unstableInstant?.({ instant: window, records: 1200, attempt: 1 });
    expect(await sample(metrics, 'analytics_exporter_sync_records_quarantined_total')).toBe(
      'analytics_exporter_sync_records_quarantined_total{source="default"} 5',
    );
    expect(await sample(metrics, 'analytics_exporter_sync_unstable_instants_total')).toBe(
      'analytics_exporter_sync_unstable_instants_total{source="default"} 1',
    );
  });

  it("keeps each source's series apart", async () => {
    const metrics = new ExporterMetrics({ processMetrics: false });
    const production = metrics.syncObserver('production');
    metrics.syncObserver('sandbox');
    production.recordsQuarantined?.({ window, records: 4 });
    production.runStarted?.({ runId: 1, windows: [window] });
    const text = await metrics.registry.metrics();
    expect(text).toContain('analytics_exporter_sync_records_quarantined_total{source="production"} 4');
    expect(text).toContain('analytics_exporter_sync_records_quarantined_total{source="sandbox"} 0');
    expect(text).toContain('analytics_exporter_sync_running{source="production"} 1');
    expect(text).toContain('analytics_exporter_sync_running{source="sandbox"} 0');
  });

  it('counts records stored outside their window (RECORD_TIME_FIELD not the time E6 filters on) from each committed window, at 0 before', async () => {
    const metrics = new ExporterMetrics({ processMetrics: false });
    const observer = metrics.syncObserver('default');
    const name = 'analytics_exporter_sync_records_outside_window_total';
    expect(await sample(metrics, name)).toBe(`${name}{source="default"} 0`);
    const committed = { window, records: 40, quarantined: 0, totalRecords: 41, pages: 1, requests: 2, splits: 0, instants: 0 };
    const counts = { boundary: 1, untimed: 0, replaced: 0, durationSeconds: 0.1, watermark: window.end };
    observer.windowCommitted?.({ ...committed, ...counts, outside: 7 });
    observer.windowCommitted?.({ ...committed, ...counts, outside: 0 });
    expect(await sample(metrics, name)).toBe(`${name}{source="default"} 7`);
    expect(await metrics.registry.metrics()).toMatch(new RegExp(`# HELP ${name} .*RECORD_TIME_FIELD lies outside it`));
  });
});
