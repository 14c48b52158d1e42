import { describe, expect, it, vi } from 'vitest';
import { AbortedError } from '../../src/errors.js';
import { MockAgent } from 'undici';
import { silentLogger } from '../helpers/silent-logger.js';
import { ExporterMetrics } from '../../src/metrics/registry.js';
import { AnalyticsClient } from '../../src/upstream/analytics.js';
import { DECREASE_HOLD_MS, RequestBudget, type BudgetObserver, type RequestBudgetOptions } from '../../src/upstream/budget.js';
import { TokenClient } from '../../src/upstream/token.js';

/** UPSTREAM_MAX_BODY's default, in bytes. */
const MAX_BODY_BYTES = 64 * 1024 * 1024;

/** A fake clock: `sleep` resolves when `advance` moves the time past its deadline; nothing waits for real. */
class FakeTime {
  ms = 0;
  #sleepers: Array<{ until: number; resolve: () => void }> = [];

  readonly now = (): number => this.ms;

  readonly sleep = (ms: number, signal?: AbortSignal): Promise<void> =>
    new Promise<void>((resolve, reject) => {
      const sleeper = { until: this.ms + ms, resolve };
      this.#sleepers.push(sleeper);
      signal?.addEventListener('abort', () => {
        this.#sleepers = this.#sleepers.filter((s) => s !== sleeper);
        reject(new AbortedError('aborted'));
      });
    });

  /** Moves the clock forward by `ms`, one millisecond at a time, letting woken waiters run in between. */
  async advance(ms: number): Promise<void> {
    const end = this.ms + ms;
    await flush();
    while (this.ms < end) {
      this.ms++;
      const due = this.#sleepers.filter((s) => s.until <= this.ms);
      this.#sleepers = this.#sleepers.filter((s) => s.until > this.ms);
      for (const s of due) s.resolve();
      await flush();
    }
  }
}

/** Lets every promise chain that can go on run (one macrotask turn: no time passes on the fake clock). */
function flush(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

function budget(time: FakeTime, options: Partial<RequestBudgetOptions> = {}) {
  const rates: number[] = [];
  const waits: number[] = [];
  const b = new RequestBudget({
    ratePerSecond: 10,
    burst: 2,
    now: time.now,
    sleep: time.sleep,
    observer: { onRate: (r) => rates.push(r), onWait: (s) => waits.push(s) },
    ...options,
  });
  return { b, rates, waits };
}

/** Starts `n` acquisitions at once; returns the fake times at which each was granted (undefined while waiting). */
function acquireMany(b: RequestBudget, time: FakeTime, n: number): Array<number | undefined> {
  const granted: Array<number | undefined> = Array.from({ length: n }, () => undefined);
  for (let i = 0; i < n; i++) void b.acquire().then(() => (granted[i] = time.ms));
  return granted;
}

describe('RequestBudget: the token bucket', () => {
  it('lets a burst through at once, then paces at the rate, in order of arrival', async () => {
    const time = new FakeTime();
    const { b } = budget(time);
    const granted = acquireMany(b, time, 6);
    await time.advance(1000);
    expect(granted).toEqual([0, 0, 100, 200, 300, 400]);
  });

  it('refills while idle, but never beyond the burst', async () => {
    const time = new FakeTime();
    const { b } = budget(time, { burst: 3 });
    await time.advance(60_000);
    const granted = acquireMany(b, time, 5);
    await time.advance(500);
    expect(granted).toEqual([60_000, 60_000, 60_000, 60_100, 60_200]);
  });

  it('paces rates below one request a second', async () => {
    const time = new FakeTime();
    const { b } = budget(time, { ratePerSecond: 0.5, burst: 1 });
    const granted = acquireMany(b, time, 3);
    await time.advance(5000);
    expect(granted).toEqual([0, 2000, 4000]);
  });

  it('counts the seconds each request waited', async () => {
    const time = new FakeTime();
    const { b, waits } = budget(time);
    acquireMany(b, time, 5);
    await time.advance(1000);
    // Two from the burst waited nothing; the others 0.1, 0.2 and 0.3 s.
    expect(waits.map((s) => Math.round(s * 1000))).toEqual([100, 200, 300]);
  });

  it('gives up a wait when the signal aborts, without taking a token', async () => {
    const time = new FakeTime();
    const { b } = budget(time, { burst: 1 });
    await b.acquire();
    const controller = new AbortController();
    const aborted = b.acquire(controller.signal).catch((e: unknown) => e);
    const next = acquireMany(b, time, 1);
    await time.advance(50);
    controller.abort();
    expect(await aborted).toBeInstanceOf(AbortedError);
    await time.advance(100);
    // The token the aborted request would have had at 100 ms goes to the next one.
    expect(next).toEqual([100]);
    await expect(b.acquire(AbortSignal.abort())).rejects.toBeInstanceOf(AbortedError);
  });

  it('refuses a rate or burst it cannot pace', () => {
    const time = new FakeTime();
    expect(() => budget(time, { ratePerSecond: 0 })).toThrow(RangeError);
    expect(() => budget(time, { burst: 0.5 })).toThrow(RangeError);
  });
});

describe('RequestBudget: AIMD', () => {
  it('halves the rate on a 429, once for the 429s of one overload, down to 5% of the configured rate', async () => {
    const time = new FakeTime();
    const { b, rates } = budget(time, { ratePerSecond: 40, burst: 40 });
    b.throttled();
    b.throttled(); // answers to requests sent before the first 429 was seen
    expect(b.ratePerSecond).toBe(20);
    await time.advance(DECREASE_HOLD_MS);
    b.throttled();
    expect(b.ratePerSecond).toBe(10);
    for (let i = 0; i < 5; i++) {
      await time.advance(DECREASE_HOLD_MS);
      b.throttled();
    }
    expect(b.ratePerSecond).toBe(2);
    expect(rates).toEqual([40, 20, 10, 5, 2.5, 2]);
  });

  it('empties the bucket on a 429 and paces at the lowered rate', async () => {
    const time = new FakeTime();
    const { b } = budget(time, { ratePerSecond: 10, burst: 10 });
    b.throttled();
    const granted = acquireMany(b, time, 3);
    await time.advance(1000);
    expect(granted).toEqual([200, 400, 600]);
  });

  it('adds 10% of the configured rate per second of success, up to the configured rate', async () => {
    const time = new FakeTime();
    const { b, rates } = budget(time, { ratePerSecond: 20, burst: 20 });
    b.throttled(); // 10
    await time.advance(999);
    b.succeeded();
    expect(b.ratePerSecond).toBe(10);
    await time.advance(1);
    b.succeeded();
    expect(b.ratePerSecond).toBe(12);
    await time.advance(2500);
    b.succeeded(); // two more whole seconds; the half second carries over
    expect(b.ratePerSecond).toBe(16);
    await time.advance(500);
    b.succeeded();
    expect(b.ratePerSecond).toBe(18);
    await time.advance(10_000);
    b.succeeded();
    expect(b.ratePerSecond).toBe(20);
    expect(rates).toEqual([20, 10, 12, 16, 18, 20]);
  });

  it('counts the seconds of success from the last 429', async () => {
    const time = new FakeTime();
    const { b } = budget(time, { ratePerSecond: 10, burst: 10 });
    b.throttled(); // 5
    await time.advance(1500);
    b.throttled(); // 2.5, and the count of seconds starts again
    await time.advance(900);
    b.succeeded();
    expect(b.ratePerSecond).toBe(2.5);
    await time.advance(100);
    b.succeeded();
    expect(b.ratePerSecond).toBe(3.5);
  });

  it('applies a lowered rate to a request already waiting', async () => {
    const time = new FakeTime();
    const { b } = budget(time, { ratePerSecond: 10, burst: 1 });
    const granted = acquireMany(b, time, 2);
    await time.advance(50);
    b.throttled(); // 5/s and an empty bucket: the waiter needs 200 ms from here
    await time.advance(500);
    expect(granted).toEqual([0, 250]);
  });
});

describe('the analytics client on a budget (mock dispatcher)', () => {
  const PAGE = { pageNumber: 1, pageSize: 10, totalRecords: 1, totalPages: 1, data: [{ id: 1 }] };

  /** A client whose E6 answers come from `statuses` in turn (then 200), with a budget on a fake clock that waits by moving it. */
  async function clientWith(statuses: number[], observer: BudgetObserver = {}) {
    const agent = new MockAgent();
    agent.disableNetConnect();
    const origin = agent.get('https://stats.test');
    origin
      .intercept({ path: '/connect/token', method: 'POST' })
      .reply(200, { access_token: 'tok', token_type: 'Bearer', expires_in: 3600 }, { headers: { 'content-type': 'application/json' } })
      .persist();
    const answers = [...statuses];
    origin
      .intercept({ path: (p) => p.startsWith('/analytics?'), method: 'GET' })
      .reply(() => {
        const status = answers.shift() ?? 200;
        return status === 200
          ? { statusCode: 200, data: JSON.stringify(PAGE), responseOptions: { headers: { 'content-type': 'application/json' } } }
          : { statusCode: status, data: '{"error":"rate_limited"}', responseOptions: { headers: { 'retry-after': '0' } } };
      })
      .persist();
    let clock = 0;
    const sleep = async (ms: number): Promise<void> => void (clock += ms);
    const rates: number[] = [];
    const budget = new RequestBudget({
      ratePerSecond: 10,
      burst: 1,
      now: () => clock,
      sleep,
      observer: {
        onRate: (r) => {
          rates.push(r);
          observer.onRate?.(r);
        },
        onWait: (seconds) => observer.onWait?.(seconds),
      },
    });
    const retry = { maxAttempts: 5, maxDelayMs: 1000, sleep };
    const tokens = new TokenClient({
      tokenUrl: new URL('https://stats.test/connect/token'),
      clientId: 'id',
      clientSecret: 'secret-long-enough',
      authMethod: 'client_secret_post',
      scope: 'api.external',
      dispatcher: agent,
      retry,
      log: silentLogger,
      maxBodyBytes: MAX_BODY_BYTES,
    });
    const client = new AnalyticsClient({
      statisticsUrl: new URL('https://stats.test/'),
      tokens,
      dispatcher: agent,
      retry,
      log: silentLogger,
      budget,
      maxBodyBytes: MAX_BODY_BYTES,
    });
    return { client, budget, rates, clock: () => clock, close: () => agent.close() };
  }

  it('takes a token for every attempt, retries included, and lowers the pace on a 429', async () => {
    const { client, budget, rates, clock, close } = await clientWith([429, 503]);
    try {
      const acquired = vi.spyOn(budget, 'acquire');
      const page = await client.fetchPage({ startDate: new Date('2026-11-01T00:00:00Z'), pageSize: 10 });
      expect(page.data).toEqual([{ id: 1 }]);
      expect(acquired).toHaveBeenCalledTimes(3);
      // 10/s, burst 1: the first attempt goes at once; the 429 halves the pace and empties the
      // bucket, so each retry waits a fifth of a second.
      expect(rates).toEqual([10, 5]);
      expect(clock()).toBe(400);
    } finally {
      await close();
    }
  });

  it('reports the pace and the waits to the metrics, as AnalyticsClient.fromConfig wires them', async () => {
    const metrics = new ExporterMetrics({ processMetrics: false });
    const observer = metrics.clientObserver('default');
    const { client, close } = await clientWith([], { onRate: (r) => observer.onRateLimit?.(r), onWait: (s) => observer.onRateLimitWait?.(s) });
    try {
      for (let i = 0; i < 3; i++) await client.fetchPage({ startDate: new Date('2026-11-01T00:00:00Z'), pageSize: 10 });
      const values = async (name: string) => (await metrics.registry.getSingleMetric(name)!.get()).values.map((v) => v.value);
      expect(await values('analytics_exporter_upstream_rate_limit_requests_per_second')).toEqual([10]);
      // Burst 1 at 10/s: the second and third requests wait 0.1 s each.
      expect((await values('analytics_exporter_upstream_rate_limit_wait_seconds_total'))[0]).toBeCloseTo(0.2, 9);
    } finally {
      await close();
    }
  });
});
