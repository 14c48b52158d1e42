/**
 * The recording rules: values the dashboards, ad-hoc queries and the runbook's checks read often,
 * precomputed under names of Prometheus's convention `level:metric:operations`
 * (https://prometheus.io/docs/practices/rules/): the level names the labels kept besides the
 * target's (`instance_source`: one series per exporter and source; `source`: the exporters (replicas) of
 * one job taken together), the metric is the exporter's without `_total`, and the operations say what was
 * applied with its range (`rate5m`).
 */
import type { Commented } from './alerts.js';
import type { RulesConfig } from './config.js';
import { syncFailureRatioExpr, syncLagExpr } from './expressions.js';
import { select, theLast } from './text.js';

/** A recording rule as Prometheus's rule files write it. */
export interface RecordingRule {
  record: string;
  expr: string;
}

/** Every recording rule for `config`, in the rule file's order, each with its comment. */
export function recordingRules(c: RulesConfig): Array<Commented<RecordingRule>> {
  const rate = c.rateRange;
  return [
    {
      comment: `Seconds since the last successful sync of each source by any replica of the job: AnalyticsSyncStale's value (a
lower bound; before the first success seen in ${theLast(c.syncStale.lookback)}, since the earliest process start seen in it).`,
      rule: { record: 'source:analytics_exporter_sync_lag_seconds', expr: `${syncLagExpr(c)}\n` },
    },
    {
      comment: `Records written to the database per second, over ${theLast(rate)} (re-loaded windows count again).`,
      rule: {
        record: `instance_source:analytics_exporter_sync_records:rate${rate}`,
        expr: `rate(${select('analytics_exporter_sync_records_total', c)}[${rate}])`,
      },
    },
    {
      comment: `Scrape success ratio: the share (0 to 1) of the exporter's scrapes in ${theLast(rate)} whose read of the source's
E7 text succeeded (analytics_exporter_upstream_up is set by each scrape's read).`,
      rule: {
        record: `instance_source:analytics_exporter_upstream_up:avg_over_time${rate}`,
        expr: `avg_over_time(${select('analytics_exporter_upstream_up', c)}[${rate}])`,
      },
    },
    {
      comment: `The share (0 to 1) of the sync runs finished in ${theLast(c.syncFailing.range)} that failed, the runs of all replicas of the
job together: AnalyticsSyncFailing's value (no series while no run finished: 0/0).`,
      rule: { record: `source:analytics_exporter_sync_failures:ratio${c.syncFailing.range}`, expr: `${syncFailureRatioExpr(c)}\n` },
    },
    {
      comment: `Audit drift: the windows of each source still differing from E6 after the last audit, the largest any
exporter of the job reports (each replica keeps the value of its own last audit).`,
      rule: {
        record: 'source:analytics_exporter_audit_drift_windows:max',
        expr: `max by (job, source) (${select('analytics_exporter_audit_drift_windows', c)})`,
      },
    },
    {
      comment: `Audit drift repaired: windows the audits found differing from E6 and loaded again, in ${theLast(c.auditRepairedRange)}
(AUDIT_SCHEDULE runs once a day by default).`,
      rule: {
        record: `instance_source:analytics_exporter_audit_windows_repaired:increase${c.auditRepairedRange}`,
        expr: `increase(${select('analytics_exporter_audit_windows_repaired_total', c)}[${c.auditRepairedRange}])`,
      },
    },
  ];
}
