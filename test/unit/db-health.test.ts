import { Gauge, Registry } from 'prom-client';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { DatabaseHealth } from '../../src/serve/health.js';
import { describeDatabase } from '../../src/db/pool.js';
import { isDatabaseUnavailable } from '../../src/failures.js';
import { TokenRequestError, UpstreamNetworkError } from '../../src/errors.js';
import { silentLogger } from '../helpers/silent-logger.js';
import { SyncScheduler } from '../../src/serve/cron.js';
import { untilTrue } from '../helpers/wait.js';

function databaseUp(registry: Registry): Gauge {
  return new Gauge({ name: 'analytics_exporter_database_up', help: 'database up', registers: [registry] });
}

async function gauge(registry: Registry): Promise<number | undefined> {
  const metric = await registry.getSingleMetric('analytics_exporter_database_up')?.get();
  return metric?.values[0]?.value;
}

const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });

describe('DatabaseHealth', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('probes with doubling delays up to the cap, then reports up and asks for the owed sync once', async () => {
    // Fake time: the backoff's waits are exact and take no real time.
    vi.useFakeTimers({ now: 0 });
    const registry = new Registry();
    const probes: number[] = [];
    let failuresLeft = 4;
    let recovered = 0;
    const health = new DatabaseHealth({
      up: databaseUp(registry),
      log: silentLogger,
      target: 'db:5432/x',
      initialDelayMs: 10,
      maxDelayMs: 40,
      probe: async () => {
        probes.push(Date.now());
        if (failuresLeft-- > 0) throw refused;
      },
      onRecovered: () => recovered++,
    });
    health.unreachable(refused, { syncOwed: true });
    health.unreachable(refused); // a second report joins the same retry loop
    expect(health.up).toBe(false);
    expect(await gauge(registry)).toBe(0);
    await vi.advanceTimersByTimeAsync(1_000);
    expect(recovered).toBe(1);
    expect(health.up).toBe(true);
    expect(await gauge(registry)).toBe(1);
    // Waits of 10, 20, 40, 40, 40 ms: doubling, capped at 40.
    expect(probes).toEqual([10, 30, 70, 110, 150]);
    health.stop();
  });

  it('does not ask for a sync when none was owed, and a reachable() cuts a long wait short', async () => {
    let recovered = 0;
    let probes = 0;
    const health = new DatabaseHealth({
      up: databaseUp(new Registry()),
      log: silentLogger,
      target: 'db:5432/x',
      initialDelayMs: 60_000,
      probe: async () => void probes++,
      onRecovered: () => recovered++,
    });
    health.unreachable(refused);
    health.reachable();
    await untilTrue('the database reported up', () => health.up, 5_000);
    expect(probes).toBe(1);
    expect(recovered).toBe(0);
    health.stop();
  });

  it('stops probing on stop()', async () => {
    let probes = 0;
    const health = new DatabaseHealth({
      up: databaseUp(new Registry()),
      log: silentLogger,
      target: 'db:5432/x',
      initialDelayMs: 5,
      probe: async () => {
        probes++;
        throw refused;
      },
      onRecovered: () => undefined,
    });
    vi.useFakeTimers();
    health.unreachable(refused);
    await vi.advanceTimersByTimeAsync(20);
    expect(probes).toBeGreaterThanOrEqual(2);
    health.stop();
    const after = probes;
    await vi.advanceTimersByTimeAsync(60_000);
    expect(probes).toBe(after);
    expect(health.up).toBe(false);
  });
});

describe('database error helpers', () => {
  it('name a database by host, port and name, never by its credentials', () => {
    expect(describeDatabase('postgres://user:S3cret@db.example.com:6543/analytics?sslmode=require')).toBe('db.example.com:6543/analytics');
    expect(describeDatabase('postgres://user:S3cret@db.example.com/analytics')).toBe('db.example.com:5432/analytics');
    expect(describeDatabase('not a url with S3cret')).toBe('the configured database');
  });

  it('tell an unreachable or restarting database from a query error', () => {
    expect(isDatabaseUnavailable(refused)).toBe(true);
    expect(isDatabaseUnavailable(Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' }))).toBe(true);
    expect(isDatabaseUnavailable(Object.assign(new Error('the database system is starting up'), { code: '57P03' }))).toBe(true);
    expect(isDatabaseUnavailable(new Error('Connection terminated unexpectedly'))).toBe(true);
    expect(isDatabaseUnavailable(new Error('migrating schema x: failed', { cause: refused }))).toBe(true);
    expect(isDatabaseUnavailable(Object.assign(new Error('syntax error at or near "selec"'), { code: '42601' }))).toBe(false);
    expect(isDatabaseUnavailable(Object.assign(new Error('canceling statement due to lock timeout'), { code: '55P03' }))).toBe(false);
    expect(isDatabaseUnavailable(undefined)).toBe(false);
  });

  it('never take a platform host that is down for the database', () => {
    // A source's upstream refusing connections fails its run with these: taken for the database,
    // serve would probe it, call it recovered at once and rerun every source's sync in a loop.
    const e6 = new UpstreamNetworkError('analytics', 'E6 http://127.0.0.1:1/analytics: ECONNREFUSED', { cause: refused });
    const e0 = new TokenRequestError('E0 http://127.0.0.1:1/connect/token: ECONNREFUSED', { cause: refused });
    expect(isDatabaseUnavailable(e6)).toBe(false);
    expect(isDatabaseUnavailable(e0)).toBe(false);
    expect(isDatabaseUnavailable(new Error('sync run failed', { cause: e6 }))).toBe(false);
    expect(isDatabaseUnavailable(refused)).toBe(true);
  });
});

describe('SyncScheduler.stop with a drain timeout', () => {
  it('returns false at the timeout when the aborted run does not end, true when it does', async () => {
    const stuck = new SyncScheduler({ schedule: '0 0 1 1 *', log: silentLogger, run: () => new Promise(() => undefined) });
    void stuck.trigger('test');
    const started = performance.now();
    expect(await stuck.stop(100)).toBe(false);
    expect(performance.now() - started).toBeLessThan(1_000);

    const prompt = new SyncScheduler({
      schedule: '0 0 1 1 *',
      log: silentLogger,
      run: (signal) => new Promise((resolve) => signal.addEventListener('abort', () => resolve({ status: 'locked' }))),
    });
    void prompt.trigger('test');
    expect(await prompt.stop(5_000)).toBe(true);
  });
});
