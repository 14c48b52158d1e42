/**
 * A scheduled tick that does not sync is counted and said: `sync_skipped_total{source,reason}`
 * with reason `running` (this scheduler's run still going) or `locked` (the run found the source's
 * lock held by another process), the latter logged at info naming the source.
 */
import { describe, expect, it } from 'vitest';
import { createLogger } from '../../src/log.js';
import { ExporterMetrics } from '../../src/metrics/registry.js';
import { SyncScheduler, type SkipReason } from '../../src/serve/cron.js';
import type { SyncResult } from '../../src/sync/run/run.js';
import { captureLog } from '../helpers/log-capture.js';

const succeeded = { status: 'succeeded', runId: 1 } as unknown as SyncResult;

describe('skipped sync ticks', () => {
  it('counts a tick whose run found the lock held as locked, and logs it at info naming the source', async () => {
    const destination = captureLog();
    const skipped: SkipReason[] = [];
    const log = createLogger('info', { format: 'json', destination }).child({ source: 'production' });
    const results: SyncResult[] = [{ status: 'locked' }, succeeded];
    const scheduler = new SyncScheduler({
      schedule: '0 0 1 1 *',
      source: 'production',
      log,
      onSkipped: (reason) => skipped.push(reason),
      run: () => Promise.resolve(results.shift()!),
    });
    await expect(scheduler.trigger('schedule')).resolves.toEqual({ status: 'locked' });
    await expect(scheduler.trigger('schedule')).resolves.toBe(succeeded);
    await scheduler.stop();
    expect(skipped).toEqual(['locked']);
    const lines = destination.lines().filter((l) => /skipped/.test(String(l.msg)));
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ level: 'info', source: 'production', reason: 'schedule' });
    expect(lines[0]!.msg).toMatch(/another process holds the sync lock of source production/);
  });

  it('counts a tick that comes while the run is still going as running', async () => {
    const skipped: SkipReason[] = [];
    let finish: (r: SyncResult) => void = () => undefined;
    const scheduler = new SyncScheduler({
      schedule: '0 0 1 1 *',
      log: createLogger('silent'),
      onSkipped: (reason) => skipped.push(reason),
      run: () => new Promise<SyncResult>((resolve) => (finish = resolve)),
    });
    const first = scheduler.trigger('schedule');
    await expect(scheduler.trigger('schedule')).resolves.toBeUndefined();
    finish(succeeded);
    await first;
    await scheduler.stop();
    expect(skipped).toEqual(['running']);
  });

  it('exports both reasons at 0 per source from the start, and each source apart', async () => {
    const metrics = new ExporterMetrics({ processMetrics: false });
    metrics.syncObserver('production');
    metrics.syncObserver('sandbox');
    metrics.sync.skipped.inc({ source: 'production', reason: 'locked' });
    const text = await metrics.registry.metrics();
    expect(text).toContain('analytics_exporter_sync_skipped_total{source="production",reason="locked"} 1');
    expect(text).toContain('analytics_exporter_sync_skipped_total{source="production",reason="running"} 0');
    expect(text).toContain('analytics_exporter_sync_skipped_total{source="sandbox",reason="locked"} 0');
    expect(text).toContain('analytics_exporter_sync_skipped_total{source="sandbox",reason="running"} 0');
    expect(text).toMatch(/# HELP analytics_exporter_sync_skipped_total .*locked \(another process held the source's sync lock/);
  });
});
