/**
 * The query of Grafana's PostgreSQL data source (plugin id `grafana-postgresql-datasource`), which
 * the foundation SDK does not ship: a Dataquery variant and its builder, as the SDK's README shows
 * for custom query types.
 *
 * Only raw SQL in code mode is modelled: the dashboards never use the visual query builder, whose
 * `sql` structure would have to be kept in step with `rawSql`. Field names follow the plugin's
 * `SQLQuery` type (public/app/features/plugins/sql/types.ts in Grafana).
 */
import type { Builder, Dataquery } from '@grafana/grafana-foundation-sdk/cog';
import type { DataSourceRef } from '@grafana/grafana-foundation-sdk/common';

/** Plugin id of Grafana's PostgreSQL data source since Grafana 10.4 (formerly `postgres`, still accepted as an alias). */
export const POSTGRES_DATASOURCE_TYPE = 'grafana-postgresql-datasource';

/**
 * How Grafana reads the result. `time_series`: a `time` column (timestamp or epoch seconds,
 * ascending), an optional `metric` column naming the series, and numeric value columns.
 * `table`: rows as they come.
 */
export enum PostgresFormat {
  TimeSeries = 'time_series',
  Table = 'table',
}

/** One PostgreSQL query target as Grafana stores it in a panel's `targets`. */
export interface PostgresQuery {
  refId?: string;
  hide?: boolean;
  datasource?: DataSourceRef;
  /** The SQL, with Grafana's template variables (`${schema}`) and macros (`$__timeFilter(col)`). */
  rawSql: string;
  format: PostgresFormat;
  /** Always true here: the SQL is written by hand, not by the builder. */
  rawQuery: boolean;
  /** `code` keeps Grafana's editor from trying to rebuild the SQL in the visual builder. */
  editorMode: 'code' | 'builder';
  _implementsDataqueryVariant(): void;
}

/** A PostgresQuery for `rawSql`: table format, code mode, no data source (set it with {@link PostgresQueryBuilder.datasource}). */
export const defaultPostgresQuery = (rawSql: string): PostgresQuery => ({
  rawSql,
  format: PostgresFormat.Table,
  rawQuery: true,
  editorMode: 'code',
  _implementsDataqueryVariant() {},
});

/** Builder of a {@link PostgresQuery}, usable wherever the SDK takes a `Builder<Dataquery>` (panel targets). */
export class PostgresQueryBuilder implements Builder<Dataquery> {
  private readonly internal: PostgresQuery;

  /** @param rawSql the query text, kept as is (Grafana interpolates it when the panel runs). */
  constructor(rawSql: string) {
    this.internal = defaultPostgresQuery(rawSql);
  }

  /** The query object; the builder's own, not a copy. */
  build(): PostgresQuery {
    return this.internal;
  }

  /** Sets the query's id within its panel (`A`, `B`, …). */
  refId(refId: string): this {
    this.internal.refId = refId;
    return this;
  }

  /** Hides the query's result from the panel (it still runs). */
  hide(hide: boolean): this {
    this.internal.hide = hide;
    return this;
  }

  /** Sets the data source the query runs on, usually `${datasource}` of the dashboard. */
  datasource(datasource: DataSourceRef): this {
    this.internal.datasource = datasource;
    return this;
  }

  /** Sets how Grafana reads the result (see {@link PostgresFormat}). */
  format(format: PostgresFormat): this {
    this.internal.format = format;
    return this;
  }
}
