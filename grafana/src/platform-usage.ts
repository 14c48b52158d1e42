/**
 * The "Platform usage" dashboard: the platform's own event counts (E7 of the
 * platform's API reference), re-exposed by the exporter and stored by Prometheus.
 *
 * Every upstream value is a count over the exporter's METRICS_WINDOW (24 h by default) ending at
 * the scrape, not a counter: panels graph and sum the values as they are and never apply
 * rate()/increase() to them (test/unit/dashboards.test.ts checks this). Every selector is filtered
 * by the `job` and `instance` variables, and read through {@link once}: replicas of one exporter
 * (the Kubernetes `serve` overlay runs two) re-expose the same platform numbers, so each number is
 * taken once across instances (their max), never summed. And by the `source` variable: the exporter labels every upstream sample with
 * the `source` (environment or API client) it read it from, and the panels keep sources apart
 * (`by (source)`, `{{source}}` in legends), since the same customer in production and in a sandbox
 * is not one customer's usage.
 */
import * as dashboard from '@grafana/grafana-foundation-sdk/dashboard';
import * as bargauge from '@grafana/grafana-foundation-sdk/bargauge';
import * as common from '@grafana/grafana-foundation-sdk/common';
import * as stat from '@grafana/grafana-foundation-sdk/stat';
import * as table from '@grafana/grafana-foundation-sdk/table';
import * as timeseries from '@grafana/grafana-foundation-sdk/timeseries';
import { PromQueryFormat } from '@grafana/grafana-foundation-sdk/prometheus';
import { COMMON_TAG, PROMETHEUS_DATASOURCE_TYPE, datasourceRef, datasourceVariable, finish, multiSelectVariable, promQuery } from './common.js';

/** The upstream families (E7) in the order the platform writes them, with the words the panels use. */
export const UPSTREAM_FAMILIES = [
  { metric: 'userlogin_event_count', title: 'Logins' },
  { metric: 'dialogcreated_event_count', title: 'Dialogs created' },
  { metric: 'dialogsubmitted_event_count', title: 'Dialogs submitted' },
  { metric: 'documentcreated_event_count', title: 'Documents created' },
  { metric: 'pdfcreated_event_count', title: 'PDFs created' },
  { metric: 'smssent_event_count', title: 'SMS sent' },
  { metric: 'emailsent_event_count', title: 'E-mails sent' },
] as const;

/** uid of the dashboard (stable across Grafana instances; links use it). */
export const PLATFORM_USAGE_UID = 'analytics-platform-usage';

/**
 * Label selector of every upstream query: the exporters picked in `$job` and `$instance` (two
 * exporters feeding one Prometheus are not summed together), the sources picked in `$source` and
 * the customers picked in `$customer`.
 */
const CUSTOMER = 'job=~"$job", instance=~"$instance", source=~"$source", customer=~"$customer"';
/** All seven upstream families at once, by name. */
const ALL_FAMILIES = `{__name__=~"${UPSTREAM_FAMILIES.map((f) => f.metric).join('|')}", ${CUSTOMER}}`;

/**
 * The upstream series of `selector` once, however many exporter instances (replicas: `instance`,
 * and `pod` under prometheus-operator) re-expose them: every replica reads the same platform
 * numbers (E7), so the max across them is the number, where a sum would count it once per replica.
 * Every other label is kept; a selector of several families (`{__name__=~…}`) first copies the
 * family's name into the label `family` (label_join: no `$` for Grafana to read as a variable), so
 * the families stay apart after the aggregation drops `__name__`.
 */
export function once(selector: string): string {
  const families = selector.startsWith('{') ? `label_join(${selector}, "family", "", "__name__")` : selector;
  return `max without (instance, pod) (${families})`;
}

const WINDOW_NOTE = "Each value counts the events of the exporter's METRICS_WINDOW (24 h by default) before the scrape; it is not a counter.";

const legend = () =>
  new common.VizLegendOptionsBuilder()
    .showLegend(true)
    .displayMode(common.LegendDisplayMode.Table)
    .placement(common.LegendPlacement.Right)
    .calcs(['lastNotNull', 'max']);
const tooltip = () => new common.VizTooltipOptionsBuilder().mode(common.TooltipDisplayMode.Multi).sort(common.SortOrder.Descending);
const lastValue = () => new common.ReduceDataOptionsBuilder().calcs(['lastNotNull']).values(false);

function totalStat(title: string, description: string, expr: string): stat.PanelBuilder {
  return new stat.PanelBuilder()
    .title(title)
    .description(`${description} ${WINDOW_NOTE}`)
    .datasource(datasourceRef(PROMETHEUS_DATASOURCE_TYPE))
    .withTarget(promQuery('A', expr, '{{source}}', true))
    .unit('short')
    .decimals(0)
    .graphMode(common.BigValueGraphMode.None)
    .colorMode(common.BigValueColorMode.None)
    .reduceOptions(lastValue())
    .height(4)
    .span(4);
}

/** A horizontal bar gauge of the ten selected customers (of any selected source) with the most of `sum` (an upstream selector: events now). */
function topCustomers(title: string, description: string, sum: string): bargauge.PanelBuilder {
  return new bargauge.PanelBuilder()
    .title(title)
    .description(`${description} ${WINDOW_NOTE}`)
    .datasource(datasourceRef(PROMETHEUS_DATASOURCE_TYPE))
    .withTarget(promQuery('A', `topk(10, sum by (source, customer) (${once(sum)}))`, '{{source}} / {{customer}}', true))
    .unit('short')
    .decimals(0)
    .min(0)
    .displayMode(common.BarGaugeDisplayMode.Gradient)
    .orientation(common.VizOrientation.Horizontal)
    .reduceOptions(lastValue())
    .height(10)
    .span(12);
}

/**
 * Builds the "Platform usage" dashboard (Prometheus): totals, events by type and by customer,
 * and the top customers, for the customers picked in `$customer`.
 */
export function platformUsageDashboard(): dashboard.Dashboard {
  const logins = UPSTREAM_FAMILIES[0];
  const builder = new dashboard.DashboardBuilder('Platform usage')
    .uid(PLATFORM_USAGE_UID)
    .description(
      'Usage of the forms platform per customer and source (environment or API client), from the event counts the platform publishes (E7) and analytics-exporter re-exposes. ' +
        `${WINDOW_NOTE} Assumes the exporter runs without UPSTREAM_METRIC_PREFIX (metric names as the platform writes them, e.g. userlogin_event_count).`,
    )
    .tags([COMMON_TAG, 'platform', 'prometheus'])
    .time({ from: 'now-7d', to: 'now' })
    .refresh('1m')
    .tooltip(dashboard.DashboardCursorSync.Crosshair)
    .withVariable(datasourceVariable('prometheus'))
    .withVariable(
      multiSelectVariable('job', {
        label: 'Job',
        description: `Prometheus jobs scraping an analytics-exporter that re-exposes the upstream families (series of ${logins.metric}).`,
        type: PROMETHEUS_DATASOURCE_TYPE,
        query: `label_values(${logins.metric}, job)`,
        sort: dashboard.VariableSort.AlphabeticalAsc,
        allValue: '.*',
      }),
    )
    .withVariable(
      multiSelectVariable('instance', {
        label: 'Instance',
        description:
          'Exporter instances of the selected jobs. Replicas of one exporter (the Kubernetes serve overlay runs two) read the same platform: every panel shows each of their numbers once (the max across instances), so All is right for them; pick one to see what it read.',
        type: PROMETHEUS_DATASOURCE_TYPE,
        query: `label_values(${logins.metric}{job=~"$job"}, instance)`,
        sort: dashboard.VariableSort.AlphabeticalAsc,
        allValue: '.*',
      }),
    )
    .withVariable(
      multiSelectVariable('source', {
        label: 'Source',
        description:
          'Sources (environments or API clients: the `sources` of CONFIG_FILE, or `default`) of the selected exporters, from the `source` label the exporter adds to every upstream sample.',
        type: PROMETHEUS_DATASOURCE_TYPE,
        query: `label_values(${logins.metric}{job=~"$job", instance=~"$instance"}, source)`,
        sort: dashboard.VariableSort.AlphabeticalAsc,
        allValue: '.*',
      }),
    )
    .withVariable(
      multiSelectVariable('customer', {
        label: 'Customer',
        description:
          'Customers (label `customer` of the upstream families) of the selected exporters and sources, from those with login counts in the selected time range.',
        type: PROMETHEUS_DATASOURCE_TYPE,
        query: `label_values(${logins.metric}{job=~"$job", instance=~"$instance", source=~"$source"}, customer)`,
        sort: dashboard.VariableSort.AlphabeticalCaseInsensitiveAsc,
        allValue: '.*',
      }),
    )

    .withRow(new dashboard.RowBuilder('Totals over METRICS_WINDOW'))
    .withPanel(totalStat(logins.title, 'Logins of the selected customers, per source.', `sum by (source) (${once(`${logins.metric}{${CUSTOMER}}`)})`))
    .withPanel(
      totalStat(
        'Dialogs submitted',
        'Dialogs submitted by the selected customers, per source.',
        `sum by (source) (${once(`dialogsubmitted_event_count{${CUSTOMER}}`)})`,
      ),
    )
    .withPanel(
      totalStat(
        'Documents created',
        'Documents created by the selected customers, per source.',
        `sum by (source) (${once(`documentcreated_event_count{${CUSTOMER}}`)})`,
      ),
    )
    .withPanel(
      totalStat(
        'Messages sent',
        'SMS and e-mails sent for the selected customers, per source.',
        `sum by (source) (${once(`{__name__=~"smssent_event_count|emailsent_event_count", ${CUSTOMER}}`)})`,
      ),
    )
    .withPanel(totalStat('All events', 'Events of all seven types for the selected customers, per source.', `sum by (source) (${once(ALL_FAMILIES)})`))
    .withPanel(
      totalStat(
        'Active customers',
        'Selected customers with at least one login, per source.',
        `count by (source) (sum by (source, customer_id) (${once(`${logins.metric}{${CUSTOMER}}`)}) > 0)`,
      ),
    )

    .withRow(new dashboard.RowBuilder('Events over time'))
    .withPanel(
      new timeseries.PanelBuilder()
        .title('Events by type')
        .description(`Events of each type per source, summed over the selected customers. ${WINDOW_NOTE}`)
        .datasource(datasourceRef(PROMETHEUS_DATASOURCE_TYPE))
        .targets(
          UPSTREAM_FAMILIES.map((f, i) =>
            promQuery(String.fromCharCode(65 + i), `sum by (source) (${once(`${f.metric}{${CUSTOMER}}`)})`, `{{source}} ${f.title}`, false),
          ),
        )
        .unit('short')
        .decimals(0)
        .min(0)
        .legend(legend())
        .tooltip(tooltip())
        .height(9)
        .span(12),
    )
    .withPanel(
      new timeseries.PanelBuilder()
        .title('Logins by customer')
        .description(`Logins per selected customer and source. ${WINDOW_NOTE}`)
        .datasource(datasourceRef(PROMETHEUS_DATASOURCE_TYPE))
        .withTarget(promQuery('A', `sum by (source, customer) (${once(`${logins.metric}{${CUSTOMER}}`)})`, '{{source}} / {{customer}}', false))
        .unit('short')
        .decimals(0)
        .min(0)
        .legend(legend())
        .tooltip(tooltip())
        .height(9)
        .span(12),
    )

    .withRow(new dashboard.RowBuilder('Customers'))
    .withPanel(topCustomers('Top 10 customers by logins', 'The ten selected customers with the most logins now.', `${logins.metric}{${CUSTOMER}}`))
    .withPanel(topCustomers('Top 10 customers by all events', 'The ten selected customers with the most events of all seven types now.', ALL_FAMILIES))
    .withPanel(
      new table.PanelBuilder()
        .title('Events per customer')
        .description(`One row per selected customer and source, one column per event type, the counts of now. ${WINDOW_NOTE}`)
        .datasource(datasourceRef(PROMETHEUS_DATASOURCE_TYPE))
        .targets(
          UPSTREAM_FAMILIES.map((f, i) =>
            // Table format gives one frame per query with a "Value #<refId>" column; merge joins them on the labels.
            promQuery(String.fromCharCode(65 + i), `sum by (source, customer, customer_id) (${once(`${f.metric}{${CUSTOMER}}`)})`, f.title, true).format(
              PromQueryFormat.Table,
            ),
          ),
        )
        .withTransformation({ id: 'merge', options: {} })
        .withTransformation({
          id: 'organize',
          options: {
            excludeByName: { Time: true },
            renameByName: {
              source: 'Source',
              customer: 'Customer',
              customer_id: 'Customer id',
              ...Object.fromEntries(UPSTREAM_FAMILIES.map((f, i) => [`Value #${String.fromCharCode(65 + i)}`, f.title])),
            },
          },
        })
        .unit('short')
        .decimals(0)
        .sortBy([new common.TableSortByFieldStateBuilder().displayName(logins.title).desc(true)])
        .height(10)
        .span(24),
    );
  return finish(builder);
}
