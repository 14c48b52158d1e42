/**
 * The partition arithmetic of src/sync/store/pg/partitions.ts (ranges, names, what a run must create) and
 * the planning's skip of expired windows (subtractWindows in src/sync/windows.ts).
 */
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { ExporterMetrics } from '../../src/metrics/registry.js';
import { missingPartitions, partitionName, partitionRange } from '../../src/sync/store/pg/partitions.js';
import { subtractWindows } from '../../src/sync/windows.js';

const t = (text: string) => Date.parse(text);
const iso = (w: { start: number; end: number }) => [new Date(w.start).toISOString(), new Date(w.end).toISOString()];

describe('partitionRange', () => {
  it('cuts UTC calendar months, ISO weeks (Monday to Monday) and days', () => {
    expect(iso(partitionRange(t('2026-12-31T23:59:59.999Z'), 'month'))).toEqual(['2026-12-01T00:00:00.000Z', '2027-01-01T00:00:00.000Z']);
    expect(iso(partitionRange(t('2026-02-01T00:00:00Z'), 'month'))).toEqual(['2026-02-01T00:00:00.000Z', '2026-03-01T00:00:00.000Z']);
    // 2026-11-01 is a Sunday, 2026-11-02 a Monday.
    expect(iso(partitionRange(t('2026-11-01T12:00:00Z'), 'week'))).toEqual(['2026-10-26T00:00:00.000Z', '2026-11-02T00:00:00.000Z']);
    expect(iso(partitionRange(t('2026-11-02T00:00:00Z'), 'week'))).toEqual(['2026-11-02T00:00:00.000Z', '2026-11-09T00:00:00.000Z']);
    expect(iso(partitionRange(t('1969-12-31T23:00:00Z'), 'day'))).toEqual(['1969-12-31T00:00:00.000Z', '1970-01-01T00:00:00.000Z']);
  });
});

describe('partitionName', () => {
  it('names a partition after its range, with the time only where a bound is not midnight', () => {
    expect(partitionName({ start: t('2026-11-01T00:00:00Z'), end: t('2026-12-01T00:00:00Z') })).toBe('records_20261101_20261201');
    expect(partitionName({ start: t('2026-11-01T06:30:00Z'), end: t('2026-11-02T00:00:00Z') })).toBe('records_20261101T063000_20261102');
  });
});

describe('missingPartitions', () => {
  const october = { start: t('2026-10-01T00:00:00Z'), end: t('2026-11-01T00:00:00Z') };

  it('asks for one partition per uncovered interval, none for starts already covered', () => {
    const starts = [t('2026-10-03T00:00:00Z'), t('2026-11-20T00:00:00Z'), t('2026-11-03T00:00:00Z'), t('2026-12-01T00:00:00Z')];
    expect(missingPartitions(starts, [october], 'month').map((p) => p.name)).toEqual(['records_20261101_20261201', 'records_20261201_20270101']);
    expect(missingPartitions([t('2026-10-31T23:00:00Z')], [october], 'day')).toEqual([]);
  });

  it('cuts a new partition short where it would overlap an existing one, on either side', () => {
    // The ISO week of Sunday 2026-11-01 begins in October; the day partition of 11-02 lies in the next week's range.
    const nov2 = { start: t('2026-11-02T00:00:00Z'), end: t('2026-11-03T00:00:00Z') };
    expect(missingPartitions([t('2026-11-01T10:00:00Z')], [october, nov2], 'week').map((p) => p.name)).toEqual(['records_20261101_20261102']);
    expect(missingPartitions([t('2026-11-03T00:00:00Z')], [october, nov2], 'month').map((p) => p.name)).toEqual(['records_20261103_20261201']);
  });
});

describe('subtractWindows', () => {
  const w = (a: number, b: number) => ({ start: a, end: b });

  it('removes the parts of planned windows that expired windows cover', () => {
    expect(subtractWindows([w(0, 10), w(10, 20), w(20, 30)], [w(5, 12), w(25, 40)])).toEqual([w(0, 5), w(12, 20), w(20, 25)]);
    expect(subtractWindows([w(0, 10)], [w(2, 3), w(6, 7)])).toEqual([w(0, 2), w(3, 6), w(7, 10)]);
    expect(subtractWindows([w(0, 10)], [w(0, 10)])).toEqual([]);
    expect(subtractWindows([w(0, 10)], [w(10, 20)])).toEqual([w(0, 10)]);
  });
});

describe('PARTITION_INTERVAL and RETENTION', () => {
  it('default to monthly partitions and no retention, and refuse anything else than documented', () => {
    expect(loadConfig({}).tables).toMatchObject({ partitionInterval: 'month', retentionMs: undefined });
    expect(loadConfig({ PARTITION_INTERVAL: 'week', RETENTION: '90d' }).tables).toMatchObject({
      partitionInterval: 'week',
      retentionMs: 90 * 86_400_000,
    });
    expect(() => loadConfig({ PARTITION_INTERVAL: 'year' })).toThrow(/PARTITION_INTERVAL must be 'month', 'week' or 'day'/);
    expect(() => loadConfig({ RETENTION: '0' })).toThrow(/RETENTION must be a positive duration/);
  });
});

describe('analytics_exporter_retention_partitions_dropped_total', () => {
  it('is 0 before any run and counts the partitions the observer reports', async () => {
    const metrics = new ExporterMetrics({ processMetrics: false });
    const line = async () => (await metrics.registry.metrics()).split('\n').find((l) => l.startsWith('analytics_exporter_retention_partitions_dropped_total '));
    expect(await line()).toBe('analytics_exporter_retention_partitions_dropped_total 0');
    const p = { name: 'records_20260801_20260901', start: t('2026-08-01T00:00:00Z'), end: t('2026-09-01T00:00:00Z'), windows: 31 };
    metrics.syncObserver().partitionsDropped?.({ partitions: [p, { ...p, name: 'records_20260901_20261001' }] });
    expect(await line()).toBe('analytics_exporter_retention_partitions_dropped_total 2');
  });
});
