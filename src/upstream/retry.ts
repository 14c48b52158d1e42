/**
 * Bounded retries with exponential backoff and full jitter, honouring a server's Retry-After, for
 * E0, E6 and E7. Design: docs/design/upstream-requests.md ("Retries").
 */
import { setTimeout as delay } from 'node:timers/promises';
import { AbortedError, ExporterError, TokenRequestError, coerceError, type Endpoint, type FailureReason } from '../errors.js';
import { failureReason } from '../failures.js';
import type { Logger } from '../log.js';

/** First backoff step; attempt n waits a random time in [0, min(cap, BASE · 2^(n-1))]. */
const RETRY_BASE_DELAY_MS = 250;

export interface RetryPolicy {
  /** The first included (1 = no retries). */
  maxAttempts: number;
  /** Cap on one delay, Retry-After included, in milliseconds. */
  maxDelayMs: number;
  baseDelayMs?: number;
  /** Jitter in [0, 1). */
  random?: () => number;
  /** Rejects with {@link AbortedError} when `signal` aborts. */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
}

export interface RetryEvent {
  /** The one that failed, from 1. */
  attempt: number;
  error: ExporterError;
  delayMs: number;
}

/** Rejects with {@link AbortedError} when `signal` aborts first. */
export async function abortableSleep(ms: number, signal?: AbortSignal): Promise<void> {
  try {
    await delay(ms, undefined, { signal });
  } catch (err) {
    throw new AbortedError('aborted while waiting to retry', { cause: err });
  }
}

/** A Retry-After value (RFC 9110 §10.2.3) as milliseconds ≥ 0 from `now` (epoch ms); undefined when absent or bad. */
export function parseRetryAfter(value: string | string[] | undefined, now: number): number | undefined {
  const text = Array.isArray(value) ? value[0] : value;
  if (text === undefined) return undefined;
  const trimmed = text.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed) * 1000;
  // All three HTTP-date forms start with a day name; Date.parse alone would take "-3" as a year.
  if (!/^[A-Za-z]{3}/.test(trimmed)) return undefined;
  const date = Date.parse(trimmed);
  if (Number.isNaN(date)) return undefined;
  return Math.max(0, date - now);
}

/** Milliseconds before attempt `failedAttempt + 1`; undefined when Retry-After exceeds the cap (give up). */
export function retryDelayMs(failedAttempt: number, error: ExporterError, policy: RetryPolicy): number | undefined {
  if (error.retryAfterMs !== undefined) {
    return error.retryAfterMs <= policy.maxDelayMs ? error.retryAfterMs : undefined;
  }
  const base = policy.baseDelayMs ?? RETRY_BASE_DELAY_MS;
  const ceiling = Math.min(policy.maxDelayMs, base * 2 ** (failedAttempt - 1));
  return Math.floor((policy.random ?? Math.random)() * ceiling);
}

/**
 * Runs `attempt` (given its number, from 1) until it succeeds, throws a non-retryable error, or attempts run out.
 * @throws the last attempt's error (a non-Exporter one at once); {@link AbortedError} on `signal`.
 */
export async function withRetries<T>(
  attempt: (attemptNumber: number) => Promise<T>,
  policy: RetryPolicy,
  options: { signal?: AbortSignal; onRetry?: (event: RetryEvent) => void } = {},
): Promise<T> {
  const sleep = policy.sleep ?? abortableSleep;
  for (let n = 1; ; n++) {
    try {
      return await attempt(n);
    } catch (thrown) {
      const error = coerceError(thrown);
      if (!(error instanceof ExporterError) || !error.retryable || n >= policy.maxAttempts) throw error;
      if (options.signal?.aborted) throw new AbortedError('aborted before retrying', { cause: error });
      const delayMs = retryDelayMs(n, error, policy);
      if (delayMs === undefined) throw error;
      options.onRetry?.({ attempt: n, error, delayMs });
      await sleep(delayMs, options.signal);
    }
  }
}

/** {@link failureReason}, but a refused token request (E0) names its status (`http_503`). */
function attemptReason(error: ExporterError): FailureReason {
  return error instanceof TokenRequestError && error.status !== undefined ? `http_${error.status}` : failureReason(error);
}

/** Logs one retry at warn, the same for every endpoint (`status` null without a response). */
export function logRetry(log: Logger, endpoint: Endpoint, event: RetryEvent, maxAttempts: number): void {
  const { attempt, error, delayMs } = event;
  log.warn(
    { endpoint, attempt, maxAttempts, delayMs, status: error.status ?? null, reason: attemptReason(error), err: error },
    'upstream request failed; retrying',
  );
}
