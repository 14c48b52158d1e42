/**
 * PromQL expressions shared by an alert and a recording rule, so that the recorded series and the
 * alert's value are one expression written once.
 */
import type { RulesConfig } from './config.js';
import { select } from './text.js';

/**
 * The labels that tell replicas of one exporter apart: `instance` (the scrape target) and, under
 * prometheus-operator, `pod`. The sync rules aggregate them away, so that replicas of one job
 * syncing one source into one database (the kustomize `serve` overlay runs two; each run holds
 * the source's lock, so it happens in one of them) are judged as the one source they sync.
 */
export const REPLICA_LABELS = 'instance, pod';

/**
 * Seconds since the last successful sync of each source (labels job and source, and any other
 * label the replicas share; {@link REPLICA_LABELS} aggregated away), as AnalyticsSyncStale
 * measures it: the latest success any replica reported within `syncStale.lookback` (a restart
 * resets the gauge to 0, max_over_time keeps the success from before it; a replica that loses
 * the source's lock at every tick reports 0, and the other's success counts); for a source
 * without one, the earliest start of a process of the source seen in that time stands in, so
 * the value is a lower bound of the time without success. Several lines, without a final line break.
 */
export function syncLagExpr(config: RulesConfig): string {
  const lookback = config.syncStale.lookback;
  const lastSuccess = select('analytics_exporter_sync_last_success_timestamp_seconds', config);
  return [
    'time() - (',
    `    max without (${REPLICA_LABELS}) (max_over_time(${lastSuccess}[${lookback}])) > 0`,
    '  or',
    `    min without (${REPLICA_LABELS}) (`,
    `        0 * max_over_time(${lastSuccess}[${lookback}])`,
    '      + on(job, instance) group_left()',
    `        min_over_time(${select('process_start_time_seconds', config)}[${lookback}])`,
    '    )',
    ')',
  ].join('\n');
}

/**
 * The share (0 to 1) of each source's sync runs finished within `syncFailing.range` that failed,
 * the runs of all replicas together (each run happens in one of them; labels job and source, and
 * any other label the replicas share); NaN (0/0) when none finished. Two lines, without a final
 * line break.
 */
export function syncFailureRatioExpr(config: RulesConfig): string {
  const range = config.syncFailing.range;
  return [
    `sum without (${REPLICA_LABELS}) (increase(${select('analytics_exporter_sync_failures_total', config)}[${range}]))`,
    `  / sum without (${REPLICA_LABELS}) (increase(${select('analytics_exporter_sync_runs_total', config)}[${range}]))`,
  ].join('\n');
}
