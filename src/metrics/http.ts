/** The counters of serve's HTTP server: connections refused on arrival, logins refused without a check. */
import { Counter, type Registry } from 'prom-client';

export interface HttpMetrics {
  readonly connectionsRefused: Counter<'reason'>;
  readonly authThrottled: Counter<'reason'>;
}

export function httpMetrics(registry: Registry, prefix: string): HttpMetrics {
  return { connectionsRefused: connectionsRefusedCounter(registry, prefix), authThrottled: authThrottledCounter(registry, prefix) };
}

function connectionsRefusedCounter(registry: Registry, prefix: string): Counter<'reason'> {
  return new Counter({
    name: `${prefix}http_connections_refused_total`,
    help: 'Connections serve closed on arrival, by reason: per_client (METRICS_MAX_CONNECTIONS_PER_CLIENT), total (METRICS_MAX_CONNECTIONS).',
    labelNames: ['reason'] as const,
    registers: [registry],
  });
}

function authThrottledCounter(registry: Registry, prefix: string): Counter<'reason'> {
  return new Counter({
    name: `${prefix}http_auth_throttled_total`,
    help: 'Login attempts refused with 429 without a password check, by reason: budget (the address spent AUTH_FAILURE_BUDGET) or busy (as many checks ran as allowed).',
    labelNames: ['reason'] as const,
    registers: [registry],
  });
}
