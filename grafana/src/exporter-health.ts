/**
 * The "Exporter health" dashboard: analytics-exporter's own metrics (src/metrics/registry.ts):
 * whether its reads of E7 succeed, how the upstream requests and tokens (E0, E6, E7 of the
 * platform's API reference) fare, whether the sync keeps up, and the process.
 *
 * Every query selects the exporter by `job` and `instance` variables over
 * `analytics_exporter_build_info`, so process_* and nodejs_* series of other targets stay out.
 * Every upstream and sync family is labelled by `source` (one per configured environment or API
 * client) and selected by the `source` variable as well; panels keep sources apart (`by (source)`,
 * `{{source}}` in legends), since a sum over two environments means nothing.
 */
import * as dashboard from '@grafana/grafana-foundation-sdk/dashboard';
import * as common from '@grafana/grafana-foundation-sdk/common';
import * as stat from '@grafana/grafana-foundation-sdk/stat';
import * as timeseries from '@grafana/grafana-foundation-sdk/timeseries';
import {
  COMMON_TAG,
  PROMETHEUS_DATASOURCE_TYPE,
  QUARANTINE_RED,
  booleanMapping,
  datasourceRef,
  datasourceVariable,
  finish,
  multiSelectVariable,
  promQuery,
  thresholds,
} from './common.js';

/** uid of the dashboard (stable across Grafana instances; links use it). */
export const EXPORTER_HEALTH_UID = 'analytics-exporter-health';

/** Label selector of the process-wide series (build_info, process_*, nodejs_*): the exporters picked in `$job` and `$instance`. */
const SEL = 'job=~"$job", instance=~"$instance"';
/** Label selector of the per-source families (upstream_*, token_*, sync_*): also the sources picked in `$source`. */
const SOURCE_SEL = `${SEL}, source=~"$source"`;
/** A per-source family of the exporter, selected by `$job`, `$instance` and `$source`. */
const m = (name: string) => `analytics_exporter_${name}{${SOURCE_SEL}}`;
/** A process-wide family of the exporter, selected by `$job` and `$instance`. */
const p = (name: string) => `analytics_exporter_${name}{${SEL}}`;

const lastValue = () => new common.ReduceDataOptionsBuilder().calcs(['lastNotNull']).values(false);
const legend = () => new common.VizLegendOptionsBuilder().showLegend(true).displayMode(common.LegendDisplayMode.List).placement(common.LegendPlacement.Bottom);
const tooltip = () => new common.VizTooltipOptionsBuilder().mode(common.TooltipDisplayMode.Multi).sort(common.SortOrder.Descending);

interface Series {
  expr: string;
  legend: string;
}

function graph(title: string, description: string, unit: string, series: Series[], span = 8): timeseries.PanelBuilder {
  return new timeseries.PanelBuilder()
    .title(title)
    .description(description)
    .datasource(datasourceRef(PROMETHEUS_DATASOURCE_TYPE))
    .targets(series.map((s, i) => promQuery(String.fromCharCode(65 + i), s.expr, s.legend, false)))
    .unit(unit)
    .min(0)
    .legend(legend())
    .tooltip(tooltip())
    .height(8)
    .span(span);
}

function single(title: string, description: string, unit: string, expr: string, legendFormat = title): stat.PanelBuilder {
  return new stat.PanelBuilder()
    .title(title)
    .description(description)
    .datasource(datasourceRef(PROMETHEUS_DATASOURCE_TYPE))
    .withTarget(promQuery('A', expr, legendFormat, true))
    .unit(unit)
    .graphMode(common.BigValueGraphMode.None)
    .colorMode(common.BigValueColorMode.Background)
    .reduceOptions(lastValue())
    .height(4)
    .span(4);
}

/** A count per source that should stay 0: a wide stat, without decimals, red from `red`. */
function sourceCount(title: string, description: string, expr: string, red: number): stat.PanelBuilder {
  return single(title, description, 'short', expr, '{{source}}').decimals(0).thresholds(thresholds(1, red)).height(8).span(6);
}

/**
 * Builds the "Exporter health" dashboard (Prometheus): upstream reads, requests and tokens, the
 * sync's progress and lag, and the process.
 */
export function exporterHealthDashboard(): dashboard.Dashboard {
  const builder = new dashboard.DashboardBuilder('Exporter health')
    .uid(EXPORTER_HEALTH_UID)
    .description(
      "Health of analytics-exporter from its own metrics (prefix analytics_exporter_): reads of the platform's Prometheus text (E7), HTTP requests and tokens, the ETL sync into PostgreSQL, per source (variable Source), and the Node.js process.",
    )
    .tags([COMMON_TAG, 'exporter', 'prometheus'])
    .time({ from: 'now-6h', to: 'now' })
    .refresh('30s')
    .tooltip(dashboard.DashboardCursorSync.Crosshair)
    .withVariable(datasourceVariable('prometheus'))
    .withVariable(
      multiSelectVariable('job', {
        label: 'Job',
        description: 'Prometheus jobs scraping an analytics-exporter (series of analytics_exporter_build_info).',
        type: PROMETHEUS_DATASOURCE_TYPE,
        query: 'label_values(analytics_exporter_build_info, job)',
        sort: dashboard.VariableSort.AlphabeticalAsc,
        allValue: '.*',
      }),
    )
    .withVariable(
      multiSelectVariable('instance', {
        label: 'Instance',
        description: 'Exporter instances of the selected jobs.',
        type: PROMETHEUS_DATASOURCE_TYPE,
        query: 'label_values(analytics_exporter_build_info{job=~"$job"}, instance)',
        sort: dashboard.VariableSort.AlphabeticalAsc,
        allValue: '.*',
      }),
    )
    .withVariable(
      multiSelectVariable('source', {
        label: 'Source',
        description:
          'Sources (environments or API clients: the `sources` of CONFIG_FILE, or `default`) of the selected instances, from the `source` label of analytics_exporter_upstream_up.',
        type: PROMETHEUS_DATASOURCE_TYPE,
        query: 'label_values(analytics_exporter_upstream_up{job=~"$job", instance=~"$instance"}, source)',
        sort: dashboard.VariableSort.AlphabeticalAsc,
        allValue: '.*',
      }),
    )

    .withRow(new dashboard.RowBuilder('Now'))
    .withPanel(
      single(
        'Upstream up',
        "Whether the last read of the platform's Prometheus text (E7) succeeded, per source, for the worst selected instance. Down: /metrics still answers, with the exporter's own metrics and the other sources' samples.",
        'none',
        `min by (source) (${m('upstream_up')})`,
        '{{source}}',
      ).mappings([booleanMapping({ text: 'Down', color: 'red' }, { text: 'Up', color: 'green' })]),
    )
    .withPanel(
      single(
        'Sync lag',
        'Time since the last successful sync run finished (time() - sync_last_success_timestamp_seconds), per source, for the most up-to-date selected instance. With the default schedule (every 15 min) it stays under 15 min plus a run.',
        's',
        `time() - max by (source) (${m('sync_last_success_timestamp_seconds')})`,
        '{{source}}',
      ).thresholds(thresholds(1800, 3600)),
    )
    .withPanel(
      single(
        'Watermark lag',
        'How far behind now the loaded records end (time() - sync_watermark_timestamp_seconds), per source: SYNC_SETTLE plus the time since the last run, when the sync keeps up.',
        's',
        `time() - max by (source) (${m('sync_watermark_timestamp_seconds')})`,
        '{{source}}',
      ).thresholds(thresholds(3600, 7200)),
    )
    .withPanel(
      single(
        'Sync failures',
        'Failed sync runs in the time range (increase of sync_failures_total), per source; the reason is in the error column of sync_runs and in the log.',
        'short',
        `sum by (source) (increase(${m('sync_failures_total')}[$__range]))`,
        '{{source}}',
      )
        .decimals(0)
        .thresholds(thresholds(1, 3)),
    )
    .withPanel(
      single(
        'Sync running',
        'Whether a sync run is in progress on any selected instance, per source.',
        'none',
        `max by (source) (${m('sync_running')})`,
        '{{source}}',
      ).mappings([booleanMapping({ text: 'Idle', color: 'text' }, { text: 'Running', color: 'blue' })]),
    )
    .withPanel(
      single(
        'Version',
        'Version, revision and Node.js version of the selected exporters (build_info).',
        'none',
        `max by (version, revision, nodejs_version) (${p('build_info')})`,
        '{{version}} ({{revision}}, Node.js {{nodejs_version}})',
      )
        .textMode(common.BigValueTextMode.Name)
        .colorMode(common.BigValueColorMode.None),
    )

    .withRow(new dashboard.RowBuilder('Upstream reads (E7)'))
    .withPanel(
      graph('Upstream up', "Whether the last read of the platform's Prometheus text (E7) succeeded (1) or not (0), per source and instance.", 'none', [
        { expr: m('upstream_up'), legend: '{{source}} {{instance}}' },
      ]).max(1),
    )
    .withPanel(
      graph(
        'Upstream scrape duration',
        'Duration of the last read of E7, per source and instance; bounded by the scrape timeout Prometheus sends (less 20 %).',
        's',
        [{ expr: m('upstream_scrape_duration_seconds'), legend: '{{source}} {{instance}}' }],
      ),
    )
    .withPanel(
      graph(
        'Upstream samples',
        'Upstream samples served per scrape, per source and instance: customers times event types; a drop to 0 with upstream up means the platform returned no counts.',
        'short',
        [{ expr: m('upstream_samples'), legend: '{{source}} {{instance}}' }],
      ),
    )
    .withPanel(
      graph(
        'Upstream errors by reason',
        'Failed reads of E7 per second, by source and reason (the values of upstream_attempt_failures_total: timeout, network, http_<status>, content_type, invalid_body, token, other).',
        'ops',
        [{ expr: `sum by (source, reason) (rate(${m('upstream_errors_total')}[$__rate_interval]))`, legend: '{{source}} {{reason}}' }],
      ),
    )
    .withPanel(
      graph(
        'Invalid upstream lines',
        "Lines of the E7 text dropped as invalid per second, by source and reason, and upstream families dropped for colliding with the exporter's own names. Dropped data is never served.",
        'cps',
        [
          { expr: `sum by (source, reason) (rate(${m('upstream_invalid_lines_total')}[$__rate_interval]))`, legend: '{{source}} {{reason}}' },
          { expr: `sum by (source) (rate(${m('upstream_dropped_families_total')}[$__rate_interval]))`, legend: '{{source}} dropped families' },
        ],
      ),
    )
    .withPanel(
      graph(
        'Time since last upstream success',
        'Age of the last successful read of E7 (time() - upstream_last_success_timestamp_seconds), per source and instance; upstream samples are never served older than METRICS_CACHE_TTL.',
        's',
        [{ expr: `time() - ${m('upstream_last_success_timestamp_seconds')}`, legend: '{{source}} {{instance}}' }],
      ),
    )

    .withRow(new dashboard.RowBuilder('Upstream requests and tokens'))
    .withPanel(
      graph(
        'Request duration p95 by endpoint',
        '95th percentile of HTTP request durations to the analytics API, by source and endpoint (analytics = E6, prometheus = E7), over the rate interval (at least four scrapes).',
        's',
        [
          {
            expr: `histogram_quantile(0.95, sum by (le, source, endpoint) (rate(${m('upstream_request_duration_seconds_bucket')}[$__rate_interval])))`,
            legend: '{{source}} {{endpoint}}',
          },
        ],
      ),
    )
    .withPanel(
      graph(
        'Requests by endpoint and status',
        'HTTP requests to the analytics API per second, by source, endpoint and status code (error = no response).',
        'reqps',
        [
          {
            expr: `sum by (source, endpoint, code) (rate(${m('upstream_request_duration_seconds_count')}[$__rate_interval]))`,
            legend: '{{source}} {{endpoint}} {{code}}',
          },
        ],
      ),
    )
    .withPanel(
      graph(
        'Retries and token requests',
        'Upstream requests retried after a transient failure (429, 502-504, network, timeouts) per second, by source and endpoint; and OAuth2 token requests to the identity host (E0) per second, by source and outcome.',
        'ops',
        [
          { expr: `sum by (source, endpoint) (rate(${m('upstream_retries_total')}[$__rate_interval]))`, legend: '{{source}} retry {{endpoint}}' },
          { expr: `sum by (source, outcome) (rate(${m('token_requests_total')}[$__rate_interval]))`, legend: '{{source}} token {{outcome}}' },
        ],
      ),
    )

    .withRow(new dashboard.RowBuilder('Sync (ETL)'))
    .withPanel(
      graph(
        'Records and pages loaded',
        'Analytics records, E6 pages and windows written to PostgreSQL per second, per source (re-loaded windows count again).',
        'cps',
        [
          { expr: `sum by (source) (rate(${m('sync_records_total')}[$__rate_interval]))`, legend: '{{source}} records' },
          { expr: `sum by (source) (rate(${m('sync_pages_total')}[$__rate_interval]))`, legend: '{{source}} pages' },
          { expr: `sum by (source) (rate(${m('sync_windows_total')}[$__rate_interval]))`, legend: '{{source}} windows' },
        ],
        12,
      ),
    )
    .withPanel(
      graph(
        'Sync runs, failures and skipped ticks',
        'Sync runs finished, runs failed, and scheduled ticks skipped because a run was still going, per second and source.',
        'ops',
        [
          { expr: `sum by (source) (rate(${m('sync_runs_total')}[$__rate_interval]))`, legend: '{{source}} runs' },
          { expr: `sum by (source) (rate(${m('sync_failures_total')}[$__rate_interval]))`, legend: '{{source}} failures' },
          { expr: `sum by (source) (rate(${m('sync_skipped_total')}[$__rate_interval]))`, legend: '{{source}} skipped ticks' },
        ],
        12,
      ),
    )
    .withPanel(
      graph(
        'Sync and watermark lag',
        'Time since the last successful run finished, and how far behind now the loaded records end, per source and instance.',
        's',
        [
          { expr: `time() - ${m('sync_last_success_timestamp_seconds')}`, legend: '{{source}} last success {{instance}}' },
          { expr: `time() - ${m('sync_watermark_timestamp_seconds')}`, legend: '{{source}} watermark {{instance}}' },
        ],
        12,
      ),
    )
    .withPanel(
      graph(
        'Sync duration',
        'Duration of the last finished sync run, per source and instance.',
        's',
        [{ expr: m('sync_duration_seconds'), legend: '{{source}} {{instance}}' }],
        12,
      ),
    )
    .withPanel(
      sourceCount(
        'Quarantined records',
        'Records the sync quarantined in the time range (increase of sync_records_quarantined_total), per source: records E6 sent that PostgreSQL cannot store, kept as sent in the table records_quarantine instead of records: found by the sync (a string holding U+0000 or an unpaired surrogate, nesting deeper than 1000 levels: json_path, reason) or refused by the database for a data reason (a number numeric cannot hold, a CHECK constraint: sqlstate, message). A re-loaded window counts its records again. The Analytics history dashboard lists them.',
        `sum by (source) (increase(${m('sync_records_quarantined_total')}[$__range]))`,
        QUARANTINE_RED,
      ),
    )
    .withPanel(
      graph(
        'Quarantined records and unstable instants',
        'Records quarantined per second and source (sync_records_quarantined_total), and reads of an instant that disagreed per second (sync_unstable_instants_total: an instant, a slice of SYNC_MIN_SPLIT holding more than a page, is read twice; a disagreement is read again and parks its window after SYNC_WINDOW_ATTEMPTS).',
        'cps',
        [
          { expr: `sum by (source) (rate(${m('sync_records_quarantined_total')}[$__rate_interval]))`, legend: '{{source}} quarantined records' },
          { expr: `sum by (source) (rate(${m('sync_unstable_instants_total')}[$__rate_interval]))`, legend: '{{source}} unstable instants' },
        ],
        18,
      ),
    )
    .withPanel(
      sourceCount(
        'Parked windows',
        'Windows parked in the ledger now, per source (sync_windows_parked): not loadable for a reason of their own (a response over UPSTREAM_MAX_BODY even at one record a page, E6 contradicting itself after SYNC_WINDOW_ATTEMPTS). The watermark passed them; their records are missing until a run over them (sync --from/--to, the audit) loads them. Which and why: sync_windows where status = parked.',
        `max by (source) (${m('sync_windows_parked')})`,
        1,
      ),
    )

    // The audit inside serve (AUDIT_SCHEDULE): windows compared with E6, repaired, or left differing.
    .withRow(new dashboard.RowBuilder('Audit (verify)'))
    .withPanel(
      sourceCount(
        'Windows still differing from E6',
        'Windows whose stored records (records and records_quarantine) still differed in number from what E6 holds after the last audit and its repairs (audit_drift_windows), per source. 0 when every window found differing was loaded again; above 0, their repair failed: the log names each window (alert AnalyticsAuditDriftLeft).',
        `max by (source) (${m('audit_drift_windows')})`,
        QUARANTINE_RED,
      ),
    )
    .withPanel(
      graph(
        'Audit: verified through, last run, repairs',
        'How far behind now the history verified equal to E6 ends (sync_verified_through_timestamp_seconds) and time since the last audit finished (audit_last_run_timestamp_seconds), per source and instance; windows the audits loaded again (audit_windows_repaired_total) and their E6 requests (audit_requests_total) in the time range on the right axis.',
        's',
        [
          { expr: `time() - ${m('sync_verified_through_timestamp_seconds')}`, legend: '{{source}} verified through {{instance}}' },
          { expr: `time() - ${m('audit_last_run_timestamp_seconds')}`, legend: '{{source}} last audit {{instance}}' },
          { expr: `sum by (source) (increase(${m('audit_windows_repaired_total')}[$__range]))`, legend: '{{source}} windows repaired' },
          { expr: `sum by (source) (increase(${m('audit_requests_total')}[$__range]))`, legend: '{{source}} audit requests' },
        ],
        18,
      ),
    )

    .withRow(new dashboard.RowBuilder('Process'))
    .withPanel(
      graph('Memory', 'Resident memory of the exporter process and the V8 heap in use, per instance.', 'bytes', [
        { expr: `process_resident_memory_bytes{${SEL}}`, legend: 'resident {{instance}}' },
        { expr: `nodejs_heap_size_used_bytes{${SEL}}`, legend: 'heap used {{instance}}' },
      ]),
    )
    .withPanel(
      graph('CPU', 'CPU time used by the exporter process per second of wall time (1 = one core), per instance.', 'percentunit', [
        { expr: `rate(process_cpu_seconds_total{${SEL}}[$__rate_interval])`, legend: '{{instance}}' },
      ]),
    )
    .withPanel(
      graph('Event loop lag p99', '99th percentile of the Node.js event loop lag, per instance; high values delay scrapes and token renewals.', 's', [
        { expr: `nodejs_eventloop_lag_p99_seconds{${SEL}}`, legend: '{{instance}}' },
      ]),
    );
  return finish(builder);
}
