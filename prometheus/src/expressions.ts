/**
 * PromQL expressions shared by an alert and a recording rule, so that the recorded series and the
 * alert's value are one expression written once.
 */
import type { RulesConfig } from './config.js';
import { select } from './text.js';

/**
 * Seconds since the last successful sync of each source (labels job, instance, source), as
 * AnalyticsSyncStale measures it: the latest success seen within `syncStale.lookback` (a restart
 * resets the gauge to 0, max_over_time keeps the success from before it); for a source without
 * one, the earliest start of its process seen in that time stands in, so the value is a lower
 * bound of the time without success. Several lines, without a final line break.
 */
export function syncLagExpr(config: RulesConfig): string {
  const lookback = config.syncStale.lookback;
  const lastSuccess = select('analytics_exporter_sync_last_success_timestamp_seconds', config);
  return [
    'time() - (',
    `    max_over_time(${lastSuccess}[${lookback}]) > 0`,
    '  or',
    `    0 * max_over_time(${lastSuccess}[${lookback}])`,
    '    + on(job, instance) group_left()',
    `    min_over_time(${select('process_start_time_seconds', config)}[${lookback}])`,
    ')',
  ].join('\n');
}

/**
 * The share (0 to 1) of each source's sync runs finished within `syncFailing.range` that failed;
 * NaN (0/0) when none finished. Two lines, without a final line break.
 */
export function syncFailureRatioExpr(config: RulesConfig): string {
  const range = config.syncFailing.range;
  return [
    `increase(${select('analytics_exporter_sync_failures_total', config)}[${range}])`,
    `  / increase(${select('analytics_exporter_sync_runs_total', config)}[${range}])`,
  ].join('\n');
}
