/** The process's metrics: `build_info`, `database_up` (serve's health tracking) and prom-client's defaults. */
import { Gauge, collectDefaultMetrics, type Registry } from 'prom-client';
import { REVISION, VERSION } from '../version.js';

/** The one that changes. */
export interface ProcessMetrics {
  readonly databaseUp: Gauge;
}

/** @param defaultMetrics whether to add prom-client's process_* and nodejs_* metrics. */
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
