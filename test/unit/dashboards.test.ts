/**
 * The Grafana dashboards (grafana/src → grafana/dashboards/*.json) and their provisioning:
 * committed files equal the generator's output byte for byte, every dashboard and panel carries
 * what Grafana and its readers need, no query rates the upstream window counts, every own metric
 * named exists, the SQL touches payload fields only through variables, and the interpolation
 * emulator the integration test relies on behaves like Grafana.
 *
 * Regenerate the files with `UPDATE_DASHBOARDS=1 npx vitest run test/unit/dashboards.test.ts`.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import type { Dashboard, Panel, RowPanel, VariableModel } from '@grafana/grafana-foundation-sdk/dashboard';
import { PROVISIONED } from '../../grafana/src/common.js';
import { DASHBOARDS_DIR, buildDashboards, renderDashboards, writeDashboards } from '../../grafana/src/generate.js';
import { expandSqlMacros, interpolate, intervalSeconds, renderPromQL, renderSql } from '../../grafana/src/interpolate.js';
import { EVENT_FAMILY_REGEX, LOGINS, once } from '../../grafana/src/platform-usage.js';
import { DIMENSION_VARIABLES, FIELD_VARIABLES } from '../../grafana/src/analytics-history.js';
import { ExporterMetrics } from '../../src/metrics/registry.js';

const PROVISIONING_DIR = join(DASHBOARDS_DIR, '..', 'provisioning');
const UPDATE = process.env.UPDATE_DASHBOARDS === '1';

interface Target {
  refId?: string;
  datasource?: { type?: string; uid?: string };
  expr?: string;
  legendFormat?: string;
  format?: string;
  rawSql?: string;
}

/** Panels that show data (rows excluded), with the panels inside collapsed rows. */
function dataPanels(dash: Dashboard): Panel[] {
  return (dash.panels ?? []).flatMap((p: Panel | RowPanel) => (p.type === 'row' ? (p as RowPanel).panels : [p as Panel]));
}

const targets = (panel: Panel) => (panel.targets ?? []) as unknown as Target[];
const dashboards = buildDashboards();
const variables = (dash: Dashboard): VariableModel[] => dash.templating.list ?? [];
/** A variable's query as text: a string in our dashboards (the SDK also allows an object). */
const queryText = (v: VariableModel | undefined): string => (typeof v?.query === 'string' ? v.query : JSON.stringify(v?.query ?? ''));

describe('generated dashboard files', () => {
  it(UPDATE ? 'writes grafana/dashboards/*.json (UPDATE_DASHBOARDS=1)' : 'match the generator byte for byte', () => {
    if (UPDATE) writeDashboards();
    for (const [file, text] of Object.entries(renderDashboards())) {
      let committed: string;
      try {
        committed = readFileSync(join(DASHBOARDS_DIR, file), 'utf8');
      } catch (error) {
        throw new Error(`grafana/dashboards/${file} is missing: run \`UPDATE_DASHBOARDS=1 npx vitest run test/unit/dashboards.test.ts\``, { cause: error });
      }
      if (committed !== text) {
        expect.fail(
          `grafana/dashboards/${file} differs from grafana/src: run \`UPDATE_DASHBOARDS=1 npx vitest run test/unit/dashboards.test.ts\` and commit the result`,
        );
      }
    }
  });
});

describe.each(Object.entries(dashboards))('dashboard %s', (_file, dash) => {
  const dsVariable = variables(dash).find((v) => v.name === 'datasource');

  it('has a uid, title, description, tags and a datasource variable defaulting to a provisioned data source', () => {
    expect(dash.uid).toMatch(/^[a-z0-9-]{8,40}$/);
    expect(dash.title).toBeTruthy();
    expect(dash.description).toBeTruthy();
    expect(dash.tags).toContain('analytics-exporter');
    expect(dsVariable?.type).toBe('datasource');
    const provisioned = Object.values(PROVISIONED).find((p) => p.type === dsVariable?.query);
    expect(provisioned, `datasource variable of type ${queryText(dsVariable)}`).toBeDefined();
    expect(dsVariable?.current?.value).toBe(provisioned!.uid);
  });

  it('gives every panel an id, a unit, a description and the datasource variable', () => {
    const ids = (dash.panels ?? []).map((p) => p.id);
    expect(new Set(ids).size).toBe(ids.length);
    const panels = dataPanels(dash);
    expect(panels.length).toBeGreaterThan(3);
    for (const panel of panels) {
      const where = `${dash.uid} / ${panel.title}`;
      expect(panel.id, where).toBeTypeOf('number');
      expect(panel.description, where).toBeTruthy();
      expect(panel.fieldConfig?.defaults.unit, where).toBeTruthy();
      expect(panel.datasource, where).toEqual({ type: dsVariable!.query, uid: '${datasource}' });
      const ts = targets(panel);
      expect(ts.length, where).toBeGreaterThan(0);
      expect(new Set(ts.map((t) => t.refId)).size, where).toBe(ts.length);
      for (const t of ts) {
        expect(t.datasource, where).toEqual({ type: dsVariable!.query, uid: '${datasource}' });
        expect(t.expr ?? t.rawSql, where).toBeTruthy();
      }
    }
  });

  it('uses only variables it defines', () => {
    const defined = new Set(variables(dash).map((v) => v.name));
    const texts = [...dataPanels(dash).flatMap((p) => targets(p).map((t) => t.expr ?? t.rawSql ?? '')), ...variables(dash).map((v) => queryText(v))];
    for (const text of texts) {
      for (const [, a, b] of text.matchAll(/\$(?:\{(\w+)[^}]*\}|(\w+))/g)) {
        const name = (a ?? b)!;
        // `$1`: label_replace's group reference, which Grafana leaves alone (no variable has that name).
        if (!name.startsWith('__') && !/^\d+$/.test(name)) expect(defined, `$${name} in ${text}`).toContain(name);
      }
    }
  });
});

describe('PromQL of the dashboards', () => {
  const prom = Object.values(dashboards).flatMap((dash) =>
    dataPanels(dash).flatMap((p) => targets(p).flatMap((t) => (t.expr ? [{ dash, panel: p, expr: t.expr }] : []))),
  );

  it('never applies a counter function to the upstream window counts', () => {
    // rate(userlogin_event_count[5m]), increase({__name__=~"...event_count"}[1h]) …
    const counterFn = /\b(rate|irate|increase|delta|idelta|deriv|resets)\s*\([^()]*_event_count/;
    for (const { expr } of prom) expect(expr).not.toMatch(counterFn);
  });

  it('filters every upstream selector of Platform usage by $job, $instance, $source and $customer', () => {
    const usage = prom.filter((q) => q.dash.uid === 'analytics-platform-usage');
    expect(usage.length).toBeGreaterThanOrEqual(10);
    let checked = 0;
    for (const { expr } of usage) {
      for (const [selector] of expr.matchAll(/(?:\w+_event_count)?\{[^}]*\}/g)) {
        checked++;
        expect(selector).toContain('job=~"$job", instance=~"$instance", source=~"$source", customer=~"$customer"');
      }
    }
    expect(checked).toBeGreaterThanOrEqual(usage.length);
    const usageVariables = variables(dashboards['platform-usage.json']!);
    expect(usageVariables.map((v) => v.name)).toEqual(['datasource', 'job', 'instance', 'source', 'customer']);
    expect(queryText(usageVariables.find((v) => v.name === 'source'))).toBe('label_values(userlogin_event_count{job=~"$job", instance=~"$instance"}, source)');
    expect(queryText(usageVariables.find((v) => v.name === 'customer'))).toContain('job=~"$job", instance=~"$instance", source=~"$source"}');
  });

  it('names no upstream family on Platform usage but the one the reference names: the others by pattern', () => {
    // The reference (E7) names userlogin_event_count only; a panel of another name is empty where E7 lacks it.
    const usage = prom.filter((q) => q.dash.uid === 'analytics-platform-usage');
    const texts = [...usage.map((q) => q.expr), ...variables(dashboards['platform-usage.json']!).map((v) => queryText(v))];
    const named = new Set(texts.flatMap((text) => [...text.matchAll(/\b(\w+_event_count)\b/g)].map((m) => m[1]!)));
    expect([...named]).toEqual([LOGINS.metric]);
    const patterned = usage.filter((q) => q.expr.includes(`{__name__=~"${EVENT_FAMILY_REGEX}", `));
    expect(patterned.map((q) => q.panel.title)).toEqual(
      expect.arrayContaining(['All events', 'Event types', 'Events by type now', 'Events by type', 'Top 10 customers by all events', 'Events per customer']),
    );
    // Each of those names its series by the family (label `event`), so every family E7 serves is told apart.
    for (const { panel, expr } of patterned)
      expect(expr, panel.title).toMatch(/\bby \([^)]*\bevent\b[^)]*\)|topk\(10, sum by \(source, customer\)|sum by \(source\) \(/);
  });

  it('takes each upstream number of Platform usage once across instances, never summing replicas', () => {
    // Two serve replicas re-expose the same platform numbers (E7): a sum over instances would count
    // each twice. Every upstream selector sits directly inside `max without (instance, pod) (`, a
    // selector of several families behind label_replace keeping the family's name apart (`event`).
    const usage = prom.filter((q) => q.dash.uid === 'analytics-platform-usage');
    const selector = String.raw`(?:\w+_event_count)?\{[^}]*\}`;
    const wrapped = new RegExp(
      String.raw`max without \(instance, pod\) \((?:\w+_event_count\{[^}]*\}|label_replace\(\{__name__=~[^}]*\}, "event", "\$1", "__name__", "\(\.\+\)_event_count"\))\)`,
      'g',
    );
    for (const { panel, expr } of usage) {
      const where = `${panel.title}: ${expr}`;
      const selectors = [...expr.matchAll(new RegExp(selector, 'g'))].length;
      expect(selectors, where).toBeGreaterThan(0);
      expect([...expr.matchAll(wrapped)].length, where).toBe(selectors);
      // Aggregations over the upstream series all come after the max across instances.
      expect(expr.replace(wrapped, 'X'), where).not.toMatch(/_event_count|__name__/);
    }
    expect(once('userlogin_event_count{job=~"$job"}')).toBe('max without (instance, pod) (userlogin_event_count{job=~"$job"})');
  });

  it('keeps sources apart wherever a query reads a per-source series: every aggregation by source, every legend naming it', () => {
    // Per-source: the upstream families of Platform usage and the exporter's upstream_*, token_* and sync_* families.
    const perSource = prom.filter(({ expr }) => expr.includes('source=~"$source"'));
    expect(perSource.length).toBeGreaterThan(40);
    for (const { panel, expr } of perSource) {
      const where = `${panel.title}: ${expr}`;
      expect(expr, where).not.toMatch(/\b(sum|min|max|avg|count)\s*\(/);
      for (const [, labels] of expr.matchAll(/\b(?:sum|min|max|avg|count) by \(([^)]*)\)/g)) expect(labels!.split(/,\s*/), where).toContain('source');
    }
    for (const panel of Object.values(dashboards).flatMap(dataPanels)) {
      // A table shows the source as a column of its own; every other panel names series by their legend.
      for (const t of targets(panel).filter((t) => t.expr?.includes('source=~"$source"') && t.format !== 'table' && panel.type !== 'table'))
        expect(t.legendFormat, `${panel.title} ${t.refId}`).toContain('{{source}}');
    }
  });

  it('names only metrics the exporter registers (prom-client defaults included)', () => {
    const metrics = new ExporterMetrics();
    const names = new Set<string>();
    for (const metric of metrics.registry.getMetricsAsArray()) {
      const { name, type } = metric as unknown as { name: string; type: string };
      names.add(name);
      if (type === 'histogram') for (const suffix of ['_bucket', '_count', '_sum']) names.add(`${name}${suffix}`);
    }
    const used = new Set(prom.flatMap(({ expr }) => [...expr.matchAll(/\b((?:analytics_exporter|process|nodejs)_\w+)\{/g)].map((m) => m[1]!)));
    expect(used.size).toBeGreaterThan(15);
    for (const name of used) expect(names, name).toContain(name);
  });

  it('selects the exporter by $job and $instance on Exporter health, and its per-source families by $source too', () => {
    const health = prom.filter((q) => q.dash.uid === 'analytics-exporter-health');
    let perSource = 0;
    for (const { expr } of health) {
      for (const [selector, family] of expr.matchAll(/\b(?:analytics_exporter_(\w+)|(?:process|nodejs)_\w+)\{[^}]*\}/g)) {
        if (family !== undefined && /^(upstream|token|sync|audit)_/.test(family)) {
          perSource++;
          expect(selector).toContain('job=~"$job", instance=~"$instance", source=~"$source"}');
        } else expect(selector).toMatch(/\{job=~"\$job", instance=~"\$instance"\}$/);
      }
    }
    expect(perSource).toBeGreaterThan(20);
    const healthVariables = variables(dashboards['exporter-health.json']!);
    expect(healthVariables.map((v) => v.name)).toEqual(['datasource', 'job', 'instance', 'source']);
    expect(queryText(healthVariables.find((v) => v.name === 'source'))).toBe(
      'label_values(analytics_exporter_upstream_up{job=~"$job", instance=~"$instance"}, source)',
    );
  });
});

describe('SQL of Analytics history', () => {
  const dash = dashboards['analytics-history.json']!;
  const sql = [
    ...dataPanels(dash).flatMap((p) => targets(p).map((t) => t.rawSql!)),
    ...variables(dash)
      .filter((v) => v.type === 'query')
      .map((v) => queryText(v)),
  ];

  it('reaches tables only through ${schema}, restricted to SQL identifiers', () => {
    for (const text of sql.filter((s) => !s.includes('information_schema'))) {
      // A subquery (`FROM (`) is checked by its own FROM.
      for (const [, table] of text.matchAll(/(?<!epoch )\b(?:FROM|JOIN)\s+(?!\()([^\s,]+)/gi))
        expect(table).toMatch(
          /^\$\{schema\}\.(records|records_hourly|records_hourly_distinct|records_daily_distinct|record_fields|record_field_changes|derived_settings|records_quarantine|sync_runs|sync_windows|sync_state)$/,
        );
    }
    const schema = variables(dash).find((v) => v.name === 'schema')!;
    expect(schema.regex).toBe('/^[a-z_][a-z0-9_]{0,62}$/');
    expect(schema.allowCustomValue).toBe(false);
  });

  it('keeps only the sources picked in $source, in every panel and in the variables after it', () => {
    const vars = variables(dash);
    expect(vars.map((v) => v.name).slice(0, 3)).toEqual(['datasource', 'schema', 'source']);
    const source = vars.find((v) => v.name === 'source')!;
    expect(queryText(source)).toBe('SELECT DISTINCT source FROM ${schema}.sync_state ORDER BY 1');
    expect(source).toMatchObject({ multi: true, includeAll: true, allowCustomValue: false });
    const filter = 'source = ANY (ARRAY[${source:sqlstring}]::text[])';
    const panelSql = dataPanels(dash).flatMap((p) => targets(p).map((t) => ({ title: p.title, sql: t.rawSql! })));
    expect(panelSql.length).toBeGreaterThan(8);
    for (const { title, sql } of panelSql) expect(sql, title).toContain(filter);
    for (const v of vars.filter((v) => [...FIELD_VARIABLES, { name: 'customer' }].some((f) => f.name === v.name)))
      expect(queryText(v), v.name).toContain(filter);
    // `source` is a column of the rollup but no dimension to pick.
    for (const d of DIMENSION_VARIABLES) expect(queryText(vars.find((v) => v.name === d.name)), d.name).toContain("NOT IN ('source', ");
  });

  it('reads payload fields only by variables, as SQL string literals', () => {
    let checked = 0;
    for (const text of sql) {
      for (const use of [...text.matchAll(/\bpayload\b/g)].map((m) => text.slice(m.index))) {
        checked++;
        expect(use).toMatch(/^payload(::text AS "Payload"| #>> string_to_array\(\$\{(event|customer|user)_field:sqlstring\}, '\.'\)\))/);
      }
      for (const v of FIELD_VARIABLES) expect(text).not.toContain(v.default);
    }
    expect(checked).toBeGreaterThan(4);
  });

  const panels = dataPanels(dash).map((p) => ({ panel: p, sql: targets(p).map((t) => t.rawSql!) }));
  /** The bound on window_start that lets PostgreSQL skip partitions of records (and most of records_hourly's index). */
  const WINDOW_BOUND =
    "window_start > CAST($__timeFrom() AS timestamptz) - INTERVAL '31 days'\n  AND window_start < CAST($__timeTo() AS timestamptz) + INTERVAL '31 days'";
  const readsRecords = (text: string) => /\bFROM \$\{schema\}\.records\s/.test(text);

  it('reads records_hourly wherever a panel counts records, and records only per record or with window_start bounded', () => {
    const rollupPanels = panels.filter(({ sql }) => sql.some((text) => /FROM \$\{schema\}\.records_hourly(_distinct)?\s/.test(text)));
    expect(rollupPanels.map(({ panel }) => panel.title)).toEqual([
      'Records',
      'Customers',
      'Users',
      'Records per event type per day',
      'Records per customer per day',
      'Records per customer',
    ]);
    // Users counts the rows of its union (distinct values), checked below.
    for (const { panel, sql } of rollupPanels.filter(({ panel }) => panel.title !== 'Users')) {
      for (const text of sql) {
        expect(text, panel.title).toMatch(/\bsum\(records\)|count\(DISTINCT \$\{customer_dimension\}\)/);
        expect(text, panel.title).toContain('$__timeFilter(bucket)');
        expect(text, panel.title).toContain(WINDOW_BOUND);
        expect(text, panel.title).not.toMatch(/count\(\*\)|\bpayload\b/);
      }
    }
    const recordPanels = panels.filter(({ sql }) => sql.some(readsRecords));
    // Recent records: record-level. (Users reads the distinct rollup, records_hourly_distinct.)
    expect(recordPanels.map(({ panel }) => panel.title)).toEqual(['Recent records']);
    const users = panels.find(({ panel }) => panel.title === 'Users')!;
    // The whole days from the daily rollup, the hours of the edge days from the hourly one, one
    // UNION (distinct) of the elements of their arrays.
    expect(users.sql).toEqual([
      expect.stringMatching(
        /^SELECT count\(\*\) AS "users"\nFROM \(\n {2}SELECT unnest\(distinct_values\) AS value\n {2}FROM \$\{schema\}\.records_daily_distinct\n[^]*\n {2}UNION\n {2}SELECT unnest\(distinct_values\)\n {2}FROM \$\{schema\}\.records_hourly_distinct\n[^]*\n\) AS users$/,
      ),
    ]);
    expect(users.sql[0]!.match(/AND value_column = \$\{user_column:sqlstring\}/g)).toHaveLength(2);
    expect(users.sql[0]!.match(/source = ANY/g)).toHaveLength(2);
    expect(users.sql[0]!.match(/\$\{customer_dimension\} = ANY/g)).toHaveLength(2);
    expect(users.sql[0]).toContain('$__timeFilter(bucket)');
    expect(users.sql[0]).toContain(WINDOW_BOUND.replaceAll('\n', '\n  '));
    expect(users.sql[0]).not.toMatch(/\bpayload\b|count\(DISTINCT/);
    expect(users.panel.description).toMatch(/whole hours/);
    for (const { panel, sql } of recordPanels) {
      expect(panel.description, panel.title).toMatch(/window_start/);
      for (const text of sql.filter(readsRecords)) {
        expect(text, panel.title).toContain('$__timeFilter(event_time)');
        expect(text, panel.title).toContain(WINDOW_BOUND);
      }
    }
  });

  it('takes field and dimension choices from the catalogue and the rollup columns (query variables, no text boxes)', () => {
    const vars = variables(dash);
    expect(vars.filter((v) => v.type === 'textbox')).toEqual([]);
    for (const f of FIELD_VARIABLES) {
      const v = vars.find((x) => x.name === f.name)!;
      expect(v.type, f.name).toBe('query');
      expect(queryText(v), f.name).toMatch(/FROM \$\{schema\}\.record_fields\b/);
      expect(v.current?.value, f.name).toBe(f.default);
    }
    for (const d of DIMENSION_VARIABLES) {
      const v = vars.find((x) => x.name === d.name)!;
      expect(v.type, d.name).toBe('query');
      expect(queryText(v), d.name).toMatch(/information_schema\.columns .*table_name = 'records_hourly'/);
      // An identifier in the SQL: only existing columns, shaped like ROLLUP_DIMENSIONS columns.
      expect(v.regex, d.name).toBe('/^[a-z_][a-z0-9_]{0,62}$/');
      expect(v.allowCustomValue, d.name).toBe(false);
      expect(v.multi, d.name).toBe(false);
      expect(v.includeAll, d.name).toBe(false);
    }
    expect(queryText(vars.find((v) => v.name === 'customer'))).toMatch(/FROM \$\{schema\}\.records_hourly\b/);
    // The Users panel's field: the ROLLUP_DISTINCT columns the distinct rollup was built for, as a literal.
    const userColumn = vars.find((v) => v.name === 'user_column')!;
    expect(userColumn).toMatchObject({ type: 'query', label: 'User column', allowCustomValue: false, multi: false, includeAll: false });
    expect(queryText(userColumn)).toMatch(
      /FROM \$\{schema\}\.derived_settings, jsonb_array_elements_text\(value -> 'distinct'\)[\s\S]*name = 'rollup_distinct'/,
    );
    expect(userColumn.current?.value).toBe('user_id');
  });
});

describe('provisioning', () => {
  const datasources = parseYaml(readFileSync(join(PROVISIONING_DIR, 'datasources', 'datasources.yaml'), 'utf8')) as {
    apiVersion: number;
    datasources: Array<Record<string, unknown> & { jsonData?: Record<string, unknown>; secureJsonData?: Record<string, unknown> }>;
  };
  const providers = parseYaml(readFileSync(join(PROVISIONING_DIR, 'dashboards', 'dashboards.yaml'), 'utf8')) as {
    apiVersion: number;
    providers: Array<{ type: string; options: { path: string } }>;
  };

  it('provisions the data sources the dashboards default to, on the compose services', () => {
    expect(datasources.apiVersion).toBe(1);
    const byUid = new Map(datasources.datasources.map((d) => [d.uid, d]));
    const prometheus = byUid.get(PROVISIONED.prometheus.uid)!;
    expect(prometheus).toMatchObject({ name: PROVISIONED.prometheus.name, type: 'prometheus', url: 'http://prometheus:9090' });
    const postgres = byUid.get(PROVISIONED.postgres.uid)!;
    expect(postgres).toMatchObject({ name: PROVISIONED.postgres.name, type: 'grafana-postgresql-datasource', url: 'postgres:5432', user: '$POSTGRES_USER' });
    expect(postgres.jsonData?.database).toBe('analytics');
    expect(postgres.secureJsonData?.password).toBe('$POSTGRES_PASSWORD');
  });

  it('loads the dashboards folder compose.yaml mounts', () => {
    expect(providers.apiVersion).toBe(1);
    expect(providers.providers).toEqual([expect.objectContaining({ type: 'file', options: expect.objectContaining({ path: '/var/lib/grafana/dashboards' }) })]);
  });
});

describe('interpolation emulator (grafana/src/interpolate.ts)', () => {
  const vars = [
    { type: 'query', name: 'customer', multi: true, includeAll: true, allValue: '.*' },
    { type: 'query', name: 'pick', multi: true, includeAll: true },
    { type: 'textbox', name: 'field' },
  ] as VariableModel[];
  const range = { from: new Date('2026-10-01T00:00:00Z'), to: new Date('2026-10-08T12:00:00.500Z') };

  it('formats Prometheus values as Grafana does: regex-escaped alternatives, allValue as is', () => {
    const scope = { variables: vars, builtins: { __rate_interval: '1m' } };
    expect(renderPromQL('x{c=~"$customer"}[$__rate_interval]', { ...scope, selections: { customer: { values: ['A.B', 'C|D'] } } })).toBe(
      'x{c=~"(A\\\\.B|C\\\\|D)"}[1m]',
    );
    expect(renderPromQL('x{c=~"$customer"}', { ...scope, selections: { customer: { values: ['A', 'B'], all: true } } })).toBe('x{c=~".*"}');
    expect(renderPromQL('x{c=~"$field"}', { ...scope, selections: { field: { values: ["it's"] } } })).toBe('x{c=~"it\\\\\'s"}');
  });

  it('formats SQL values as Grafana does: sqlstring literals, All as every option', () => {
    const scope = { variables: vars, selections: { pick: { values: ["O'Hara", 'B'], all: true }, field: { values: ["a'b"] } } };
    expect(interpolate('x IN (${pick:sqlstring}) AND y = ${field:sqlstring}', { ...scope, dialect: 'sql' })).toBe("x IN ('O''Hara','B') AND y = 'a''b'");
    expect(interpolate("y = '$field' AND x IN ($pick)", { ...scope, dialect: 'sql' })).toBe("y = 'a''b' AND x IN ('O''Hara','B')");
    expect(interpolate('ARRAY[${pick:sqlstring}]', { ...scope, selections: { pick: { values: [], all: true } }, dialect: 'sql' })).toBe('ARRAY[]');
  });

  it('expands the PostgreSQL macros to the text Grafana produces', () => {
    expect(expandSqlMacros('SELECT $__timeGroupAlias(t, 1d), 1 WHERE $__timeFilter(t) AND $__timeFrom() < $__timeTo()', range)).toBe(
      "SELECT floor(extract(epoch from t)/86400)*86400 AS \"time\", 1 WHERE t BETWEEN '2026-10-01T00:00:00.000Z' AND '2026-10-08T12:00:00.500Z' AND '2026-10-01T00:00:00.000Z' < '2026-10-08T12:00:00.500Z'",
    );
    expect(expandSqlMacros("$__timeGroup(t, '5m', 0) $__unixEpochFilter(u) $__time(t)", range)).toBe(
      'floor(extract(epoch from t)/300)*300 u >= 1790812800 AND u <= 1791460800 t AS "time"',
    );
    expect(intervalSeconds('1w')).toBe(604_800);
  });

  it('fails loudly on what it does not know', () => {
    const scope = { variables: vars, selections: {} };
    expect(() => renderPromQL('x{a="$nope"}', scope)).toThrow(/not defined/);
    // Only a group reference of label_replace is kept, as Grafana keeps it.
    expect(renderPromQL('label_replace(x, "e", "$1", "__name__", "(.+)_y")', scope)).toBe('label_replace(x, "e", "$1", "__name__", "(.+)_y")');
    expect(() => renderPromQL('x{a="$1a"}', scope)).toThrow(/not defined/);
    expect(() => renderPromQL('x{a=~"$customer"}', scope)).toThrow(/no selection/);
    expect(() => renderPromQL('rate(x[$__interval])', scope)).toThrow(/\$__interval has no value/);
    expect(() => renderSql('SELECT $__timeShift(t)', scope, range)).toThrow(/not emulated/);
    expect(() => renderSql('SELECT ${customer:lucene}', { variables: vars, selections: { customer: { values: ['a'] } } }, range)).toThrow(/format "lucene"/);
    expect(() => expandSqlMacros('$__timeGroup(t, 1 day)', range)).toThrow(/interval/);
  });
});
