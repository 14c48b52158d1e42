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
 * is not one customer's usage. Families are selected by pattern (`*_event_count`): the reference
 * names only `userlogin_event_count`, so no other name is written here.
 */
import * as dashboard from '@grafana/grafana-foundation-sdk/dashboard';
import * as bargauge from '@grafana/grafana-foundation-sdk/bargauge';
import * as common from '@grafana/grafana-foundation-sdk/common';
import * as stat from '@grafana/grafana-foundation-sdk/stat';
import * as table from '@grafana/grafana-foundation-sdk/table';
import * as timeseries from '@grafana/grafana-foundation-sdk/timeseries';
import { COMMON_TAG, PROMETHEUS_DATASOURCE_TYPE, datasourceRef, datasourceVariable, finish, multiSelectVariable, promQuery } from './common.js';

/**
 * The one E7 family the platform's API reference names; the panels about logins read it, and the
 * variables list jobs, instances and sources from it.
 */
export const LOGINS = { metric: 'userlogin_event_count', title: 'Logins' } as const;

/**
 * Every event family E7 serves, by pattern: the reference names no other family, so the panels of
 * all events select `*_event_count` and show whatever families there are, each under its name
 * without the suffix (label `event`, e.g. `userlogin`).
 */
export const EVENT_FAMILY_REGEX = '.+_event_count';

/** uid of the dashboard (stable across Grafana instances; links use it). */
export const PLATFORM_USAGE_UID = 'analytics-platform-usage';

/**
 * Label selector of every upstream query: the exporters picked in `$job` and `$instance` (two
 * exporters feeding one Prometheus are not summed together), the sources picked in `$source` and
 * the customers picked in `$customer`.
 */
const CUSTOMER = 'job=~"$job", instance=~"$instance", source=~"$source", customer=~"$customer"';
/** Every event family at once, by pattern. */
const ALL_FAMILIES = `{__name__=~"${EVENT_FAMILY_REGEX}", ${CUSTOMER}}`;
/** The logins of the selected customers. */
const LOGIN_SERIES = `${LOGINS.metric}{${CUSTOMER}}`;

/**
 * The upstream series of `selector` once, however many exporter instances (replicas: `instance`,
 * and `pod` under prometheus-operator) re-expose them: every replica reads the same platform
 * numbers (E7), so the max across them is the number, where a sum would count it once per replica.
 * Every other label is kept; a selector of several families (`{__name__=~…}`) first copies the
 * family's name without `_event_count` into the label `event` (label_replace), so the families
 * stay apart after the aggregation drops `__name__`, under a name a legend can show.
 */
export function once(selector: string): string {
  const families = selector.startsWith('{') ? `label_replace(${selector}, "event", "$1", "__name__", "(.+)_event_count")` : selector;
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
    .span(6);
}

/** A horizontal bar gauge of instant values of `expr`, one bar per series named by `legendFormat`. */
function bars(title: string, description: string, expr: string, legendFormat: string): bargauge.PanelBuilder {
  return new bargauge.PanelBuilder()
    .title(title)
    .description(`${description} ${WINDOW_NOTE}`)
    .datasource(datasourceRef(PROMETHEUS_DATASOURCE_TYPE))
    .withTarget(promQuery('A', expr, legendFormat, true))
    .unit('short')
    .decimals(0)
    .min(0)
    .displayMode(common.BarGaugeDisplayMode.Gradient)
    .orientation(common.VizOrientation.Horizontal)
    .reduceOptions(lastValue())
    .height(10)
    .span(12);
}

/** A horizontal bar gauge of the ten selected customers (of any selected source) with the most of `sum` (an upstream selector: events now). */
function topCustomers(title: string, description: string, sum: string): bargauge.PanelBuilder {
  return bars(title, description, `topk(10, sum by (source, customer) (${once(sum)}))`, '{{source}} / {{customer}}');
}

/** A time series panel of `expr` (one series per source and `legendFormat`). */
function overTime(title: string, description: string, expr: string, legendFormat: string): timeseries.PanelBuilder {
  return new timeseries.PanelBuilder()
    .title(title)
    .description(`${description} ${WINDOW_NOTE}`)
    .datasource(datasourceRef(PROMETHEUS_DATASOURCE_TYPE))
    .withTarget(promQuery('A', expr, legendFormat, false))
    .unit('short')
    .decimals(0)
    .min(0)
    .legend(legend())
    .tooltip(tooltip())
    .height(9)
    .span(12);
}

/**
 * The table of events per customer: one row per source and customer, one column per event family
 * E7 serves. One query of every family (a series per source, customer and `event`); labelsToFields
 * names each series' value by its `event` label, and merge joins them on the other labels.
 */
function eventsPerCustomer(): table.PanelBuilder {
  return new table.PanelBuilder()
    .title('Events per customer')
    .description(
      `One row per selected customer and source, one column per event family the platform serves (every *_event_count, named without the suffix), the counts of now. ${WINDOW_NOTE}`,
    )
    .datasource(datasourceRef(PROMETHEUS_DATASOURCE_TYPE))
    .withTarget(promQuery('A', `sum by (source, customer, customer_id, event) (${once(ALL_FAMILIES)})`, '{{event}}', true))
    .withTransformation({ id: 'labelsToFields', options: { mode: 'columns', valueLabel: 'event' } })
    .withTransformation({ id: 'merge', options: {} })
    .withTransformation({
      id: 'organize',
      options: { excludeByName: { Time: true }, renameByName: { source: 'Source', customer: 'Customer', customer_id: 'Customer id' } },
    })
    .unit('short')
    .decimals(0)
    .sortBy([new common.TableSortByFieldStateBuilder().displayName('userlogin').desc(true)])
    .height(10)
    .span(24);
}

/** The variables after `datasource`: job, instance and source from the logins (the family the reference names), customer from every family. */
function variables(): dashboard.QueryVariableBuilder[] {
  const query = (name: string, label: string, description: string, text: string, sort = dashboard.VariableSort.AlphabeticalAsc) =>
    multiSelectVariable(name, { label, description, type: PROMETHEUS_DATASOURCE_TYPE, query: text, sort, allValue: '.*' });
  return [
    query(
      'job',
      'Job',
      `Prometheus jobs scraping an analytics-exporter that re-exposes the upstream families (series of ${LOGINS.metric}, the family the API reference names).`,
      `label_values(${LOGINS.metric}, job)`,
    ),
    query(
      'instance',
      'Instance',
      'Exporter instances of the selected jobs. Replicas of one exporter (the Kubernetes serve overlay runs two) read the same platform: every panel shows each of their numbers once (the max across instances), so All is right for them; pick one to see what it read.',
      `label_values(${LOGINS.metric}{job=~"$job"}, instance)`,
    ),
    query(
      'source',
      'Source',
      'Sources (environments or API clients: the `sources` of CONFIG_FILE, or `default`) of the selected exporters, from the `source` label the exporter adds to every upstream sample.',
      `label_values(${LOGINS.metric}{job=~"$job", instance=~"$instance"}, source)`,
    ),
    query(
      'customer',
      'Customer',
      'Customers (label `customer` of the upstream families) of the selected exporters and sources, from those with events of any family (*_event_count) in the selected time range.',
      `label_values({__name__=~"${EVENT_FAMILY_REGEX}", job=~"$job", instance=~"$instance", source=~"$source"}, customer)`,
      dashboard.VariableSort.AlphabeticalCaseInsensitiveAsc,
    ),
  ];
}

/**
 * Builds the "Platform usage" dashboard (Prometheus): totals, events by type and by customer,
 * and the top customers, for the customers picked in `$customer`. Panels of all events select
 * the event families by pattern ({@link EVENT_FAMILY_REGEX}); only the login panels name one.
 */
export function platformUsageDashboard(): dashboard.Dashboard {
  const events = 'every event family the platform serves (*_event_count)';
  const builder = new dashboard.DashboardBuilder('Platform usage')
    .uid(PLATFORM_USAGE_UID)
    .description(
      'Usage of the forms platform per customer and source (environment or API client), from the event counts the platform publishes (E7) and analytics-exporter re-exposes. ' +
        `${WINDOW_NOTE} Event families are selected by pattern (*_event_count), so every family E7 serves shows; the login panels read ${LOGINS.metric}, the one family the API reference names. ` +
        'Assumes the exporter runs without UPSTREAM_METRIC_PREFIX (metric names as the platform writes them).',
    )
    .tags([COMMON_TAG, 'platform', 'prometheus'])
    .time({ from: 'now-7d', to: 'now' })
    .refresh('1m')
    .tooltip(dashboard.DashboardCursorSync.Crosshair)
    .withVariable(datasourceVariable('prometheus'));
  for (const v of variables()) builder.withVariable(v);
  builder
    .withRow(new dashboard.RowBuilder('Totals over METRICS_WINDOW'))
    .withPanel(totalStat(LOGINS.title, 'Logins of the selected customers, per source.', `sum by (source) (${once(LOGIN_SERIES)})`))
    .withPanel(totalStat('All events', `Events of ${events} for the selected customers, per source.`, `sum by (source) (${once(ALL_FAMILIES)})`))
    .withPanel(
      totalStat(
        'Event types',
        `Event families with samples for the selected customers, per source: ${events}.`,
        `count by (source) (sum by (source, event) (${once(ALL_FAMILIES)}))`,
      ),
    )
    .withPanel(
      totalStat(
        'Active customers',
        'Selected customers with at least one login, per source.',
        `count by (source) (sum by (source, customer_id) (${once(LOGIN_SERIES)}) > 0)`,
      ),
    )
    .withPanel(
      bars(
        'Events by type now',
        `Events of each type per source, summed over the selected customers: ${events}, named without the suffix.`,
        `sum by (source, event) (${once(ALL_FAMILIES)})`,
        '{{source}} {{event}}',
      )
        .height(8)
        .span(24),
    )

    .withRow(new dashboard.RowBuilder('Events over time'))
    .withPanel(
      overTime(
        'Events by type',
        `Events of each type per source, summed over the selected customers: ${events}, named without the suffix.`,
        `sum by (source, event) (${once(ALL_FAMILIES)})`,
        '{{source}} {{event}}',
      ),
    )
    .withPanel(
      overTime(
        'Logins by customer',
        'Logins per selected customer and source.',
        `sum by (source, customer) (${once(LOGIN_SERIES)})`,
        '{{source}} / {{customer}}',
      ),
    )

    .withRow(new dashboard.RowBuilder('Customers'))
    .withPanel(topCustomers('Top 10 customers by logins', 'The ten selected customers with the most logins now.', LOGIN_SERIES))
    .withPanel(topCustomers('Top 10 customers by all events', `The ten selected customers with the most events of ${events} now.`, ALL_FAMILIES))
    .withPanel(eventsPerCustomer());
  return finish(builder);
}
