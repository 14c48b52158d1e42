/**
 * The alerting rules of analytics-exporter `serve`: the exporter itself, its reads of the
 * platform's Prometheus text (E7), the scheduled sync (ETL) of E6 into PostgreSQL, and the audit.
 * Each is a function of the {@link RulesConfig}, and returns the rule with the comment the rule
 * file carries above it (why the expression and its numbers are what they are).
 *
 * Every alert has `summary`, `description` (ending in a short runbook) and `runbook_url`: the
 * configured runbook address and the anchor of the alert's section of docs/runbook.md.
 *
 * Sources: the upstream and sync series carry `source`, so those alerts fire per source (one
 * source down alerts for it alone); the process alerts (Down, Absent) have no source. Replicas:
 * the sync's freshness and failure share are judged per source across the replicas of the job
 * (each run happens in the one replica holding the source's lock), the rest per process.
 */
import type { RulesConfig } from './config.js';
import { REPLICA_LABELS, syncFailureRatioExpr, syncLagExpr } from './expressions.js';
import { inWords, promDuration, prose, seconds, select, theLast } from './text.js';

/** An alerting rule as Prometheus's rule files write it. */
export interface AlertingRule {
  alert: string;
  expr: string;
  for: string;
  labels: { severity: 'warning' | 'critical' };
  annotations: { summary: string; description: string; runbook_url: string };
}

/** A rule and the comment written above it in the rule file (lines without `#`). */
export interface Commented<R> {
  comment: string;
  rule: R;
}

/**
 * The anchor GitHub gives a heading of docs/runbook.md: lower case, spaces to hyphens, other
 * punctuation dropped. Each alert's section is headed by the alert's name.
 */
export function runbookAnchor(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

type Rule = Omit<AlertingRule, 'annotations'> & { annotations: Omit<AlertingRule['annotations'], 'runbook_url'> };

/** Adds `runbook_url` from the configured address and the alert's name. */
function withRunbook(config: RulesConfig, rule: Rule): AlertingRule {
  return { ...rule, annotations: { ...rule.annotations, runbook_url: `${config.runbookUrl}#${runbookAnchor(rule.alert)}` } };
}

function exporterDown(c: RulesConfig): Commented<AlertingRule> {
  return {
    comment: `Scrapes of a known target fail: the process is gone, the port is closed, or /metrics did not answer within
scrape_timeout. ${c.exporterDown.for} is ${seconds(c.exporterDown.for) / 30} failed scrapes at 30s, longer than a restart (serve drains within 15s),
so a deploy does not page.`,
    rule: withRunbook(c, {
      alert: 'AnalyticsExporterDown',
      expr: `${select('up', c)} == 0`,
      for: c.exporterDown.for,
      labels: { severity: 'critical' },
      annotations: {
        summary: 'analytics-exporter {{ $labels.instance }} is down',
        description: prose`Prometheus has failed to scrape {{ $labels.instance }} (job {{ $labels.job }}) for ${inWords(c.exporterDown.for)}.
          Meanwhile there are no upstream metrics, no scheduled sync runs, and none of the other analytics-exporter alerts can fire.
          Runbook: read the scrape error on Prometheus's Status > Targets page; check that the process runs and why it stopped
          (\`docker compose ps analytics-exporter\`, \`docker compose logs analytics-exporter\`; serve exits 1 when it cannot start,
          e.g. METRICS_LISTEN taken); then \`curl http://{{ $labels.instance }}/healthz\` and \`/readyz\` from the Prometheus host.`,
      },
    }),
  };
}

function exporterAbsent(c: RulesConfig): Commented<AlertingRule> {
  return {
    comment: `A separate alert rather than \`or absent(...)\` in the one above: \`up == 0\` needs a target, and returns nothing
at all when service discovery lost the exporter or the job is named differently from these rules,
which would silence every alert in this file. The cause and the fix differ too (Prometheus's
configuration, not the exporter), hence its own text.`,
    rule: withRunbook(c, {
      alert: 'AnalyticsExporterAbsent',
      expr: `absent(${select('up', c)})`,
      for: c.exporterAbsent.for,
      labels: { severity: 'critical' },
      annotations: {
        summary: 'Prometheus has no analytics-exporter target (job {{ $labels.job }})',
        description: prose`For ${inWords(c.exporterAbsent.for)} Prometheus has had no target of job {{ $labels.job }}, so the
          analytics-exporter is not monitored and no other alert of this file can fire. Runbook: Status > Targets and the scrape_configs
          of prometheus.yml. Either the exporter left service discovery, or its scrape job is not named ${c.selector} as these rules
          expect (then rename one of the two).`,
      },
    }),
  };
}

function upstreamDown(c: RulesConfig): Commented<AlertingRule> {
  const span = c.upstreamDown.for;
  return {
    comment: `Every read of E7 failed for ${span} (the gauge is set by each scrape's read, so at a 30s scrape interval that is
about ${seconds(span) / 30} failed reads; one flaky read never alerts). The description names the most frequent error
reason of that time, queried at notification time.`,
    rule: withRunbook(c, {
      alert: 'AnalyticsUpstreamDown',
      expr: `${select('analytics_exporter_upstream_up', c)} == 0`,
      for: span,
      labels: { severity: 'warning' },
      annotations: {
        summary: 'analytics-exporter {{ $labels.instance }} cannot read the analytics API of source {{ $labels.source }}',
        description: prose`Every read of the platform's Prometheus text (E7) of source {{ $labels.source }} by {{ $labels.instance }} has
          failed for ${inWords(span)}: /metrics serves none of that source's samples (other sources are served), and dashboards of
          platform usage show a gap for it.{{ range printf
          "topk(1, increase(analytics_exporter_upstream_errors_total{job=%q, instance=%q, source=%q}[${span}]) > 0)"
          $labels.job $labels.instance $labels.source | query }} Most frequent reason in that time: {{ .Labels.reason }}
          ({{ .Value | humanize }} failed reads).{{ end }} Runbook: \`token\` means the identity host refused the source's client (its
          client_id, client secret and auth_url; CLIENT_ID, the client secret and AUTH_URL for \`default\`); \`http_401\`/\`http_403\`
          the client's access to the API; \`network\`/\`timeout\` reachability of the source's statistics_url (STATISTICS_URL;
          UPSTREAM_TIMEOUT, scrape_timeout); \`http_5xx\` the platform itself. \`analytics-exporter check\` on the exporter's host tries
          every step once for every source and names the failing one.`,
      },
    }),
  };
}

function syncStale(c: RulesConfig): Commented<AlertingRule> {
  const { intervals, lookback } = c.syncStale;
  const threshold = `${intervals} * ${c.syncIntervalMinutes} * 60`;
  return {
    comment: `Time since the last successful sync, in seconds (the recording rule source:analytics_exporter_sync_lag_seconds
is the same expression), per source across the replicas of the job: \`max without (${REPLICA_LABELS})\` takes the
latest success any of them reported. Replicas on one database take turns (each run holds the source's lock;
a tick that finds it held is skipped and counted in analytics_exporter_sync_skipped_total{reason="locked"}),
so a replica that loses the lock at every tick never succeeds itself and must not alert while the other
syncs; a source that no replica syncs still does. Exporters of one job syncing different databases must
therefore name their sources apart. max_over_time over the last ${lookback} keeps a success the process reported before a
restart (a restart resets the gauge to 0). When the gauge was 0 for the whole ${lookback} (a fresh start, or no
success in any process seen in it), the earliest process start seen in it stands in: a fresh
exporter gets the same time as any other before it alerts, where \`time() - 0\` would fire at once,
yet one that never succeeds still alerts, crash loops included (a guard on process_start_time_seconds
would hold a restarting exporter silent for ever). The value is thus a lower bound of the time without success.

Threshold: ${intervals} × SYNC_SCHEDULE's interval (${intervals} × ${c.syncIntervalMinutes} min); change syncIntervalMinutes with the schedule,
and keep the lookback above the threshold. \`for: ${c.syncStale.for}\` lets the run after one failed run come late (a
longer window, a slow page) before it alerts. Not counted as failures but caught here: a sync that
cannot start because the database is unreachable.

With SYNC_SCHEDULE=off (sync from cron, outside serve) serve never syncs and this alert fires once the
threshold has passed after start: drop it from such deployments.

Per source: the stand-in is joined to each source's own gauge (0 times the gauge, plus the process
start of its instance, the earliest of the replicas), so a source that has never succeeded gets it even
while another source of the same process has succeeded, and a source with a success keeps its own value
(\`or\` matches all labels).`,
    rule: withRunbook(c, {
      alert: 'AnalyticsSyncStale',
      expr: `${syncLagExpr(c)} > ${threshold}\n`,
      for: c.syncStale.for,
      labels: { severity: 'critical' },
      annotations: {
        summary: 'analytics-exporter: no successful sync of source {{ $labels.source }} for {{ $value | humanizeDuration }}',
        description: prose`No sync run of source {{ $labels.source }} into PostgreSQL has succeeded in any process of job {{ $labels.job }}
          for at least {{ $value | humanizeDuration }} (threshold ${promDuration(intervals * c.syncIntervalMinutes * 60)}: ${intervals} × SYNC_SCHEDULE's
          interval of ${c.syncIntervalMinutes} minutes), so the analytics records in the database are getting older. Runbook: if
          analytics_exporter_sync_running of the source is 1 a run is still going (a first backfill from SYNC_START_DATE can take long;
          analytics_exporter_sync_windows_total rising means it commits windows). Otherwise see AnalyticsSyncFailing and /readyz, the
          exporter's log lines with source {{ $labels.source }} ("sync run failed", or "sync could not run" when the database is
          unreachable), and \`select started_at, status, error from ${c.databaseSchema}.sync_runs where source = '{{ $labels.source }}'
          order by started_at desc limit 5\` (schema DATABASE_SCHEMA). Replicas take turns (each run holds the source's lock): one whose ticks all find the lock held counts
          analytics_exporter_sync_skipped_total{reason="locked"} and syncs nothing itself; which process succeeded last:
          \`analytics_exporter_sync_last_success_timestamp_seconds{job="{{ $labels.job }}", source="{{ $labels.source }}"}\` by instance.`,
      },
    }),
  };
}

function syncFailing(c: RulesConfig): Commented<AlertingRule> {
  const { ratio, range } = c.syncFailing;
  const share = ratio === 0.5 ? 'half' : `${ratio * 100}%`;
  return {
    comment: `Share of the runs finished in ${theLast(range)} that failed (the recording rule
source:analytics_exporter_sync_failures:ratio${range} is the same expression), the runs of all replicas of the job
together: each run happens in the one replica holding the source's lock, so the runs are summed across them. A ratio, not a count, so one
transient failure stays below, and \`for: ${c.syncFailing.for}\` keeps a blip from alerting. It also catches failures
that alternate with successes, which AnalyticsSyncStale does not see. No run finished in the range gives
0/0 = NaN, which never fires (AnalyticsSyncStale covers a sync that does not run). The range should span
several runs of SYNC_SCHEDULE (${seconds(range) / 60 / c.syncIntervalMinutes} at ${c.syncIntervalMinutes} minutes): change it with the schedule.`,
    rule: withRunbook(c, {
      alert: 'AnalyticsSyncFailing',
      expr: `${syncFailureRatioExpr(c)}\n> ${ratio}\n`,
      for: c.syncFailing.for,
      labels: { severity: 'warning' },
      annotations: {
        summary: `analytics-exporter: {{ $value | humanizePercentage }} of sync runs of source {{ $labels.source }} failed in ${theLast(range)}`,
        description: prose`{{ $value | humanizePercentage }} of the sync runs of source {{ $labels.source }} that finished in
          ${theLast(range)}, in all processes of job {{ $labels.job }} together, failed (threshold: more than ${share}, for ${inWords(c.syncFailing.for)}). Windows
          committed before a failure are kept and the next successful run completes the data, but it falls behind while runs fail.
          Runbook: the error of each failed run is in the exporter's log ("sync run failed", with source {{ $labels.source }}) and in
          \`select started_at, error from ${c.databaseSchema}.sync_runs where source = '{{ $labels.source }}' and status = 'failed' order
          by started_at desc limit 5\` (schema DATABASE_SCHEMA), and by process in
          \`sum by (instance) (increase(analytics_exporter_sync_failures_total{job="{{ $labels.job }}", source="{{ $labels.source }}"}[${range}]))\`. Usual causes: the upstream (AnalyticsUpstreamDown,
          analytics_exporter_upstream_retries_total), a window whose record count kept changing while paged (raise
          SYNC_WINDOW_ATTEMPTS), or the database.`,
      },
    }),
  };
}

function recordsQuarantined(c: RulesConfig): Commented<AlertingRule> {
  const { range } = c.recordsQuarantined;
  return {
    comment: `A record E6 sent that PostgreSQL will not store (jsonb cannot hold a string or key with U+0000 or an unpaired
UTF-16 surrogate, or nesting deeper than 1000 levels; or the database refuses it: a value out of range, a
constraint, a trigger's error) is kept whole, as sent, in the table records_quarantine instead of records,
and the rest of its window commits: the sync goes on, but the record is missing from records and from
everything built on it. Fires while the quarantine grows: any record quarantined in ${theLast(range)}. A
re-loaded window (SYNC_LOOKBACK, a re-sync) quarantines its bad records again and counts them again, so the
alert lasts while runs re-read such a record and resolves ${inWords(range)} after the last. The counter is
exported at 0 from the start, so increase() sees the first record, and a restart (a reset to 0) does not
fire it. A warning: nothing is lost, the record waits.`,
    rule: withRunbook(c, {
      alert: 'AnalyticsRecordsQuarantined',
      expr: `increase(${select('analytics_exporter_sync_records_quarantined_total', c)}[${range}]) > 0`,
      for: c.recordsQuarantined.for,
      labels: { severity: 'warning' },
      annotations: {
        summary: `analytics-exporter {{ $labels.instance }}: {{ $value | printf "%.0f" }} analytics records of source {{ $labels.source }} quarantined in ${theLast(range)}`,
        description: prose`In ${theLast(range)} the sync of source {{ $labels.source }} on {{ $labels.instance }} met
          {{ $value | printf "%.0f" }} records from the analytics API (E6) that PostgreSQL would not store: jsonb cannot hold them (a
          string holding U+0000 or an unpaired UTF-16 surrogate, or nesting deeper than 1000 levels), or the database refused them
          (SQLSTATE class 22 data exception, 23 integrity constraint, 54 program limit or P0 raised by a trigger). Each is kept exactly as
          sent in the table records_quarantine instead of records, and the rest of its window is committed. Runbook: \`select
          window_start, coalesce(reason, sqlstate || ': ' || message) as why, json_path, left(payload_text, 200) from
          ${c.databaseSchema}.records_quarantine where source = '{{ $labels.source }}' order by id desc limit 20\` (schema
          DATABASE_SCHEMA): payload_text is the record's JSON text, why what is wrong with it, json_path where in it (for a record jsonb
          cannot hold). Have the platform correct the record at its source, or change the database rule that refused it; re-syncing its
          window with SYNC_SHRINK=replace (sync --from --to) then stores it in records and drops its quarantine rows (under the default SYNC_SHRINK=keep the window keeps the quarantined copy beside the stored one).`,
      },
    }),
  };
}

function syncUnstableInstants(c: RulesConfig): Commented<AlertingRule> {
  const { count, range } = c.syncUnstableInstants;
  return {
    comment: `An instant (a slice of SYNC_MIN_SPLIT that the sync cannot split further) holding more than a page of records is
read twice and kept only when both reads return the same records; a disagreement is read again, and
SYNC_WINDOW_ATTEMPTS disagreements in a row park its window (then AnalyticsSyncWindowsParked speaks). One
disagreement now and then is a record that changed while it was read; more than ${count} in ${theLast(range)}, for
${inWords(c.syncUnstableInstants.for)}, means E6's order within such instants is not stable and windows are close to being parked.
Exported at 0 from the start. Counted across the replicas of the job (each run happens in the one holding the
source's lock, so the disagreements of one source are split between them).`,
    rule: withRunbook(c, {
      alert: 'AnalyticsSyncUnstableInstants',
      expr: `sum without (${REPLICA_LABELS}) (increase(${select('analytics_exporter_sync_unstable_instants_total', c)}[${range}])) > ${count}`,
      for: c.syncUnstableInstants.for,
      labels: { severity: 'warning' },
      annotations: {
        summary: `analytics-exporter: {{ $value | printf "%.0f" }} pairs of reads of an instant of source {{ $labels.source }} disagreed in ${theLast(range)}`,
        description: prose`In ${theLast(range)} {{ $value | printf "%.0f" }} pairs of reads by the sync of source
          {{ $labels.source }} (all processes of job {{ $labels.job }} together) of an instant (a slice of SYNC_MIN_SPLIT holding more than a page, SYNC_PAGE_SIZE,
          of records) returned different records. Each such instant is read again, and after SYNC_WINDOW_ATTEMPTS pairs that disagree
          its window is parked: E6's order of records within one instant is not stable, so paging it could double or lose records.
          Runbook: the exporter's log lines with source {{ $labels.source }} name the instants ("two reads of an instant holding more
          than a page returned different records"). If the API resolves event times finer than SYNC_MIN_SPLIT, lower it, so such
          instants split into parts of one page; otherwise raise SYNC_PAGE_SIZE (up to 1000) so an instant fits one page.`,
      },
    }),
  };
}

function syncWindowsParked(c: RulesConfig): Commented<AlertingRule> {
  return {
    comment: `A parked window: one the sync cannot load for a reason of its own (a response over UPSTREAM_MAX_BODY even at
one record a page, E6 contradicting itself about it after SYNC_WINDOW_ATTEMPTS), kept in sync_windows as
parked so the source goes on past it. The data is not exact until it is loaded. The gauge is read from the
ledger at each run's end, at serve's start and after a tick that found the source's lock held (so a replica
that loses the lock to another sees what the other's runs loaded), so it stays up until a run loads the
window; exported at 0 from the start.`,
    rule: withRunbook(c, {
      alert: 'AnalyticsSyncWindowsParked',
      expr: `${select('analytics_exporter_sync_windows_parked', c)} > 0`,
      for: c.syncWindowsParked.for,
      labels: { severity: 'warning' },
      annotations: {
        summary: 'analytics-exporter {{ $labels.instance }}: {{ $value | printf "%.0f" }} windows of source {{ $labels.source }} parked, not loaded',
        description: prose`{{ $value | printf "%.0f" }} windows of source {{ $labels.source }} could not be loaded by the sync on
          {{ $labels.instance }} for a reason of their own, and are parked in the ledger: the watermark passed them and later windows are
          loaded, but their records are missing (or as an earlier load left them) until they are loaded. Runbook: \`select window_start,
          window_end, parked_at, reason from ${c.databaseSchema}.sync_windows where source = '{{ $labels.source }}' and status = 'parked'
          order by window_start\` (schema DATABASE_SCHEMA) and the exporter's warnings "window parked" say which and why. A response
          over UPSTREAM_MAX_BODY: raise it (a record that large is in E6); E6 contradicting itself: raise SYNC_WINDOW_ATTEMPTS or have
          the platform look at the window. Then load each with \`analytics-exporter sync --source {{ $labels.source }} --from
          <window_start> --to <window_end>\`; the audit (\`verify\`) retries them too.`,
      },
    }),
  };
}

function auditDriftLeft(c: RulesConfig): Commented<AlertingRule> {
  return {
    comment: `The audit inside serve (AUDIT_SCHEDULE, once a day by default) compares each stored window with what E6 holds
now and loads the windows that differ again, as \`sync\` would. A window still differing after that is data
the database does not hold as E6 does: its repair run failed (E6 or the database down, a window that
cannot be loaded), so nothing will fix it before the next audit. The gauge keeps its value until the next
audit, exported at 0 from the start for a serve that audits; \`for: ${c.auditDriftLeft.for}\` lets an operator's
\`verify --repair\` in between clear it without a page.`,
    rule: withRunbook(c, {
      alert: 'AnalyticsAuditDriftLeft',
      expr: `${select('analytics_exporter_audit_drift_windows', c)} > 0`,
      for: c.auditDriftLeft.for,
      labels: { severity: 'warning' },
      annotations: {
        summary:
          'analytics-exporter {{ $labels.instance }}: {{ $value | printf "%.0f" }} windows of source {{ $labels.source }} still differ from the analytics API after the audit',
        description: prose`The last audit of source {{ $labels.source }} on {{ $labels.instance }} found {{ $value | printf "%.0f" }}
          stored windows whose records (records and records_quarantine) differ in number from what the analytics API (E6) holds for them
          now, and could not load them again. Runbook: the exporter's log lines with source {{ $labels.source }} name each window
          ("audit: the stored window differs from what E6 holds now", with the stored and E6 counts) and why its repair failed ("audit:
          the repair of the windows could not run", or the repair's "sync run failed"); fix that cause, then run \`analytics-exporter
          verify --source {{ $labels.source }} --repair\` (exit 0 when nothing is left), or wait for the next audit.`,
      },
    }),
  };
}

function configReloadFailed(c: RulesConfig): Commented<AlertingRule> {
  return {
    comment: `serve reads CONFIG_FILE again on SIGHUP and on POST /-/reload; a file that cannot be used leaves the last good
sources in use and sets the gauge to 0 until a reload succeeds (as Prometheus's own
prometheus_config_last_reload_successful). Nothing is broken yet, but the file deployed is not what runs,
and the next restart would fail on it. \`for: ${c.configReloadFailed.for}\` lets a config-reloader sidecar's retry
after a half-written ConfigMap succeed without a page.`,
    rule: withRunbook(c, {
      alert: 'AnalyticsConfigReloadFailed',
      expr: `${select('analytics_exporter_config_last_reload_successful', c)} == 0`,
      for: c.configReloadFailed.for,
      labels: { severity: 'warning' },
      annotations: {
        summary: 'analytics-exporter {{ $labels.instance }} could not reload CONFIG_FILE',
        description: prose`The last reload of CONFIG_FILE by {{ $labels.instance }} (SIGHUP or POST /-/reload) failed at least
          ${inWords(c.configReloadFailed.for)} ago: the exporter goes on with the last good sources, so the file deployed is not what
          runs, and a restart would stop at it (exit status 2). Runbook: the exporter's error "CONFIG_FILE reload failed" names the file,
          the line and the key; \`analytics-exporter check\` with the new file says the same. Fix the file, then reload again
          (\`curl -X POST http://{{ $labels.instance }}/-/reload\` answers 200, or 400 with the reason).`,
      },
    }),
  };
}

/** Every alerting rule for `config`, in the rule file's order, each with its comment. */
export function alertingRules(config: RulesConfig): Array<Commented<AlertingRule>> {
  return [
    exporterDown,
    exporterAbsent,
    upstreamDown,
    syncStale,
    syncFailing,
    recordsQuarantined,
    syncUnstableInstants,
    syncWindowsParked,
    auditDriftLeft,
    configReloadFailed,
  ].map((define) => define(config));
}
