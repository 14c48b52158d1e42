import { afterEach, describe, expect, it, vi } from 'vitest';
import { silentLogger } from '../helpers/silent-logger.js';
import { SyncScheduler } from '../../src/serve/cron.js';
import type { SyncResult } from '../../src/sync/run/run.js';

const done: SyncResult = { status: 'locked' };

describe('SyncScheduler', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('fires on the cron schedule and never overlaps runs', async () => {
    // Fake time: node-cron's timers and clock, and the runs' sleeps, advance without waiting.
    vi.useFakeTimers({ now: new Date('2026-11-24T12:00:00.500Z') });
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
        await new Promise((resolve) => setTimeout(resolve, 2300)); // longer than two ticks (the global, faked setTimeout)
        active--;
        return done;
      },
    });
    scheduler.start();
    await vi.advanceTimersByTimeAsync(5200);
    const stopped = scheduler.stop();
    await vi.advanceTimersByTimeAsync(3000);
    await stopped;
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
