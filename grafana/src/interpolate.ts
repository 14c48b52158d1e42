/**
 * A small, strict stand-in for what Grafana does to a query before the data source runs it, so
 * the tests can run the dashboards' PromQL and SQL against a real Prometheus and PostgreSQL
 * without a Grafana.
 *
 * Two steps, in Grafana's order:
 *
 * 1. **Template variables** ({@link interpolate}), done by Grafana's frontend: `$name`,
 *    `${name}`, `${name:format}` and `[[name]]` are replaced by the selected values, formatted
 *    the way the data source's `interpolateVariable` does when no format is given:
 *    - Prometheus (`interpolateQueryExpr`): a single-value variable is inserted with `\` and `'`
 *      escaped; a multi-value or include-all variable has each value regex-escaped and, for
 *      several, joined as `(a|b)`.
 *    - SQL data sources: a single-value variable is inserted with `'` doubled (no quotes added);
 *      a multi-value or include-all variable has each value single-quoted, joined with `,`.
 *    - "All" inserts the variable's `allValue` as is when it has one, and otherwise every option
 *      (nothing, when the variable has no options).
 *    The explicit formats `sqlstring`, `singlequote`, `doublequote`, `regex`, `pipe`, `csv`
 *    and `raw` are supported. Built-ins (`$__rate_interval`, `$__interval`, `$__range`) come
 *    from the caller; other `$__name` are left for step 2. `$1`, `$2` … (label_replace's group
 *    references) are kept, as Grafana keeps a name no variable has. Anything else unknown throws.
 * 2. **SQL macros** ({@link expandSqlMacros}), done by the PostgreSQL data source's backend
 *    (pkg/tsdb/grafana-postgresql-datasource/macros.go), with the same text it produces:
 *    - `$__time(col)` → `col AS "time"`; `$__timeEpoch(col)` → `extract(epoch from col) as "time"`
 *    - `$__timeFilter(col)` → `col BETWEEN '<from>' AND '<to>'` (ISO 8601 UTC)
 *    - `$__timeFrom()` / `$__timeTo()` → `'<from>'` / `'<to>'`
 *    - `$__timeGroup(col, 1d[, fill])` → `floor(extract(epoch from col)/86400)*86400` (the
 *      interval in seconds; the fill argument only changes Grafana's post-processing, so it is
 *      ignored); `$__timeGroupAlias(...)` adds ` AS "time"`
 *    - `$__unixEpochFilter(col)` → `col >= <from s> AND col <= <to s>`;
 *      `$__unixEpochFrom()` / `$__unixEpochTo()` → seconds
 *    Macro arguments cannot contain `)`, as in Grafana. An unknown macro throws.
 *
 * It is not Grafana: it exists to fail loudly when a dashboard's query would not parse or not
 * return data, and is checked by test/unit/dashboards.test.ts.
 */
import type { VariableModel } from '@grafana/grafana-foundation-sdk/dashboard';

/** Which data source formats values when the query gives no explicit format. */
export type Dialect = 'prometheus' | 'sql';

/** What is selected in one variable. */
export interface Selection {
  /** The selected values; when `all` is set and the variable has no `allValue`, every option of the variable. */
  values: string[];
  /** Whether the "All" option is selected. */
  all?: boolean;
}

/** Everything step 1 needs. */
export interface InterpolationScope {
  dialect: Dialect;
  /** The dashboard's variables (`templating.list`), for multi, includeAll and allValue. */
  variables: VariableModel[];
  /** The selection of every variable a query uses, by name. */
  selections: Record<string, Selection>;
  /** Built-in variables without the `$`, e.g. `{ __rate_interval: '1m', __range: '1h' }`. */
  builtins?: Record<string, string>;
}

/** Grafana's variable syntax (public/app/features/variables/utils.ts `variableRegex`). */
const VARIABLE_REGEX = /\$(\w+)|\[\[(\w+?)(?::(\w+))?\]\]|\$\{(\w+)(?:\.([^:^}]+))?(?::([^}]+))?\}/g;

const escapePromRegular = (value: string): string => value.replace(/\\/g, '\\\\').replace(/'/g, "\\\\'");
const escapePromRegex = (value: string): string => value.replace(/\\/g, '\\\\\\\\').replace(/[$^*{}[\]'+?.()|]/g, '\\\\$&');
const quoteSql = (value: string): string => `'${value.replace(/'/g, "''")}'`;
const escapeRegex = (value: string): string => value.replace(/[\\^$*+?.()|[\]{}/]/g, '\\$&');

function formatExplicit(values: string[], format: string, name: string): string {
  switch (format) {
    case 'sqlstring':
      return values.map(quoteSql).join(',');
    case 'singlequote':
      return values.map((v) => `'${v.replace(/'/g, "\\'")}'`).join(',');
    case 'doublequote':
      return values.map((v) => `"${v.replace(/"/g, '\\"')}"`).join(',');
    case 'regex':
      return values.length === 1 ? escapeRegex(values[0]!) : `(${values.map(escapeRegex).join('|')})`;
    case 'pipe':
      return values.join('|');
    case 'csv':
    case 'raw':
      return values.join(',');
    default:
      throw new Error(`Variable ${name}: format "${format}" is not emulated; extend grafana/src/interpolate.ts`);
  }
}

function formatDefault(values: string[], model: VariableModel, dialect: Dialect): string {
  const many = Boolean(model.multi || model.includeAll);
  if (dialect === 'prometheus') {
    if (!many) return escapePromRegular(values[0] ?? '');
    const escaped = values.map(escapePromRegex);
    return escaped.length === 1 ? escaped[0]! : `(${escaped.join('|')})`;
  }
  return many ? values.map(quoteSql).join(',') : (values[0] ?? '').replace(/'/g, "''");
}

/**
 * Replaces the template variables of `text` as Grafana's frontend does (step 1 above).
 *
 * @returns the text with every variable replaced; `$__name` references that are not built-ins
 *   are kept (they are SQL macros, or Grafana built-ins the query should not use).
 * @throws Error for a variable the dashboard does not define, one without a selection, an
 *   unsupported format, a field path (`${name.field}`), or a built-in the scope lacks when used
 *   without parentheses (`$__interval` but no `__interval` given).
 */
export function interpolate(text: string, scope: InterpolationScope): string {
  return text.replace(
    VARIABLE_REGEX,
    (match, simple?: string, bracket?: string, bracketFormat?: string, braced?: string, fieldPath?: string, bracedFormat?: string, offset?: number) => {
      const name = (simple ?? bracket ?? braced)!;
      const format = bracketFormat ?? bracedFormat;
      // `$1` (label_replace's group reference): Grafana leaves a name no variable has as it is.
      if (simple !== undefined && /^\d+$/.test(simple)) return match;
      if (name.startsWith('__')) {
        const builtin = scope.builtins?.[name];
        if (builtin !== undefined) return builtin;
        // A macro call such as $__timeFilter(col) is the backend's business (step 2).
        if (text[(offset ?? 0) + match.length] === '(') return match;
        throw new Error(`Built-in variable $${name} has no value in this scope (in ${JSON.stringify(text)})`);
      }
      if (fieldPath !== undefined) throw new Error(`Variable field paths (${match}) are not emulated`);
      const model = scope.variables.find((v) => v.name === name);
      if (model === undefined) throw new Error(`Variable $${name} is not defined by the dashboard (in ${JSON.stringify(text)})`);
      const selection = scope.selections[name];
      if (selection === undefined) throw new Error(`Variable $${name} has no selection in this scope`);
      if (selection.all && model.allValue) return model.allValue;
      // "All" over no options is legal (Grafana then inserts nothing); nothing picked otherwise is a test bug.
      if (selection.values.length === 0 && !selection.all) throw new Error(`Variable $${name} has no value selected`);
      return format === undefined ? formatDefault(selection.values, model, scope.dialect) : formatExplicit(selection.values, format, name);
    },
  );
}

/** Seconds of a Grafana interval such as `1d`, `5m`, `'1h'` (quotes and blanks ignored). */
export function intervalSeconds(text: string): number {
  const m = /^(\d+)(ms|s|m|h|d|w)$/.exec(text.trim().replace(/^['"]|['"]$/g, ''));
  if (m === null) throw new Error(`Cannot read the interval ${JSON.stringify(text)} (expected e.g. 30s, 5m, 1h, 1d)`);
  const unit = { ms: 0.001, s: 1, m: 60, h: 3600, d: 86_400, w: 604_800 }[m[2] as 'ms' | 's' | 'm' | 'h' | 'd' | 'w'];
  return Number(m[1]) * unit;
}

/**
 * Expands the PostgreSQL data source's macros in `sql` (step 2 above) for the time range
 * [`from`, `to`].
 *
 * @throws Error for an unknown macro, a wrong number of arguments or an unreadable interval.
 */
export function expandSqlMacros(sql: string, range: { from: Date; to: Date }): string {
  const from = `'${range.from.toISOString()}'`;
  const to = `'${range.to.toISOString()}'`;
  const fromS = Math.floor(range.from.getTime() / 1000);
  const toS = Math.floor(range.to.getTime() / 1000);
  return sql.replace(/\$__(\w+)\(([^)]*)\)/g, (match, macro: string, argText: string) => {
    const args = argText.trim() === '' ? [] : argText.split(',').map((a) => a.trim());
    const need = (min: number, max = min): void => {
      if (args.length < min || args.length > max) throw new Error(`${match}: expected ${min === max ? min : `${min}-${max}`} argument(s)`);
    };
    const group = (): string => {
      need(2, 3);
      const seconds = intervalSeconds(args[1]!);
      return `floor(extract(epoch from ${args[0]})/${seconds})*${seconds}`;
    };
    switch (macro) {
      case 'time':
        need(1);
        return `${args[0]} AS "time"`;
      case 'timeEpoch':
        need(1);
        return `extract(epoch from ${args[0]}) as "time"`;
      case 'timeFilter':
        need(1);
        return `${args[0]} BETWEEN ${from} AND ${to}`;
      case 'timeFrom':
        need(0);
        return from;
      case 'timeTo':
        need(0);
        return to;
      case 'timeGroup':
        return group();
      case 'timeGroupAlias':
        return `${group()} AS "time"`;
      case 'unixEpochFilter':
        need(1);
        return `${args[0]} >= ${fromS} AND ${args[0]} <= ${toS}`;
      case 'unixEpochFrom':
        need(0);
        return String(fromS);
      case 'unixEpochTo':
        need(0);
        return String(toS);
      default:
        throw new Error(`SQL macro ${match} is not emulated; extend grafana/src/interpolate.ts`);
    }
  });
}

/**
 * Both steps for a PostgreSQL query: variables, then macros; then checks nothing is left.
 *
 * @throws Error from {@link interpolate} or {@link expandSqlMacros}, or when a `$__name`
 *   remains in the result (e.g. `$__timeFilter (col)`, which Grafana would not expand either).
 */
export function renderSql(sql: string, scope: Omit<InterpolationScope, 'dialect'>, range: { from: Date; to: Date }): string {
  const out = expandSqlMacros(interpolate(sql, { ...scope, dialect: 'sql' }), range);
  const left = /\$__\w+/.exec(out);
  if (left !== null) throw new Error(`Unexpanded ${left[0]} in ${JSON.stringify(out)}`);
  return out;
}

/**
 * Variables of a PromQL expression, for an instant query against Prometheus.
 *
 * @throws Error from {@link interpolate}, or when a `$__name` remains in the result (a macro
 *   call, which Prometheus queries cannot have).
 */
export function renderPromQL(expr: string, scope: Omit<InterpolationScope, 'dialect'>): string {
  const out = interpolate(expr, { ...scope, dialect: 'prometheus' });
  const left = /\$__\w+/.exec(out);
  if (left !== null) throw new Error(`Unexpanded ${left[0]} in ${JSON.stringify(out)}`);
  return out;
}
