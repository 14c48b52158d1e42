import { describe, expect, it } from 'vitest';
import { AbortedError } from '../../src/errors.js';
import { DECREASE_HOLD_MS, RequestBudget, type RequestBudgetOptions } from '../../src/upstream/budget.js';

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
