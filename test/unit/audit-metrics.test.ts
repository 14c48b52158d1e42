/**
 * The audit's metrics (src/metrics/registry.ts, serve's AUDIT_SCHEDULE): at 0 from the start for a
 * serve that audits, so the alert and increase() see them; then what each audit found, repaired and
 * left, per source.
 */
import { describe, expect, it } from 'vitest';
import { ExporterMetrics } from '../../src/metrics/registry.js';
import type { AuditResult } from '../../src/sync/audit/source.js';

const HOUR = 3_600_000;
const T0 = Date.parse('2026-10-01T00:00:00Z');

async function sample(metrics: ExporterMetrics, series: string): Promise<number | undefined> {
  const line = (await metrics.registry.metrics()).split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.split(' ').pop());
}

const drift = (h: number) => ({ start: T0 + h * HOUR, end: T0 + (h + 1) * HOUR, stored: 2, upstream: 3 });

describe('audit metrics', () => {
  it('are exported at 0 for an audited source, before any audit', async () => {
    const metrics = new ExporterMetrics({ processMetrics: false });
    metrics.auditScheduled('a');
    expect(await sample(metrics, 'analytics_exporter_audit_drift_windows{source="a"}')).toBe(0);
    expect(await sample(metrics, 'analytics_exporter_audit_windows_repaired_total{source="a"}')).toBe(0);
    expect(await sample(metrics, 'analytics_exporter_audit_requests_total{source="a"}')).toBe(0);
    // Not known before an audit: no series rather than a made-up time.
    expect(await sample(metrics, 'analytics_exporter_sync_verified_through_timestamp_seconds{source="a"}')).toBeUndefined();
    expect(await sample(metrics, 'analytics_exporter_audit_last_run_timestamp_seconds{source="a"}')).toBeUndefined();
  });

  it('record what each audit found, repaired and left, per source', async () => {
    const metrics = new ExporterMetrics({ processMetrics: false });
    const repaired: AuditResult = { windows: 48, drifted: [drift(3), drift(9)], left: [], requests: 20, verifiedThrough: T0 + 48 * HOUR, repairs: [] };
    const failed: AuditResult = { windows: 48, drifted: [drift(5)], left: [drift(5)], requests: 12, verifiedThrough: T0 + 5 * HOUR, repairs: [] };
    metrics.recordAudit('a', repaired);
    metrics.recordAudit('b', failed);
    metrics.recordAudit('a', { ...failed, drifted: [], left: [], requests: 7, verifiedThrough: T0 + 48 * HOUR });
    expect(await sample(metrics, 'analytics_exporter_audit_windows_repaired_total{source="a"}')).toBe(2);
    expect(await sample(metrics, 'analytics_exporter_audit_drift_windows{source="a"}')).toBe(0);
    expect(await sample(metrics, 'analytics_exporter_audit_requests_total{source="a"}')).toBe(27);
    expect(await sample(metrics, 'analytics_exporter_sync_verified_through_timestamp_seconds{source="a"}')).toBe((T0 + 48 * HOUR) / 1000);
    expect(await sample(metrics, 'analytics_exporter_audit_drift_windows{source="b"}')).toBe(1);
    expect(await sample(metrics, 'analytics_exporter_audit_windows_repaired_total{source="b"}')).toBe(0);
    expect(await sample(metrics, 'analytics_exporter_sync_verified_through_timestamp_seconds{source="b"}')).toBe((T0 + 5 * HOUR) / 1000);
    expect(await sample(metrics, 'analytics_exporter_audit_last_run_timestamp_seconds{source="b"}')).toBeGreaterThan(Date.now() / 1000 - 60);
  });
});
