/** The metrics of each source's upstream requests (E0, E6, E7), fed by the client's ClientObserver. */
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { ClientObserver } from '../upstream/analytics.js';

/** Seconds: 5 ms to 30 s. */
const REQUEST_BUCKETS_SECONDS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

export class ClientMetrics {
  readonly requestDuration: Histogram<'source' | 'endpoint' | 'code'>;
  readonly retries: Counter<'source' | 'endpoint'>;
  readonly attemptFailures: Counter<'source' | 'endpoint' | 'reason'>;
  readonly rateLimit: Gauge<'source'>;
  readonly rateLimitWait: Counter<'source'>;
  readonly tokenRequests: Counter<'source' | 'outcome'>;
  readonly clockSkew: Gauge<'source'>;

  constructor(registry: Registry, prefix: string) {
    this.requestDuration = new Histogram({
      name: `${prefix}upstream_request_duration_seconds`,
      help: 'Duration of HTTP requests to the platform analytics API, by endpoint (analytics = E6, prometheus = E7) and status code (error = no response).',
      labelNames: ['source', 'endpoint', 'code'] as const,
      buckets: REQUEST_BUCKETS_SECONDS,
      registers: [registry],
    });
    this.retries = new Counter({
      name: `${prefix}upstream_retries_total`,
      help: 'Upstream requests retried after a transient failure, by endpoint.',
      labelNames: ['source', 'endpoint'] as const,
      registers: [registry],
    });
    this.attemptFailures = new Counter({
      name: `${prefix}upstream_attempt_failures_total`,
      help:
        'Failed attempts of upstream requests, retried ones included, by endpoint (token = E0, analytics = E6, prometheus = E7) and reason ' +
        '(network, timeout, http_<status>, invalid_json, content_type, invalid_envelope, inconsistent_page, response_too_large, content_encoding, invalid_body, ' +
        'token, secret_file, other; limit for an E7 text over its limits).',
      labelNames: ['source', 'endpoint', 'reason'] as const,
      registers: [registry],
    });
    this.rateLimit = new Gauge({
      name: `${prefix}upstream_rate_limit_requests_per_second`,
      help:
        'Current pace of the request budget of E6 and E7 (UPSTREAM_RATE_LIMIT), in requests per second: the configured rate, ' +
        'halved by a 429 and recovering gradually; 0 when no budget is set.',
      labelNames: ['source'] as const,
      registers: [registry],
    });
    this.rateLimitWait = new Counter({
      name: `${prefix}upstream_rate_limit_wait_seconds_total`,
      help: 'Seconds E6 and E7 requests waited for the request budget (UPSTREAM_RATE_LIMIT) before being sent, summed over requests.',
      labelNames: ['source'] as const,
      registers: [registry],
    });
    this.tokenRequests = new Counter({
      name: `${prefix}token_requests_total`,
      help: 'OAuth2 token requests sent to the identity host (E0), by outcome.',
      labelNames: ['source', 'outcome'] as const,
      registers: [registry],
    });
    this.clockSkew = new Gauge({
      name: `${prefix}upstream_clock_skew_seconds`,
      help:
        "The API's clock minus the local clock, in seconds, from the Date header of the last E6 or E7 response (± 0.5 s and half " +
        "its round trip); negative: the local clock is ahead. Runs use the API's clock; beyond half of SYNC_SETTLE it is logged at warn.",
      labelNames: ['source'] as const,
      registers: [registry],
    });
  }

  /** The observer of one source's client, its series labelled `source`. */
  observer(source: string): ClientObserver {
    return {
      onResponse: ({ endpoint, status, durationSeconds }) =>
        this.requestDuration.observe({ source, endpoint, code: status === undefined ? 'error' : String(status) }, durationSeconds),
      onRetry: ({ endpoint }) => this.retries.inc({ source, endpoint }),
      onTokenRequest: (outcome) => this.tokenRequests.inc({ source, outcome }),
      onAttemptFailed: ({ endpoint, reason }) => this.attemptFailures.inc({ source, endpoint, reason }),
      onRateLimit: (ratePerSecond) => this.rateLimit.set({ source }, ratePerSecond),
      onRateLimitWait: (seconds) => this.rateLimitWait.inc({ source }, seconds),
      onClockSkew: (skewSeconds) => this.clockSkew.set({ source }, skewSeconds),
    };
  }
}
