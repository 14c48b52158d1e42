/**
 * What the three dashboards share: the provisioned data sources they default to, the
 * `datasource` variable every dashboard has, query helpers bound to that variable, and the final
 * touches (panel ids, the built-in annotation) applied to every built dashboard.
 *
 * Glossary:
 * - data source variable: the dashboard variable `datasource`; every panel and query points at
 *   `${datasource}`, so one dashboard works with any Prometheus (or PostgreSQL) of the Grafana.
 * - provisioned uid: the fixed uid given to a data source in
 *   grafana/provisioning/datasources/datasources.yaml; the variables default to it.
 */
import * as dashboard from '@grafana/grafana-foundation-sdk/dashboard';
import type { DataSourceRef } from '@grafana/grafana-foundation-sdk/common';
import { DataqueryBuilder, QueryEditorMode } from '@grafana/grafana-foundation-sdk/prometheus';
import { POSTGRES_DATASOURCE_TYPE, PostgresFormat, PostgresQueryBuilder } from './postgres-query.js';

/** Plugin id of Grafana's Prometheus data source. */
export const PROMETHEUS_DATASOURCE_TYPE = 'prometheus';

/** The provisioned data sources the `datasource` variables default to (grafana/provisioning/datasources/datasources.yaml). */
export const PROVISIONED = {
  prometheus: { name: 'Prometheus', uid: 'analytics-prometheus', type: PROMETHEUS_DATASOURCE_TYPE },
  postgres: { name: 'Analytics PostgreSQL', uid: 'analytics-postgres', type: POSTGRES_DATASOURCE_TYPE },
} as const;

/** Name of the data source variable of every dashboard. */
export const DATASOURCE_VARIABLE = 'datasource';

/**
 * Dashboard JSON schema version the files declare. Grafana migrates a dashboard forward from its
 * declared version, but its backend's migration fails on one declared newer than it knows (the SDK's default,
 * 42, is newer than Grafana 12.1's); 39 is what Grafana 10.4 and 11 write, and nothing here uses a
 * later feature, so the later migrations leave the panels as they are.
 */
export const SCHEMA_VERSION = 39;

/** Tag carried by all three dashboards, so they can be listed together. */
export const COMMON_TAG = 'analytics-exporter';

/** A data source reference to the dashboard's `${datasource}` of plugin `type`. */
export function datasourceRef(type: string): DataSourceRef {
  return { type, uid: `\${${DATASOURCE_VARIABLE}}` };
}

/**
 * The `datasource` variable: a picker over the Grafana's data sources of plugin `which`'s type,
 * defaulting to the provisioned one (by uid).
 */
export function datasourceVariable(which: keyof typeof PROVISIONED): dashboard.DatasourceVariableBuilder {
  const source = PROVISIONED[which];
  return new dashboard.DatasourceVariableBuilder(DATASOURCE_VARIABLE)
    .label('Data source')
    .description(`${source.type} data source of the panels; defaults to the provisioned "${source.name}" (uid ${source.uid}).`)
    .type(source.type)
    .current({ selected: true, text: source.name, value: source.uid })
    .multi(false)
    .includeAll(false);
}

/**
 * A multi-select query variable on `${datasource}` of plugin `type` that defaults to All: its
 * options are what `query` returns (also shown as its definition), refreshed when the time range
 * changes. `allValue` (Prometheus: `.*` for `=~` matchers) and `allowCustomValue` are set only when given.
 */
export function multiSelectVariable(
  name: string,
  o: { label: string; description: string; type: string; query: string; sort: dashboard.VariableSort; allValue?: string; allowCustomValue?: boolean },
): dashboard.QueryVariableBuilder {
  const builder = new dashboard.QueryVariableBuilder(name)
    .label(o.label)
    .description(o.description)
    .datasource(datasourceRef(o.type))
    .query(o.query)
    .definition(o.query)
    .refresh(dashboard.VariableRefresh.OnTimeRangeChanged)
    .sort(o.sort)
    .multi(true)
    .includeAll(true);
  if (o.allowCustomValue !== undefined) builder.allowCustomValue(o.allowCustomValue);
  if (o.allValue !== undefined) builder.allValue(o.allValue);
  return builder.current({ selected: true, text: ['All'], value: ['$__all'] });
}

/**
 * A PromQL target on `${datasource}`, in code mode.
 *
 * @param refId the target's id in its panel (`A`, `B`, …).
 * @param expr PromQL with Grafana variables (`$customer`, `$__rate_interval`, `$__range`).
 * @param legend legend format (`{{customer}}`), or a fixed series name.
 * @param instant true for panels showing one value per series (stat, bar gauge, table), false for time series.
 */
export function promQuery(refId: string, expr: string, legend: string, instant: boolean): DataqueryBuilder {
  const query = new DataqueryBuilder()
    .datasource(datasourceRef(PROMETHEUS_DATASOURCE_TYPE))
    .refId(refId)
    .editorMode(QueryEditorMode.Code)
    .expr(expr)
    .legendFormat(legend);
  return instant ? query.instant() : query.range();
}

/**
 * A raw-SQL target on `${datasource}` (PostgreSQL).
 *
 * @param refId the target's id in its panel (`A`, `B`, …).
 * @param rawSql SQL with Grafana variables (`${schema}`, `${event_field:sqlstring}`) and macros (`$__timeFilter(col)`).
 * @param format `time_series` for time series panels (columns time, metric, value), `table` otherwise.
 */
export function sqlQuery(refId: string, rawSql: string, format: PostgresFormat): PostgresQueryBuilder {
  return new PostgresQueryBuilder(rawSql).datasource(datasourceRef(POSTGRES_DATASOURCE_TYPE)).refId(refId).format(format);
}

/**
 * Quarantined records from which their count turns red on both dashboards (it is amber from 1:
 * each one is a record missing from `records`); this many suggests the platform changed something.
 */
export const QUARANTINE_RED = 100;

/** Green below `amber`, amber from it, red from `red` (absolute thresholds, in the panel's unit). */
export function thresholds(amber: number, red: number): dashboard.ThresholdsConfigBuilder {
  return new dashboard.ThresholdsConfigBuilder().mode(dashboard.ThresholdsMode.Absolute).steps([
    { value: null, color: 'green' },
    { value: amber, color: 'orange' },
    { value: red, color: 'red' },
  ]);
}

/** A value mapping showing `0` and `1` as words in colours (for 0/1 gauges such as `upstream_up`). */
export function booleanMapping(zero: { text: string; color: string }, one: { text: string; color: string }): dashboard.ValueMapping {
  return {
    type: dashboard.MappingType.ValueToText,
    options: { '0': { ...zero, index: 0 }, '1': { ...one, index: 1 } },
  };
}

/**
 * Grafana's own "Annotations & Alerts" annotation, which Grafana adds to every dashboard it
 * saves; declared here so the committed JSON is what Grafana would store.
 */
function builtInAnnotation(): dashboard.AnnotationQueryBuilder {
  return new dashboard.AnnotationQueryBuilder()
    .builtIn(1)
    .datasource({ type: 'grafana', uid: '-- Grafana --' })
    .enable(true)
    .hide(true)
    .iconColor('rgba(0, 211, 255, 1)')
    .name('Annotations & Alerts')
    .type('dashboard');
}

/**
 * Builds `builder`, adds Grafana's built-in annotation, declares {@link SCHEMA_VERSION}, and gives
 * every panel (rows and the panels inside collapsed rows too) a stable id in layout order, which
 * Grafana needs for links to a panel and for panel state.
 */
export function finish(builder: dashboard.DashboardBuilder): dashboard.Dashboard {
  const built = builder.annotation(builtInAnnotation()).build();
  built.schemaVersion = SCHEMA_VERSION;
  let id = 0;
  for (const panel of built.panels ?? []) {
    panel.id = ++id;
    // Panel.type is any string, so it does not narrow the union: test for the rows' own field.
    if ('panels' in panel) for (const inner of panel.panels) inner.id = ++id;
  }
  return built;
}
