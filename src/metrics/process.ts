/**
 * The metrics of the process itself: its build (`build_info`, always 1), whether it reaches its
 * database (`database_up`, set by serve's health tracking, src/serve/health.ts), and prom-client's
 * default process_* and nodejs_* metrics.
 */
import { Gauge, collectDefaultMetrics, type Registry } from 'prom-client';
import { REVISION, VERSION } from '../version.js';

/** The process's metric that changes: `database_up`. */
export interface ProcessMetrics {
  readonly databaseUp: Gauge;
}

/**
 * Registers the process's metrics on `registry`; `prefix` is the exporter's.
 *
 * @param defaultMetrics whether to add prom-client's process_* and nodejs_* metrics.
 */
export function processMetrics(registry: Registry, prefix: string, defaultMetrics: boolean): ProcessMetrics {
  const databaseUp = new Gauge({
    name: `${prefix}database_up`,
    help: 'Whether the database answered the last time it was used or probed (1) or was unreachable (0); while 0, serve probes it with backoff.',
    registers: [registry],
  });
  new Gauge({
    name: `${prefix}build_info`,
    help: 'Build information of the exporter; the value is always 1.',
    labelNames: ['version', 'revision', 'nodejs_version'],
    registers: [registry],
  }).set({ version: VERSION, revision: REVISION, nodejs_version: process.version }, 1);
  if (defaultMetrics) collectDefaultMetrics({ register: registry });
  return { databaseUp };
}
