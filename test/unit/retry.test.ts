import { describe, expect, it } from 'vitest';
import { AbortedError, ExporterError, UpstreamHttpError } from '../../src/errors.js';
import { parseRetryAfter, retryDelayMs, withRetries, type RetryPolicy } from '../../src/upstream/retry.js';

const retryable = (extra: { retryAfterMs?: number } = {}) => new UpstreamHttpError('analytics', 503, 'HTTP 503', { retryable: true, ...extra });

function recordingPolicy(overrides: Partial<RetryPolicy> = {}): RetryPolicy & { waits: number[] } {
  const waits: number[] = [];
  return {
    maxAttempts: 5,
    maxDelayMs: 30_000,
    random: () => 0.5,
    sleep: async (ms) => {
      waits.push(ms);
    },
    waits,
    ...overrides,
  };
}

describe('parseRetryAfter', () => {
  const now = Date.parse('2026-11-22T10:00:00Z');
  it('reads delay-seconds', () => expect(parseRetryAfter('7', now)).toBe(7000));
  it('reads an HTTP-date', () => expect(parseRetryAfter('Sun, 22 Nov 2026 10:00:12 GMT', now)).toBe(12_000));
  it('clamps a past date to zero', () => expect(parseRetryAfter('Sun, 22 Nov 2026 09:00:00 GMT', now)).toBe(0));
  it('ignores garbage and absence', () => {
    expect(parseRetryAfter('soon', now)).toBeUndefined();
    expect(parseRetryAfter('-3', now)).toBeUndefined();
    expect(parseRetryAfter(undefined, now)).toBeUndefined();
  });
});

describe('retryDelayMs', () => {
  const policy = { maxAttempts: 5, maxDelayMs: 4000, baseDelayMs: 250, random: () => 0.999 };
  it('grows exponentially up to the cap', () => {
    expect([1, 2, 3, 4, 5, 6].map((n) => retryDelayMs(n, retryable(), policy))).toEqual([249, 499, 999, 1998, 3996, 3996]);
  });
  it('uses full jitter', () => {
    expect(retryDelayMs(3, retryable(), { ...policy, random: () => 0 })).toBe(0);
  });
  it("honours the server's Retry-After over backoff", () => {
    expect(retryDelayMs(1, retryable({ retryAfterMs: 3000 }), policy)).toBe(3000);
  });
  it('gives up when Retry-After is beyond the cap', () => {
    expect(retryDelayMs(1, retryable({ retryAfterMs: 60_000 }), policy)).toBeUndefined();
  });
});

describe('withRetries', () => {
  it('retries retryable errors and returns the first success', async () => {
    const policy = recordingPolicy();
    let calls = 0;
    const result = await withRetries(async () => {
      calls++;
      if (calls < 3) throw retryable({ retryAfterMs: 1000 });
      return 'done';
    }, policy);
    expect(result).toBe('done');
    expect(calls).toBe(3);
    expect(policy.waits).toEqual([1000, 1000]);
  });

  it('stops after maxAttempts with the last error', async () => {
    const policy = recordingPolicy({ maxAttempts: 3 });
    let calls = 0;
    await expect(
      withRetries(async () => {
        calls++;
        throw retryable();
      }, policy),
    ).rejects.toMatchObject({ code: 'ERR_UPSTREAM_HTTP', status: 503 });
    expect(calls).toBe(3);
    expect(policy.waits).toHaveLength(2);
  });

  it('does not retry final errors', async () => {
    let calls = 0;
    await expect(
      withRetries(async () => {
        calls++;
        throw new UpstreamHttpError('analytics', 400, 'HTTP 400');
      }, recordingPolicy()),
    ).rejects.toMatchObject({ status: 400 });
    expect(calls).toBe(1);
  });

  it('rethrows foreign errors untouched', async () => {
    const boom = new TypeError('bug');
    await expect(withRetries(async () => Promise.reject(boom), recordingPolicy())).rejects.toBe(boom);
  });

  it('reports each retry', async () => {
    const events: number[] = [];
    let calls = 0;
    await withRetries(
      async () => {
        if (++calls < 3) throw retryable();
        return 1;
      },
      recordingPolicy(),
      { onRetry: (e) => events.push(e.attempt) },
    );
    expect(events).toEqual([1, 2]);
  });

  it('aborts a wait when the signal fires', async () => {
    const controller = new AbortController();
    const started = Date.now();
    const run = withRetries(
      async () => {
        throw retryable({ retryAfterMs: 20_000 });
      },
      { maxAttempts: 3, maxDelayMs: 30_000 },
      { signal: controller.signal },
    );
    setTimeout(() => controller.abort(), 20);
    await expect(run).rejects.toBeInstanceOf(AbortedError);
    expect(Date.now() - started).toBeLessThan(5000);
    expect(new AbortedError()).toBeInstanceOf(ExporterError);
  });
});
