/** Reload gauges as Prometheus's own `prometheus_config_last_reload_*`, for WEB_CONFIG_FILE and CONFIG_FILE. */
import { Gauge, type Registry } from 'prom-client';

/**
 * Registers the two gauges and records the start's load as a success. `what` is the file as the
 * HELP names it, `kept` what a failed reload leaves in use. @returns `record(ok)`, once per reload.
 */
export function reloadGauges(registry: Registry, prefix: string, what: string, kept: string): (ok: boolean) => void {
  const successful = new Gauge({
    name: `${prefix}last_reload_successful`,
    help: `Whether the last reload of ${what} succeeded (1) or failed and left ${kept} in use (0).`,
    registers: [registry],
  });
  const lastSuccess = new Gauge({
    name: `${prefix}last_reload_success_timestamp_seconds`,
    help: `Unix time of the last successful load of ${what}, at start or on a reload.`,
    registers: [registry],
  });
  const record = (ok: boolean): void => {
    successful.set(ok ? 1 : 0);
    if (ok) lastSuccess.set(Date.now() / 1000);
  };
  record(true);
  return record;
}
