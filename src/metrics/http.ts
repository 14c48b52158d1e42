/**
 * The counters of serve's own HTTP server (issue 25): connections closed on arrival by the
 * connection limits (src/serve/web/connections.ts) and login attempts refused without a password check
 * (src/serve/web/basic-auth.ts, auth-budget.ts). The registry (registry.ts) only registers them.
 */
import { Counter, type Registry } from 'prom-client';

/** serve's HTTP counters, as {@link httpMetrics} registers them. */
export interface HttpMetrics {
  readonly connectionsRefused: Counter<'reason'>;
  readonly authThrottled: Counter<'reason'>;
}

/** Registers serve's HTTP counters on `registry`; `prefix` is the exporter's. */
export function httpMetrics(registry: Registry, prefix: string): HttpMetrics {
  return { connectionsRefused: connectionsRefusedCounter(registry, prefix), authThrottled: authThrottledCounter(registry, prefix) };
}

/** `http_connections_refused_total{reason}` on `registry`; `prefix` is the exporter's. */
function connectionsRefusedCounter(registry: Registry, prefix: string): Counter<'reason'> {
  return new Counter({
    name: `${prefix}http_connections_refused_total`,
    help: 'Connections serve closed on arrival, by reason: per_client (METRICS_MAX_CONNECTIONS_PER_CLIENT), total (METRICS_MAX_CONNECTIONS).',
    labelNames: ['reason'] as const,
    registers: [registry],
  });
}

/** `http_auth_throttled_total{reason}` on `registry`; `prefix` is the exporter's. */
function authThrottledCounter(registry: Registry, prefix: string): Counter<'reason'> {
  return new Counter({
    name: `${prefix}http_auth_throttled_total`,
    help: 'Login attempts refused with 429 without a password check, by reason: budget (the address spent AUTH_FAILURE_BUDGET) or busy (as many checks ran as allowed).',
    labelNames: ['reason'] as const,
    registers: [registry],
  });
}
