/**
 * The "Analytics history" dashboard: the analytics records the ETL loaded into PostgreSQL (E6 of the
 * platform's API reference), the records it quarantined (`records_quarantine`: records
 * jsonb cannot store), and the sync's own bookkeeping (`sync_runs`, `sync_windows`, `sync_state`;
 * see migrations/).
 *
 * The record schema of E6 is not published, so no field name inside `records.payload` is written
 * into the SQL: each comes from a textbox variable whose default matches the simulator
 * (docs/simulator.md). Values reach the SQL only as string literals through Grafana's
 * `:sqlstring` format (each value single-quoted, quotes doubled), so a field name or customer
 * cannot end the literal. The schema is an identifier and cannot be a literal: its variable lists
 * only the schemas that hold the ETL's tables, and a regex keeps only lower-case SQL identifiers
 * (the rule DATABASE_SCHEMA itself enforces). The time of a record is the `event_time` column
 * (RECORD_TIME_FIELD of the exporter).
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
 * Allowed values of `schema`: what DATABASE_SCHEMA accepts (src/config.ts). Grafana applies it
 * to the schemas the variable's query finds.
 */
export const SCHEMA_REGEX = '/^[a-z_][a-z0-9_]{0,62}$/';

/** The textbox variables naming payload fields, with the simulator's field names as defaults. */
export const FIELD_VARIABLES = [
  { name: 'event_field', label: 'Event type field', default: 'eventType', what: 'the event type' },
  { name: 'customer_field', label: 'Customer field', default: 'customerName', what: 'the customer name' },
  { name: 'customer_id_field', label: 'Customer id field', default: 'customerId', what: 'the customer id' },
  { name: 'user_field', label: 'User field', default: 'userId', what: 'the user id' },
] as const;

type FieldVariable = (typeof FIELD_VARIABLES)[number]['name'];

/**
 * The text at `payload`'s field named by variable `name`: dotted names reach into nested objects
 * (`a.b`), as RECORD_TIME_FIELD does; null when the record has no such field.
 */
const field = (name: FieldVariable): string => `(payload #>> string_to_array(\${${name}:sqlstring}, '.'))`;

const EVENT = field('event_field');
const CUSTOMER = field('customer_field');
const CUSTOMER_ID = field('customer_id_field');
const USER = field('user_field');
const RECORDS = '${schema}.records';
/**
 * Records of the time range and of the customers picked in `$customer`. An array rather than
 * `IN (…)`: when the time range has no customers, `ARRAY[]` still parses and the panels show
 * "No data" instead of a syntax error.
 */
const WHERE = `WHERE $__timeFilter(event_time)\n  AND ${CUSTOMER} = ANY (ARRAY[\${customer:sqlstring}]::text[])`;

const RECORDS_NOTE = 'Records are counted by their own event time (records.event_time, from RECORD_TIME_FIELD); records without one are not shown.';

const QUARANTINE = '${schema}.records_quarantine';
/** Longest payload_text shown in the quarantine table, in characters; the rest is cut with an ellipsis. */
const PAYLOAD_EXCERPT_CHARS = 200;
const QUARANTINE_NOTE =
  'Quarantined records are records E6 sent that PostgreSQL jsonb cannot store (a string holding U+0000 or an unpaired surrogate, nesting deeper than 1000 levels), kept as sent in records_quarantine instead of records; they are placed by their window (window_start), since they may lack an event time. Independent of the customers.';

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

function dailyBars(title: string, description: string, metric: string): timeseries.PanelBuilder {
  return new timeseries.PanelBuilder()
    .title(title)
    .description(description)
    .datasource(datasourceRef(POSTGRES_DATASOURCE_TYPE))
    .withTarget(
      sqlQuery(
        'A',
        `SELECT\n  $__timeGroupAlias(event_time, 1d),\n  coalesce(${metric}, '(none)') AS metric,\n  count(*) AS value\nFROM ${RECORDS}\n${WHERE}\nGROUP BY 1, 2\nORDER BY 1, 2`,
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
        "The record schema is not published: the payload fields used for event type, customer and user are dashboard variables (defaults: the simulator's eventType, customerName, customerId, userId; dotted names reach nested fields). " +
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
    );
  for (const v of FIELD_VARIABLES) {
    builder.withVariable(
      new dashboard.TextBoxVariableBuilder(v.name)
        .label(v.label)
        .description(
          `Field of records.payload holding ${v.what} (dotted for nested fields; default: the simulator's ${v.default}). Used only as an SQL string literal.`,
        )
        .defaultValue(v.default)
        .current({ selected: true, text: v.default, value: v.default }),
    );
  }
  const customerQuery = `SELECT DISTINCT ${CUSTOMER} AS customer\nFROM ${RECORDS}\nWHERE $__timeFilter(event_time)\n  AND ${CUSTOMER} IS NOT NULL\nORDER BY 1`;
  builder
    .withVariable(
      multiSelectVariable('customer', {
        label: 'Customer',
        description: 'Customers (payload field named in "Customer field") with records in the time range.',
        type: POSTGRES_DATASOURCE_TYPE,
        query: customerQuery,
        sort: dashboard.VariableSort.AlphabeticalCaseInsensitiveAsc,
        allowCustomValue: false,
      }),
    )

    .withRow(new dashboard.RowBuilder('Records in the time range'))
    .withPanel(
      countStat('Records', `Records of the selected customers in the time range. ${RECORDS_NOTE}`, `SELECT count(*) AS "records"\nFROM ${RECORDS}\n${WHERE}`),
    )
    .withPanel(
      countStat(
        'Customers',
        'Selected customers with at least one record in the time range.',
        `SELECT count(DISTINCT ${CUSTOMER}) AS "customers"\nFROM ${RECORDS}\n${WHERE}`,
      ),
    )
    .withPanel(
      countStat(
        'Users',
        'Distinct users (payload field named in "User field") of the selected customers in the time range.',
        `SELECT count(DISTINCT ${USER}) AS "users"\nFROM ${RECORDS}\n${WHERE}`,
      ),
    )
    .withPanel(
      new stat.PanelBuilder()
        .title('Loaded up to')
        .description('The sync watermark (sync_state): records are loaded without a gap up to this instant. Independent of the time range and customers.')
        .datasource(datasourceRef(POSTGRES_DATASOURCE_TYPE))
        .withTarget(sqlQuery('A', 'SELECT extract(epoch FROM watermark) * 1000 AS "watermark"\nFROM ${schema}.sync_state', PostgresFormat.Table))
        .unit('dateTimeFromNow')
        .graphMode(common.BigValueGraphMode.None)
        .colorMode(common.BigValueColorMode.None)
        .reduceOptions(lastValue())
        .noValue('never synced')
        .height(4)
        .span(6),
    )

    .withRow(new dashboard.RowBuilder('Records per day'))
    .withPanel(
      dailyBars(
        'Records per event type per day',
        `Records of the selected customers per UTC day, by event type (payload field named in "Event type field"). ${RECORDS_NOTE}`,
        EVENT,
      ),
    )
    .withPanel(
      dailyBars(
        'Records per customer per day',
        `Records per UTC day, by selected customer (payload field named in "Customer field"). ${RECORDS_NOTE}`,
        CUSTOMER,
      ),
    )
    .withPanel(
      new table.PanelBuilder()
        .title('Records per customer')
        .description(`Per selected customer: records, distinct users, distinct event types and the first and last event in the time range. ${RECORDS_NOTE}`)
        .datasource(datasourceRef(POSTGRES_DATASOURCE_TYPE))
        .withTarget(
          sqlQuery(
            'A',
            `SELECT\n  ${CUSTOMER} AS "Customer",\n  ${CUSTOMER_ID} AS "Customer id",\n  count(*) AS "Records",\n  count(DISTINCT ${USER}) AS "Users",\n  count(DISTINCT ${EVENT}) AS "Event types",\n  min(event_time) AS "First event",\n  max(event_time) AS "Last event"\nFROM ${RECORDS}\n${WHERE}\nGROUP BY 1, 2\nORDER BY 3 DESC`,
            PostgresFormat.Table,
          ),
        )
        .unit('short')
        .overrideByName('First event', [{ id: 'unit', value: 'dateTimeAsIso' }])
        .overrideByName('Last event', [{ id: 'unit', value: 'dateTimeAsIso' }])
        .height(10)
        .span(24),
    )
    .withPanel(
      new table.PanelBuilder()
        .title('Recent records')
        .description(`The 100 latest records of the selected customers in the time range, newest first, with the whole payload as stored. ${RECORDS_NOTE}`)
        .datasource(datasourceRef(POSTGRES_DATASOURCE_TYPE))
        .withTarget(
          sqlQuery(
            'A',
            `SELECT\n  event_time AS "Event time",\n  ${EVENT} AS "Event type",\n  ${CUSTOMER} AS "Customer",\n  ${USER} AS "User",\n  payload::text AS "Payload",\n  loaded_at AS "Loaded",\n  run_id AS "Run"\nFROM ${RECORDS}\n${WHERE}\nORDER BY event_time DESC, id DESC\nLIMIT 100`,
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
          'The 100 latest sync runs started in the time range (sync_runs), newest first: the range each covered, what it loaded, how it ended and why it failed.',
        )
        .datasource(datasourceRef(POSTGRES_DATASOURCE_TYPE))
        .withTarget(
          sqlQuery(
            'A',
            'SELECT\n  id AS "Run",\n  started_at AS "Started",\n  status AS "Status",\n  extract(epoch FROM finished_at - started_at) AS "Duration",\n  range_start AS "From",\n  range_end AS "To",\n  windows AS "Windows",\n  pages AS "Pages",\n  records AS "Records",\n  error AS "Error"\nFROM ${schema}.sync_runs\nWHERE $__timeFilter(started_at)\nORDER BY started_at DESC, id DESC\nLIMIT 100',
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
          "Per UTC day of the windows (sync_windows.window_start): records stored, and the total E6 reported for the same windows. They differ only by records at a window's end, left to the next window; a lasting gap means a window to re-sync. Independent of the customers.",
        )
        .datasource(datasourceRef(POSTGRES_DATASOURCE_TYPE))
        .withTarget(
          sqlQuery(
            'A',
            'SELECT\n  $__timeGroupAlias(window_start, 1d),\n  sum(record_count) AS "stored",\n  sum(total_records) AS "reported by E6"\nFROM ${schema}.sync_windows\nWHERE $__timeFilter(window_start)\nGROUP BY 1\nORDER BY 1',
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
        `Records quarantined for the windows in the time range. ${QUARANTINE_NOTE}`,
        `SELECT count(*) AS "quarantined"\nFROM ${QUARANTINE}\nWHERE $__timeFilter(window_start)`,
      )
        .colorMode(common.BigValueColorMode.Background)
        .thresholds(thresholds(1, QUARANTINE_RED))
        .height(10),
    )
    .withPanel(
      new table.PanelBuilder()
        .title('Latest quarantined records')
        .description(
          `The 100 latest quarantined records of the windows in the time range, newest first: where in the record (JSON path) and what PostgreSQL jsonb refuses, and the record's JSON text as E6 sent it, cut at ${PAYLOAD_EXCERPT_CHARS} characters (all of it is in records_quarantine.payload_text; U+0000 shows as \\u0000). ${QUARANTINE_NOTE}`,
        )
        .datasource(datasourceRef(POSTGRES_DATASOURCE_TYPE))
        .withTarget(
          sqlQuery(
            'A',
            `SELECT\n  window_start AS "Window start",\n  window_end AS "Window end",\n  event_time AS "Event time",\n  json_path AS "Path",\n  reason AS "Reason",\n  CASE WHEN length(payload_text) > ${PAYLOAD_EXCERPT_CHARS} THEN left(payload_text, ${PAYLOAD_EXCERPT_CHARS}) || '…' ELSE payload_text END AS "Payload text",\n  loaded_at AS "Loaded",\n  run_id AS "Run"\nFROM ${QUARANTINE}\nWHERE $__timeFilter(window_start)\nORDER BY id DESC\nLIMIT 100`,
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
  return finish(builder);
}
