/**
 * The "Analytics history" dashboard: the analytics records the ETL loaded into PostgreSQL (E6 of the
 * platform's API reference), the records it quarantined (`records_quarantine`: records
 * jsonb cannot store), and the sync's own bookkeeping (`sync_runs`, `sync_windows`, `sync_state`;
 * see migrations/).
 *
 * Panels that aggregate read the rollup `records_hourly` (exact counts per UTC hour and
 * ROLLUP_DIMENSIONS column, summed over its `window_start` rows), and the Users panel its distinct
 * companions `records_daily_distinct` for the whole UTC days of the range and
 * `records_hourly_distinct` for the hours of the days at its edges (the distinct values of a
 * ROLLUP_DISTINCT field per UTC day or hour and customer, as an array per row: the panel counts the
 * union of their elements); only record-level panels read
 * `records`, with `window_start` bounded as well as `event_time` so that PostgreSQL reads only the
 * partitions of the range.
 *
 * The record schema of E6 is not published, so no field name inside `records.payload` is written
 * into the SQL: each comes from a query variable over the field catalogue `record_fields` whose
 * default matches the simulator (docs/simulator.md). Values reach the SQL only as string literals
 * through Grafana's `:sqlstring` format (each value single-quoted, quotes doubled), so a field
 * name or customer cannot end the literal. The schema and the rollup's columns are identifiers
 * and cannot be literals: their variables list only what exists (schemas holding the ETL's tables,
 * columns of records_hourly), do not accept custom values, and a regex keeps only lower-case SQL
 * identifiers (the rule DATABASE_SCHEMA and ROLLUP_DIMENSIONS enforce). The time of a record is
 * the `event_time` column (RECORD_TIME_FIELD of the exporter).
 *
 * Every table carries a `source` column (the environment or API client the rows came from: the
 * `sources` of CONFIG_FILE, or `default`), and every query keeps the sources picked in `$source`
 * (a literal array, like the customers). Tables show the source, and series are split by it.
 */
import * as dashboard from '@grafana/grafana-foundation-sdk/dashboard';
import * as common from '@grafana/grafana-foundation-sdk/common';
import * as stat from '@grafana/grafana-foundation-sdk/stat';
import * as table from '@grafana/grafana-foundation-sdk/table';
import * as timeseries from '@grafana/grafana-foundation-sdk/timeseries';
import { COMMON_TAG, QUARANTINE_RED, datasourceRef, datasourceVariable, finish, multiSelectVariable, sqlQuery, thresholds } from './common.js';
import { POSTGRES_DATASOURCE_TYPE, PostgresFormat } from './postgres-query.js';

/** uid of the dashboard (stable across Grafana instances; links use it). */
export const ANALYTICS_HISTORY_UID = 'analytics-history';

/**
 * Allowed values of `schema` and of the dimension variables: what DATABASE_SCHEMA and the
 * ROLLUP_DIMENSIONS columns accept (src/config.ts). Grafana applies it to what the variable's query finds.
 */
export const SCHEMA_REGEX = '/^[a-z_][a-z0-9_]{0,62}$/';

/**
 * The query variables naming payload fields (options: the field catalogue record_fields), with
 * the simulator's field names as defaults. `customer_field` must be the field the rollup's
 * customer column is built from (ROLLUP_DIMENSIONS), so record-level panels select the same customers.
 */
export const FIELD_VARIABLES = [
  { name: 'event_field', label: 'Event type field', default: 'eventType', what: 'the event type' },
  {
    name: 'customer_field',
    label: 'Customer field',
    default: 'customerId',
    what: 'the customer (the field the customer column of records_hourly is built from)',
  },
  { name: 'user_field', label: 'User field', default: 'userId', what: 'the user id' },
] as const;

/**
 * The query variables naming columns of records_hourly (ROLLUP_DIMENSIONS), with the default
 * dimensions' columns as defaults. Identifiers, so restricted like `schema`.
 */
export const DIMENSION_VARIABLES = [
  { name: 'event_dimension', label: 'Event type column', default: 'event_type', what: 'the event type' },
  { name: 'customer_dimension', label: 'Customer column', default: 'customer_id', what: 'the customer' },
] as const;

/**
 * Longest SYNC_WINDOW (src/config.ts): a record's event time and its window's start differ by
 * less, so record-level queries bound `window_start` by the time range widened by it, which lets
 * PostgreSQL read only the partitions of `records` that can hold the range.
 */
export const MAX_WINDOW_SQL = "INTERVAL '31 days'";

type FieldVariable = (typeof FIELD_VARIABLES)[number]['name'];

/**
 * The text at `payload`'s field named by variable `name`: dotted names reach into nested objects
 * (`a.b`), as RECORD_TIME_FIELD does; null when the record has no such field.
 */
const field = (name: FieldVariable): string => `(payload #>> string_to_array(\${${name}:sqlstring}, '.'))`;

const EVENT = field('event_field');
const CUSTOMER = field('customer_field');
const USER = field('user_field');
const RECORDS = '${schema}.records';
const ROLLUP = '${schema}.records_hourly';
const DISTINCT_ROLLUP = '${schema}.records_hourly_distinct';
const DAILY_DISTINCT_ROLLUP = '${schema}.records_daily_distinct';
/**
 * The first UTC midnight at or after the range's start: the first day all of whose hours start in
 * the range. (24 hours, not 1 day: `+ INTERVAL '1 day'` follows the session's time zone.)
 */
const WHOLE_DAYS_FROM = "date_trunc('day', CAST($__timeFrom() AS timestamptz) - INTERVAL '1 microsecond', 'UTC') + INTERVAL '24 hours'";
/**
 * The UTC midnight ending the last day all of whose hours start in the range ($__timeFilter is
 * inclusive: the day's last hour, at 23:00, may start at the range's end itself).
 */
const WHOLE_DAYS_TO = "date_trunc('day', CAST($__timeTo() AS timestamptz) + INTERVAL '1 hour', 'UTC')";
/**
 * The ROLLUP_DISTINCT columns records_hourly_distinct was built for (derived_settings keeps them
 * as `column=field`), for the "User column" variable: read from the settings, not the table, so
 * the list costs nothing however large the table is.
 */
const DISTINCT_COLUMNS_QUERY =
  "SELECT split_part(field, '=', 1) AS value_column\nFROM ${schema}.derived_settings, jsonb_array_elements_text(value -> 'distinct') AS field\nWHERE name = 'rollup_distinct'\nORDER BY 1";
const EVENT_COLUMN = '${event_dimension}';
const CUSTOMER_COLUMN = '${customer_dimension}';
/**
 * Customers picked in `$customer`. An array rather than `IN (…)`: when the time range has no
 * customers, `ARRAY[]` still parses and the panels show "No data" instead of a syntax error.
 */
const PICKED = 'ANY (ARRAY[${customer:sqlstring}]::text[])';
/** Sources picked in `$source`, as {@link PICKED} (an array, so that no source at all still parses). */
export const SOURCES = 'ANY (ARRAY[${source:sqlstring}]::text[])';
/**
 * `window_start` within {@link MAX_WINDOW_SQL} of the time range: true of every record (and
 * rollup row) of the range, and lets PostgreSQL read only the partitions of `records`, and the
 * part of records_hourly's index (keyed by window_start first), that can hold it.
 */
const WINDOW_BOUND = `window_start > CAST($__timeFrom() AS timestamptz) - ${MAX_WINDOW_SQL}\n  AND window_start < CAST($__timeTo() AS timestamptz) + ${MAX_WINDOW_SQL}`;
/** Rollup rows of the hours starting in the time range, of the sources and of the customers picked. */
const ROLLUP_WHERE = `WHERE $__timeFilter(bucket)\n  AND ${WINDOW_BOUND}\n  AND source = ${SOURCES}\n  AND ${CUSTOMER_COLUMN} = ${PICKED}`;
/**
 * Records of the time range, of the sources and of the customers picked, with `window_start`
 * bounded too so that only the partitions that can hold the range are read.
 */
const WHERE = `WHERE $__timeFilter(event_time)\n  AND ${WINDOW_BOUND}\n  AND source = ${SOURCES}\n  AND ${CUSTOMER} = ${PICKED}`;

const ROLLUP_NOTE =
  'Read from the rollup records_hourly (exact counts per UTC hour, summed over its rows), so it counts whole hours: those starting in the time range. A record without an event time counts at its window start.';
const DISTINCT_NOTE =
  'Read from the distinct rollups (the distinct values of the field per customer, as an array per row: records_daily_distinct per UTC day for the whole days of the time range, records_hourly_distinct per UTC hour for the hours of the days at its edges, their elements unioned before counting), so the count is exact and, like the other rollup panels, counts whole hours: those starting in the time range. A record without an event time counts at its window start; one without the field is not counted. Its customer column is ROLLUP_DISTINCT_BY, which must be built from the same field as "Customer column".';
const RECORDS_NOTE =
  'Reads the records table itself (a field that is not a ROLLUP_DIMENSIONS column), bounded by window_start as well so that only the partitions of the time range are read. Records are counted by their own event time (records.event_time, from RECORD_TIME_FIELD); records without one are not shown.';

const QUARANTINE = '${schema}.records_quarantine';
/** Longest payload_text shown in the quarantine table, in characters; the rest is cut with an ellipsis. */
const PAYLOAD_EXCERPT_CHARS = 200;
const QUARANTINE_NOTE =
  'Quarantined records are records E6 sent that PostgreSQL cannot store, kept as sent in records_quarantine instead of records: found by the sync (a string holding U+0000 or an unpaired surrogate, nesting deeper than 1000 levels: Path and Reason) or refused by the database for a data reason (a number numeric cannot hold, a CHECK constraint: Reason is its SQLSTATE and message); under FIELD_CONTRACT=freeze also records bringing a new field or type (Reason "contract: …"); they are placed by their window (window_start), since they may lack an event time. Independent of the customers.';

const lastValue = () => new common.ReduceDataOptionsBuilder().calcs(['lastNotNull']).values(false);
const legend = () =>
  new common.VizLegendOptionsBuilder()
    .showLegend(true)
    .displayMode(common.LegendDisplayMode.Table)
    .placement(common.LegendPlacement.Right)
    .calcs(['sum', 'max']);
const tooltip = () => new common.VizTooltipOptionsBuilder().mode(common.TooltipDisplayMode.Multi).sort(common.SortOrder.Descending);

function countStat(title: string, description: string, rawSql: string): stat.PanelBuilder {
  return new stat.PanelBuilder()
    .title(title)
    .description(description)
    .datasource(datasourceRef(POSTGRES_DATASOURCE_TYPE))
    .withTarget(sqlQuery('A', rawSql, PostgresFormat.Table))
    .unit('short')
    .decimals(0)
    .graphMode(common.BigValueGraphMode.None)
    .colorMode(common.BigValueColorMode.None)
    .reduceOptions(lastValue())
    .height(4)
    .span(6);
}

/** Stacked bars of the rollup's records per UTC day, one series per source and value of the rollup column `column`. */
function dailyBars(title: string, description: string, column: string): timeseries.PanelBuilder {
  return new timeseries.PanelBuilder()
    .title(title)
    .description(description)
    .datasource(datasourceRef(POSTGRES_DATASOURCE_TYPE))
    .withTarget(
      sqlQuery(
        'A',
        `SELECT\n  $__timeGroupAlias(bucket, 1d),\n  source || ' / ' || coalesce(${column}, '(none)') AS metric,\n  sum(records) AS value\nFROM ${ROLLUP}\n${ROLLUP_WHERE}\nGROUP BY 1, 2\nORDER BY 1, 2`,
        PostgresFormat.TimeSeries,
      ),
    )
    .unit('short')
    .decimals(0)
    .min(0)
    .drawStyle(common.GraphDrawStyle.Bars)
    .fillOpacity(80)
    .stacking(new common.StackingConfigBuilder().mode(common.StackingMode.Normal))
    .legend(legend())
    .tooltip(tooltip())
    .height(10)
    .span(12);
}

/**
 * Builds the "Analytics history" dashboard (PostgreSQL): records per event type and customer per
 * day, the customers' totals, the latest records, the sync runs and windows, and the quarantine.
 */
export function analyticsHistoryDashboard(): dashboard.Dashboard {
  const builder = new dashboard.DashboardBuilder('Analytics history')
    .uid(ANALYTICS_HISTORY_UID)
    .description(
      'Analytics records of the forms platform as the analytics-exporter ETL stored them in PostgreSQL (table records of the schema picked in "Schema"), and the sync runs that loaded them. ' +
        'Counts come from the rollup records_hourly (its event type and customer columns are picked in "Event type column" and "Customer column"); only record-level panels read records. ' +
        "The record schema is not published: the payload fields used for event type, customer and user are picked from the field catalogue record_fields (defaults: the simulator's eventType, customerId, userId; dotted names reach nested fields). " +
        'Days are UTC days. Use a read-only database role for the data source.',
    )
    .tags([COMMON_TAG, 'etl', 'postgresql'])
    .time({ from: 'now-30d', to: 'now' })
    .timezone('utc')
    .tooltip(dashboard.DashboardCursorSync.Crosshair)
    .withVariable(datasourceVariable('postgres'))
    .withVariable(
      new dashboard.QueryVariableBuilder('schema')
        .label('Schema')
        .description(
          "Schema of the ETL's tables (DATABASE_SCHEMA of the exporter): the schemas holding a sync_state table, restricted to lower-case SQL identifiers.",
        )
        .datasource(datasourceRef(POSTGRES_DATASOURCE_TYPE))
        .query("SELECT table_schema FROM information_schema.tables WHERE table_name = 'sync_state' ORDER BY 1")
        .definition("SELECT table_schema FROM information_schema.tables WHERE table_name = 'sync_state' ORDER BY 1")
        .regex(SCHEMA_REGEX)
        .refresh(dashboard.VariableRefresh.OnDashboardLoad)
        .sort(dashboard.VariableSort.AlphabeticalAsc)
        .multi(false)
        .includeAll(false)
        .allowCustomValue(false)
        .current({ selected: true, text: 'analytics', value: 'analytics' }),
    )
    .withVariable(
      multiSelectVariable('source', {
        label: 'Source',
        description:
          'Sources (environments or API clients: the `sources` of CONFIG_FILE, or `default`) the ETL keeps a watermark for (sync_state). Used only as SQL string literals.',
        type: POSTGRES_DATASOURCE_TYPE,
        query: 'SELECT DISTINCT source FROM ${schema}.sync_state ORDER BY 1',
        sort: dashboard.VariableSort.AlphabeticalAsc,
        allowCustomValue: false,
      }),
    );
  for (const v of DIMENSION_VARIABLES) {
    const query = `SELECT column_name FROM information_schema.columns WHERE table_schema = \${schema:sqlstring} AND table_name = 'records_hourly' AND column_name NOT IN ('source', 'bucket', 'window_start', 'records') ORDER BY ordinal_position`;
    builder.withVariable(
      new dashboard.QueryVariableBuilder(v.name)
        .label(v.label)
        .description(
          `Column of records_hourly (a ROLLUP_DIMENSIONS column) holding ${v.what}; default: ${v.default}, the default dimensions'. Restricted to lower-case SQL identifiers.`,
        )
        .datasource(datasourceRef(POSTGRES_DATASOURCE_TYPE))
        .query(query)
        .definition(query)
        .regex(SCHEMA_REGEX)
        .refresh(dashboard.VariableRefresh.OnDashboardLoad)
        .multi(false)
        .includeAll(false)
        .allowCustomValue(false)
        .current({ selected: true, text: v.default, value: v.default }),
    );
  }
  for (const v of FIELD_VARIABLES) {
    const query = `SELECT DISTINCT path FROM \${schema}.record_fields WHERE records > 0 AND source = ${SOURCES} ORDER BY 1`;
    builder.withVariable(
      new dashboard.QueryVariableBuilder(v.name)
        .label(v.label)
        .description(
          `Field of records.payload holding ${v.what}, from the field catalogue record_fields (type a dotted name for a nested field; default: the simulator's ${v.default}). Used only as an SQL string literal.`,
        )
        .datasource(datasourceRef(POSTGRES_DATASOURCE_TYPE))
        .query(query)
        .definition(query)
        .refresh(dashboard.VariableRefresh.OnDashboardLoad)
        .sort(dashboard.VariableSort.AlphabeticalAsc)
        .multi(false)
        .includeAll(false)
        .allowCustomValue(true)
        .current({ selected: true, text: v.default, value: v.default }),
    );
  }
  builder.withVariable(
    new dashboard.QueryVariableBuilder('user_column')
      .label('User column')
      .description(
        "Field counted by the Users panel: a ROLLUP_DISTINCT column of records_hourly_distinct (default: user_id, for the simulator's userId), listed from the settings it was built with (derived_settings). Used only as an SQL string literal.",
      )
      .datasource(datasourceRef(POSTGRES_DATASOURCE_TYPE))
      .query(DISTINCT_COLUMNS_QUERY)
      .definition(DISTINCT_COLUMNS_QUERY)
      .refresh(dashboard.VariableRefresh.OnDashboardLoad)
      .multi(false)
      .includeAll(false)
      .allowCustomValue(false)
      .current({ selected: true, text: 'user_id', value: 'user_id' }),
  );
  const customerQuery = `SELECT DISTINCT ${CUSTOMER_COLUMN} AS customer\nFROM ${ROLLUP}\nWHERE $__timeFilter(bucket)\n  AND ${WINDOW_BOUND}\n  AND source = ${SOURCES}\n  AND ${CUSTOMER_COLUMN} IS NOT NULL\nORDER BY 1`;
  builder
    .withVariable(
      multiSelectVariable('customer', {
        label: 'Customer',
        description: 'Customers (values of the rollup column picked in "Customer column") with records of the selected sources in the time range.',
        type: POSTGRES_DATASOURCE_TYPE,
        query: customerQuery,
        sort: dashboard.VariableSort.AlphabeticalCaseInsensitiveAsc,
        allowCustomValue: false,
      }),
    )

    .withRow(new dashboard.RowBuilder('Records in the time range'))
    .withPanel(
      countStat(
        'Records',
        `Records of the selected sources and customers in the time range. ${ROLLUP_NOTE}`,
        `SELECT coalesce(sum(records), 0) AS "records"\nFROM ${ROLLUP}\n${ROLLUP_WHERE}`,
      ),
    )
    .withPanel(
      countStat(
        'Customers',
        `Selected customers with at least one record of the selected sources in the time range: an exact distinct count, since the customer is a rollup column. ${ROLLUP_NOTE}`,
        `SELECT count(DISTINCT ${CUSTOMER_COLUMN}) AS "customers"\nFROM ${ROLLUP}\n${ROLLUP_WHERE}\n  AND records > 0`,
      ),
    )
    .withPanel(
      countStat(
        'Users',
        `Distinct users (values of the ROLLUP_DISTINCT field picked in "User column") of the selected customers in the time range. ${DISTINCT_NOTE}`,
        // UNION deduplicates the arrays' elements with a hash (count(DISTINCT) sorts), and the whole
        // days read a row per day and customer instead of 24.
        `SELECT count(*) AS "users"\nFROM (\n  SELECT unnest(distinct_values) AS value\n  FROM ${DAILY_DISTINCT_ROLLUP}\n  WHERE day >= ${WHOLE_DAYS_FROM}\n    AND day < ${WHOLE_DAYS_TO}\n    AND source = ${SOURCES}\n    AND ${CUSTOMER_COLUMN} = ${PICKED}\n    AND value_column = \${user_column:sqlstring}\n  UNION\n  SELECT unnest(distinct_values)\n  FROM ${DISTINCT_ROLLUP}\n  ${ROLLUP_WHERE.replaceAll('\n', '\n  ')}\n    AND value_column = \${user_column:sqlstring}\n    AND (bucket < ${WHOLE_DAYS_FROM} OR bucket >= ${WHOLE_DAYS_TO})\n) AS users`,
      ),
    )
    .withPanel(
      new stat.PanelBuilder()
        .title('Loaded up to')
        .description(
          'The sync watermark (sync_state) of each selected source: its records are loaded without a gap up to this instant. Independent of the time range and customers.',
        )
        .datasource(datasourceRef(POSTGRES_DATASOURCE_TYPE))
        .withTarget(
          sqlQuery(
            'A',
            `SELECT\n  source AS "Source",\n  extract(epoch FROM watermark) * 1000 AS "watermark"\nFROM \${schema}.sync_state\nWHERE source = ${SOURCES}\nORDER BY 1`,
            PostgresFormat.Table,
          ),
        )
        .unit('dateTimeFromNow')
        .graphMode(common.BigValueGraphMode.None)
        .colorMode(common.BigValueColorMode.None)
        // One value per row, named by its source.
        .reduceOptions(new common.ReduceDataOptionsBuilder().calcs(['lastNotNull']).values(true))
        .noValue('never synced')
        .height(4)
        .span(6),
    )

    .withRow(new dashboard.RowBuilder('Records per day'))
    .withPanel(
      dailyBars(
        'Records per event type per day',
        `Records of the selected customers per UTC day, by source and event type (rollup column picked in "Event type column"). ${ROLLUP_NOTE}`,
        EVENT_COLUMN,
      ),
    )
    .withPanel(
      dailyBars(
        'Records per customer per day',
        `Records per UTC day, by source and selected customer (rollup column picked in "Customer column"). ${ROLLUP_NOTE}`,
        CUSTOMER_COLUMN,
      ),
    )
    .withPanel(
      new table.PanelBuilder()
        .title('Records per customer')
        .description(
          `Per source and selected customer: records, distinct event types, and the first and last hour with records in the time range. ${ROLLUP_NOTE}`,
        )
        .datasource(datasourceRef(POSTGRES_DATASOURCE_TYPE))
        .withTarget(
          sqlQuery(
            'A',
            `SELECT\n  source AS "Source",\n  ${CUSTOMER_COLUMN} AS "Customer",\n  sum(records) AS "Records",\n  count(DISTINCT ${EVENT_COLUMN}) AS "Event types",\n  min(bucket) AS "First hour",\n  max(bucket) AS "Last hour"\nFROM ${ROLLUP}\n${ROLLUP_WHERE}\nGROUP BY 1, 2\nORDER BY 3 DESC, 1, 2`,
            PostgresFormat.Table,
          ),
        )
        .unit('short')
        .overrideByName('First hour', [{ id: 'unit', value: 'dateTimeAsIso' }])
        .overrideByName('Last hour', [{ id: 'unit', value: 'dateTimeAsIso' }])
        .height(10)
        .span(24),
    )
    .withPanel(
      new table.PanelBuilder()
        .title('Recent records')
        .description(
          `The 100 latest records of the selected sources and customers in the time range, newest first, with their source, the whole payload as stored, and when and by which run their window was loaded (sync_windows.loaded_at and run_id). ${RECORDS_NOTE}`,
        )
        .datasource(datasourceRef(POSTGRES_DATASOURCE_TYPE))
        .withTarget(
          sqlQuery(
            'A',
            `SELECT\n  event_time AS "Event time",\n  source AS "Source",\n  ${EVENT} AS "Event type",\n  ${CUSTOMER} AS "Customer",\n  ${USER} AS "User",\n  payload::text AS "Payload",\n  (SELECT w.loaded_at FROM \${schema}.sync_windows w WHERE w.source = r.source AND w.window_start = r.window_start) AS "Loaded",\n  (SELECT w.run_id FROM \${schema}.sync_windows w WHERE w.source = r.source AND w.window_start = r.window_start) AS "Run"\nFROM ${RECORDS} r\n${WHERE}\nORDER BY event_time DESC, id DESC\nLIMIT 100`,
            PostgresFormat.Table,
          ),
        )
        .unit('none')
        .overrideByName('Event time', [{ id: 'unit', value: 'dateTimeAsIso' }])
        .overrideByName('Loaded', [{ id: 'unit', value: 'dateTimeAsIso' }])
        .height(12)
        .span(24),
    )

    .withRow(new dashboard.RowBuilder('Sync'))
    .withPanel(
      new table.PanelBuilder()
        .title('Sync runs')
        .description(
          'The 100 latest sync runs of the selected sources started in the time range (sync_runs), newest first: the source, the range each covered, what it loaded, how it ended and why it failed.',
        )
        .datasource(datasourceRef(POSTGRES_DATASOURCE_TYPE))
        .withTarget(
          sqlQuery(
            'A',
            `SELECT\n  id AS "Run",\n  source AS "Source",\n  started_at AS "Started",\n  status AS "Status",\n  extract(epoch FROM finished_at - started_at) AS "Duration",\n  range_start AS "From",\n  range_end AS "To",\n  windows AS "Windows",\n  pages AS "Pages",\n  records AS "Records",\n  error AS "Error"\nFROM \${schema}.sync_runs\nWHERE $__timeFilter(started_at)\n  AND source = ${SOURCES}\nORDER BY started_at DESC, id DESC\nLIMIT 100`,
            PostgresFormat.Table,
          ),
        )
        .unit('short')
        .overrideByName('Duration', [{ id: 'unit', value: 's' }])
        .overrideByName('Run', [{ id: 'unit', value: 'none' }])
        .overrideByName('Started', [{ id: 'unit', value: 'dateTimeAsIso' }])
        .overrideByName('From', [{ id: 'unit', value: 'dateTimeAsIso' }])
        .overrideByName('To', [{ id: 'unit', value: 'dateTimeAsIso' }])
        .overrideByName('Status', [
          {
            id: 'mappings',
            value: [
              {
                type: dashboard.MappingType.ValueToText,
                options: {
                  succeeded: { color: 'green', index: 0 },
                  running: { color: 'blue', index: 1 },
                  interrupted: { color: 'orange', index: 2 },
                  failed: { color: 'red', index: 3 },
                  abandoned: { color: 'red', index: 4 },
                },
              },
            ],
          },
          { id: 'custom.cellOptions', value: { type: 'color-text' } },
        ])
        .height(10)
        .span(24),
    )
    .withPanel(
      new timeseries.PanelBuilder()
        .title('Stored and reported records per day')
        .description(
          "Per selected source and UTC day of the windows (sync_windows.window_start): records stored, and the total E6 reported for the same windows. They differ only by records at a window's end, left to the next window; a lasting gap means a window to re-sync. Independent of the customers.",
        )
        .datasource(datasourceRef(POSTGRES_DATASOURCE_TYPE))
        .withTarget(
          sqlQuery(
            'A',
            `SELECT\n  $__timeGroupAlias(window_start, 1d),\n  source AS metric,\n  sum(record_count) AS "stored",\n  sum(total_records) AS "reported by E6"\nFROM \${schema}.sync_windows\nWHERE $__timeFilter(window_start)\n  AND source = ${SOURCES}\nGROUP BY 1, 2\nORDER BY 1, 2`,
            PostgresFormat.TimeSeries,
          ),
        )
        .unit('short')
        .decimals(0)
        .min(0)
        .legend(legend())
        .tooltip(tooltip())
        .height(10)
        .span(24),
    )

    .withRow(new dashboard.RowBuilder('Quarantine'))
    .withPanel(
      countStat(
        'Quarantined records',
        `Records of the selected sources quarantined for the windows in the time range. ${QUARANTINE_NOTE}`,
        `SELECT count(*) AS "quarantined"\nFROM ${QUARANTINE}\nWHERE $__timeFilter(window_start)\n  AND source = ${SOURCES}`,
      )
        .colorMode(common.BigValueColorMode.Background)
        .thresholds(thresholds(1, QUARANTINE_RED))
        .height(10),
    )
    .withPanel(
      new table.PanelBuilder()
        .title('Latest quarantined records')
        .description(
          `The 100 latest quarantined records of the selected sources and of the windows in the time range, newest first, with their source: where in the record (JSON path) and what PostgreSQL jsonb refuses, and the record's JSON text as E6 sent it, cut at ${PAYLOAD_EXCERPT_CHARS} characters (all of it is in records_quarantine.payload_text; U+0000 shows as \\u0000). ${QUARANTINE_NOTE}`,
        )
        .datasource(datasourceRef(POSTGRES_DATASOURCE_TYPE))
        .withTarget(
          sqlQuery(
            'A',
            `SELECT\n  source AS "Source",\n  window_start AS "Window start",\n  window_end AS "Window end",\n  event_time AS "Event time",\n  json_path AS "Path",\n  coalesce(reason, sqlstate || ': ' || message) AS "Reason",\n  CASE WHEN length(payload_text) > ${PAYLOAD_EXCERPT_CHARS} THEN left(payload_text, ${PAYLOAD_EXCERPT_CHARS}) || '…' ELSE payload_text END AS "Payload text",\n  loaded_at AS "Loaded",\n  run_id AS "Run"\nFROM ${QUARANTINE}\nWHERE $__timeFilter(window_start)\n  AND source = ${SOURCES}\nORDER BY id DESC\nLIMIT 100`,
            PostgresFormat.Table,
          ),
        )
        .unit('none')
        .overrideByName('Window start', [{ id: 'unit', value: 'dateTimeAsIso' }])
        .overrideByName('Window end', [{ id: 'unit', value: 'dateTimeAsIso' }])
        .overrideByName('Event time', [{ id: 'unit', value: 'dateTimeAsIso' }])
        .overrideByName('Loaded', [{ id: 'unit', value: 'dateTimeAsIso' }])
        .height(10)
        .span(18),
    );
  withSchemaChanges(builder);
  return finish(builder);
}

/**
 * Issue 26 item 5: the fields and JSON types each source's catalogue gained after its first run
 * (record_field_changes, src/sync/run/field-contract.ts), newest first.
 */
function withSchemaChanges(builder: dashboard.DashboardBuilder): void {
  builder.withRow(new dashboard.RowBuilder('Schema changes')).withPanel(
    new table.PanelBuilder()
      .title('New fields and types')
      .description(
        "The 100 latest top-level record fields, and JSON types of a field, that a selected source's field catalogue (record_fields) gained after the source's first run and in the time range (when the window bringing it committed: Seen), newest first: the source, the field, the type, whether the field was new or a known field got a new type, and the window and run that brought it. Each is also a warning in the log and counted in analytics_exporter_record_fields_new_total. Under FIELD_CONTRACT=freeze the records bringing one are quarantined instead (Reason 'contract: …' in the quarantine table) and show here once they are loaded. Independent of the customers.",
      )
      .datasource(datasourceRef(POSTGRES_DATASOURCE_TYPE))
      .withTarget(
        sqlQuery(
          'A',
          `SELECT\n  seen_at AS "Seen",\n  source AS "Source",\n  path AS "Field",\n  type AS "Type",\n  CASE WHEN new_field THEN 'new field' ELSE 'new type' END AS "Change",\n  window_start AS "Window start",\n  window_end AS "Window end",\n  run_id AS "Run"\nFROM \${schema}.record_field_changes\nWHERE $__timeFilter(seen_at)\n  AND source = ${SOURCES}\nORDER BY seen_at DESC, source, path, type\nLIMIT 100`,
          PostgresFormat.Table,
        ),
      )
      .unit('none')
      .overrideByName('Seen', [{ id: 'unit', value: 'dateTimeAsIso' }])
      .overrideByName('Window start', [{ id: 'unit', value: 'dateTimeAsIso' }])
      .overrideByName('Window end', [{ id: 'unit', value: 'dateTimeAsIso' }])
      .height(8)
      .span(24),
  );
}
