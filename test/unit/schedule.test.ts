import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/log.js';
import { SyncScheduler } from '../../src/sync/schedule.js';
import type { SyncResult } from '../../src/sync/run.js';

const done: SyncResult = { status: 'locked' };

describe('SyncScheduler', () => {
  it('fires on the cron schedule and never overlaps runs', async () => {
    let active = 0;
    let maxActive = 0;
    let runs = 0;
    let skipped = 0;
    const scheduler = new SyncScheduler({
      schedule: '* * * * * *', // every second
      log: silentLogger,
      onSkipped: () => skipped++,
      run: async () => {
        runs++;
        maxActive = Math.max(maxActive, ++active);
        await sleep(2300); // longer than two ticks
        active--;
        return done;
      },
    });
    scheduler.start();
    await sleep(5200);
    await scheduler.stop();
    expect(runs).toBeGreaterThanOrEqual(2);
    expect(maxActive).toBe(1);
    expect(skipped).toBeGreaterThanOrEqual(2);
  });

  it('aborts the run in progress on stop and waits for it', async () => {
    let aborted = false;
    const scheduler = new SyncScheduler({
      schedule: '0 0 1 1 *',
      log: silentLogger,
      run: (signal) =>
        new Promise((resolve) => {
          signal.addEventListener('abort', () => {
            aborted = true;
            setTimeout(() => resolve(done), 50);
          });
        }),
    });
    const run = scheduler.trigger('startup');
    expect(scheduler.running).toBe(true);
    await scheduler.stop();
    expect(aborted).toBe(true);
    expect(scheduler.running).toBe(false);
    await expect(run).resolves.toBe(done);
    await expect(scheduler.trigger('schedule')).resolves.toBeUndefined();
  });

  it('never rejects when a run throws', async () => {
    const scheduler = new SyncScheduler({ schedule: '0 0 1 1 *', log: silentLogger, run: () => Promise.reject(new Error('database down')) });
    await expect(scheduler.trigger('startup')).resolves.toBeUndefined();
    expect(scheduler.running).toBe(false);
    await scheduler.stop();
  });
});
