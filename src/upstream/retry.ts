/**
 * Bounded retries with exponential backoff and full jitter, honouring a server's
 * Retry-After. Shared by the token client (E0) and the analytics client (E6, E7).
 */
import { setTimeout as delay } from 'node:timers/promises';
import { AbortedError, ExporterError, TokenRequestError, coerceError, type Endpoint, type FailureReason } from '../errors.js';
import { failureReason } from '../failures.js';
import type { Logger } from '../log.js';

/** First backoff step; attempt n waits a random time in [0, min(cap, BASE · 2^(n-1))]. */
export const RETRY_BASE_DELAY_MS = 250;

export interface RetryPolicy {
  /** Attempts in all, the first included (1 = no retries). */
  maxAttempts: number;
  /** Cap on one delay, the server's Retry-After included, in milliseconds. */
  maxDelayMs: number;
  baseDelayMs?: number;
  /** Source of jitter in [0, 1); tests pin it. */
  random?: () => number;
  /** Waits `ms`, rejecting with {@link AbortedError} when `signal` aborts; tests replace it. */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
}

/** Details handed to `onRetry` before each wait. */
export interface RetryEvent {
  /** The attempt that failed, from 1. */
  attempt: number;
  error: ExporterError;
  /** How long the client waits before the next attempt, in milliseconds. */
  delayMs: number;
}

/** Waits `ms` milliseconds; rejects with {@link AbortedError} when `signal` aborts first. */
export async function abortableSleep(ms: number, signal?: AbortSignal): Promise<void> {
  try {
    await delay(ms, undefined, { signal });
  } catch (err) {
    throw new AbortedError('aborted while waiting to retry', { cause: err });
  }
}

/**
 * Parses a Retry-After header value (RFC 9110 §10.2.3): delay-seconds or an HTTP-date.
 *
 * @param now current time in milliseconds since the epoch.
 * @returns milliseconds from `now` (never negative), or `undefined` when absent or unparsable.
 */
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

/**
 * The delay before attempt `failedAttempt + 1`: the server's Retry-After when it sent one,
 * otherwise full-jitter exponential backoff.
 *
 * @returns milliseconds, or `undefined` when the server asked for a wait longer than the cap
 *   (retrying earlier than asked would only be refused again, so the caller gives up instead).
 */
export function retryDelayMs(failedAttempt: number, error: ExporterError, policy: RetryPolicy): number | undefined {
  if (error.retryAfterMs !== undefined) {
    return error.retryAfterMs <= policy.maxDelayMs ? error.retryAfterMs : undefined;
  }
  const base = policy.baseDelayMs ?? RETRY_BASE_DELAY_MS;
  const ceiling = Math.min(policy.maxDelayMs, base * 2 ** (failedAttempt - 1));
  return Math.floor((policy.random ?? Math.random)() * ceiling);
}

/**
 * Runs `attempt` until it succeeds, throws a non-retryable error, or the attempts run out.
 *
 * @param attempt one try; it receives the attempt number (from 1) and throws
 *   {@link ExporterError}s whose `retryable` and `retryAfterMs` steer the loop.
 * @throws the last attempt's error (anything non-Exporter is rethrown at once, untouched);
 *   {@link AbortedError} when `signal` aborts during a wait.
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

/**
 * The fault of one failed attempt: {@link failureReason}, except that a refused token request (E0)
 * names its status (`http_503`) rather than `token`, which is what a failed token means to the
 * request that needed it.
 */
export function attemptReason(error: ExporterError): FailureReason {
  return error instanceof TokenRequestError && error.status !== undefined ? `http_${error.status}` : failureReason(error);
}

/**
 * Logs one retry, the same for every endpoint (E0 token, E6, E7): at warn,
 * `upstream request failed; retrying`, with `endpoint`, `attempt` (the one that failed, from 1),
 * `maxAttempts`, `delayMs` (the wait before the next attempt), `status` (HTTP status, null when
 * there was no response), `reason` ({@link attemptReason}, the value of the metrics' `reason`
 * label) and `err` (the error, serialised by the logger).
 */
export function logRetry(log: Logger, endpoint: Endpoint, event: RetryEvent, maxAttempts: number): void {
  const { attempt, error, delayMs } = event;
  log.warn(
    { endpoint, attempt, maxAttempts, delayMs, status: error.status ?? null, reason: attemptReason(error), err: error },
    'upstream request failed; retrying',
  );
}
