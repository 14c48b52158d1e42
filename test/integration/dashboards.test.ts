/**
 * The proof that the committed dashboards (grafana/dashboards/*.json) work: every PromQL query of
 * every Prometheus panel and variable runs against a real Prometheus scraping the exporter, and
 * every SQL query of every PostgreSQL panel and variable runs against the real schema the ETL
 * filled, with Grafana's variables and macros expanded by grafana/src/interpolate.ts.
 *
 * The stack reads two sources (production and sandbox, each its own simulator with its own
 * records) into one database, as a CONFIG_FILE with two sources does.
 *
 * Each query runs twice: with every variable on "All", and with real values picked (two
 * customers, the stack's job and instance). A query must parse and, unless it is listed in
 * {@link MAY_BE_EMPTY} (PromQL) or {@link SQL_MAY_BE_EMPTY} with the reason, return data: a
 * non-empty result with a number, or rows.
 * Nothing is skipped: a query the emulator cannot expand fails the test.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import type { Dashboard, VariableModel } from '@grafana/grafana-foundation-sdk/dashboard';
import { renderSql, type Selection } from '../../grafana/src/interpolate.js';
import { useTestDatabase } from '../helpers/db.js';
import { dashboardQueries, evaluatePromQL, hasData, loadDashboards, queryText, resolveVariables, templating, variable } from '../helpers/dashboard-queries.js';
import { startStack, type Stack } from '../helpers/stack.js';

/**
 * Queries allowed to return nothing (dashboard uid / panel title / refId), and why: labelled
 * counters have no series until their first increment, and the demo stack never fails.
 */
const MAY_BE_EMPTY: Record<string, string> = {
  'analytics-exporter-health / Upstream errors by reason / A':
    'upstream_errors_total{reason} has no series until a read of E7 fails; the simulator does not fail',
  'analytics-exporter-health / Invalid upstream lines / A':
    'upstream_invalid_lines_total{reason} has no series until the E7 text has a bad line; the simulator writes none',
  'analytics-exporter-health / Retries and token requests / A':
    'upstream_retries_total{endpoint} has no series until a request is retried; the simulator answers every request',
};

/** SQL queries allowed to return no rows (dashboard uid / panel title / refId), and why. */
const SQL_MAY_BE_EMPTY: Record<string, string> = {
  'analytics-history / Latest quarantined records / A': 'records_quarantine has rows only once E6 sends a record jsonb cannot store; the simulator sends none',
  'analytics-history / New fields and types / A': "record_field_changes has rows only once a source's records change after its first run; the demo's do not",
};

/** The stack's sources, in the order the source variables list them. */
const SOURCES = ['production', 'sandbox'];

const dashboards: Dashboard[] = loadDashboards();
const queries = (type: string) => dashboardQueries(dashboards, type);

/** The values Grafana's query variable would offer: the result, filtered by the variable's `/regex/` if it has one. */
function applyRegex(model: VariableModel, values: string[]): string[] {
  if (!model.regex) return values;
  const m = /^\/(.*)\/([gimsuy]*)$/.exec(model.regex);
  if (!m) throw new Error(`Variable ${model.name}: regex ${model.regex} is not /…/`);
  const re = new RegExp(m[1]!, m[2]);
  return values.filter((v) => re.test(v));
}

describe('dashboards against the demo stack (simulator → serve → PostgreSQL, Prometheus)', () => {
  const db = useTestDatabase();
  let stack: Stack;

  beforeAll(async () => {
    // The audit every 5 s (AUDIT_SCHEDULE), so the Audit row's series exist.
    stack = await startStack({ databaseUrl: db.url, records: 20_000, sources: SOURCES, env: { AUDIT_SCHEDULE: '*/5 * * * * *' } });
    // A run of each source has succeeded, so every per-source panel has series of both.
    await stack.prometheus.waitFor(
      `count(analytics_exporter_sync_last_success_timestamp_seconds{job="${stack.job}"} > 0) == ${SOURCES.length}`,
      (r) => r.length === 1,
      60_000,
    );
    await stack.prometheus.waitFor(
      `count(analytics_exporter_audit_last_run_timestamp_seconds{job="${stack.job}"}) == ${SOURCES.length}`,
      (r) => r.length === 1,
      60_000,
    );
    // A few scrapes, so rate() over counters has two samples and the gauges have history; and an
    // upstream request seen between two scrapes (the next scheduled sync, within 10 s), without
    // which the p95 of request durations is NaN: a quantile of no requests.
    await stack.prometheus.waitFor(`count_over_time(up{job="${stack.job}"}[1m]) >= 4`, (r) => r.length === 1, 30_000);
    await stack.prometheus.waitFor(
      `sum(increase(analytics_exporter_upstream_request_duration_seconds_count{job="${stack.job}"}[1m])) > 0`,
      (r) => r.length === 1,
      30_000,
    );
  }, 90_000);
  afterAll(async () => {
    await stack?.stop();
  });

  it('runs every PromQL query of the Prometheus dashboards, with data where the demo must give data', async () => {
    const now = Date.now() / 1000;
    const variables = await resolveVariables(stack.prometheus.url, dashboards, now);
    for (const [uid, found] of variables.options) for (const [name, values] of found) expect(values.length, `${uid} variable ${name}`).toBeGreaterThan(0);
    const usageVars = variables.options.get('analytics-platform-usage')!;
    expect(usageVars.get('customer')).toEqual(expect.arrayContaining(['Acme AS', 'Nordlys Energi AS']));
    const healthVars = variables.options.get('analytics-exporter-health')!;
    expect(healthVars.get('job')).toEqual([stack.job]);
    expect(healthVars.get('instance')).toEqual([new URL(stack.serve.url).host]);
    expect(healthVars.get('source')).toEqual(SOURCES);
    expect(usageVars.get('source')).toEqual(SOURCES);

    const prom = queries('prometheus');
    expect(prom.length).toBeGreaterThan(40);
    for (const key of Object.keys(MAY_BE_EMPTY))
      expect(
        prom.map((q) => q.key),
        'MAY_BE_EMPTY names a query that exists',
      ).toContain(key);

    // Every query runs, whatever failed before it, so one run lists every problem.
    const problems: string[] = [];
    const empty: string[] = [];
    for (const evaluation of await evaluatePromQL(stack.prometheus.url, prom, variables, now)) {
      const { query, where, series = [] } = evaluation;
      if (evaluation.error !== undefined) {
        problems.push(`${where}: ${evaluation.error}`);
        continue;
      }
      const expr = query.target.expr!;
      // A query of per-source series keeps the sources apart: every series names its source, and
      // with data both sources show (but for a top 10, which may hold one source's customers only).
      if (expr.includes('source=~"$source"') && series.length > 0) {
        const sources = new Set(series.map((s) => s.labels.source));
        const named = series.every((s) => s.labels.source !== undefined);
        const both = sources.size === SOURCES.length && SOURCES.every((name) => sources.has(name));
        if (!named || (!expr.startsWith('topk(') && !both))
          problems.push(`${where}: series of the sources ${JSON.stringify([...sources])}, not one series per source of ${SOURCES.join(', ')}`);
      }
      if (!hasData(evaluation)) {
        empty.push(where);
        if (!(query.key in MAY_BE_EMPTY)) problems.push(`${where}: no data`);
      }
    }
    expect(problems, 'PromQL queries failing or without data').toEqual([]);
    // The allowance is for the demo's quiet counters only: each listed query is empty in both scenarios.
    expect(new Set(empty.map((where) => where.slice(0, where.indexOf(' [')))), 'MAY_BE_EMPTY matches what is empty').toEqual(
      new Set(Object.keys(MAY_BE_EMPTY)),
    );
  }, 60_000);

  it('runs every SQL query of the PostgreSQL dashboard against the ETL schema, each returning rows', async () => {
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    try {
      const range = { from: new Date(Date.now() - 8 * 86_400_000), to: new Date() };
      const run = async (where: string, sql: string) => {
        try {
          return await client.query(sql);
        } catch (error) {
          throw new Error(`${where} failed: ${(error as Error).message}\n${sql}`, { cause: error });
        }
      };
      const panelQueries = (d: Dashboard) => queries('grafana-postgresql-datasource').filter((q) => q.dashboard === d);
      const postgresDashboards = dashboards.filter((d) => variable(d, 'datasource').query === 'grafana-postgresql-datasource');
      expect(postgresDashboards.map((d) => d.uid)).toEqual(['analytics-history']);
      for (const d of postgresDashboards) {
        const vars = templating(d);
        const selections: Record<string, Selection> = {};
        // Query variables run in order, each seeing those before it.
        expect(vars.filter((v) => v.type === 'textbox')).toEqual([]);
        for (const v of vars) {
          if (v.type !== 'query') continue;
          const sql = renderSql(queryText(v), { variables: vars, selections }, range);
          const { rows, fields } = await run(`${d.uid} variable ${v.name}`, sql);
          const values = applyRegex(
            v,
            rows.map((r: Record<string, unknown>) => String(r[fields[0]!.name])),
          );
          expect(values.length, `${d.uid} variable ${v.name}: ${sql}`).toBeGreaterThan(0);
          selections[v.name] = v.includeAll ? { values, all: true } : { values: [String(v.current?.value)] };
          if (!v.includeAll) expect(values, `${d.uid} variable ${v.name} offers its default`).toContain(v.current?.value);
        }
        expect(selections.schema).toEqual({ values: [stack.schema] });
        expect(selections.source).toEqual({ values: SOURCES, all: true });
        // The rollup's customers are exactly the customer ids of the stored records in the range.
        const raw = await run(
          'distinct customers of records',
          `SELECT DISTINCT payload ->> 'customerId' AS c FROM ${stack.schema}.records WHERE event_time BETWEEN '${range.from.toISOString()}' AND '${range.to.toISOString()}' AND payload ->> 'customerId' IS NOT NULL`,
        );
        expect([...selections.customer!.values].sort()).toEqual(raw.rows.map((r: { c: string }) => r.c).sort());
        expect(selections.customer!.values.length).toBeGreaterThan(2);
        const records = panelQueries(d).find((q) => q.key === 'analytics-history / Records / A')!;
        const counted = await run('Records', renderSql(records.target.rawSql!, { variables: vars, selections }, range));
        const stored = await run(
          'count of records',
          `SELECT count(*) AS n FROM ${stack.schema}.records WHERE event_time BETWEEN '${range.from.toISOString()}' AND '${range.to.toISOString()}'`,
        );
        const first = (result: pg.QueryResult, column: string) => Number((result.rows[0] as Record<string, unknown>)[column]);
        expect(first(counted, 'records'), 'Records (rollup) equals count(*) of records').toBe(first(stored, 'n'));
        expect(first(stored, 'n')).toBeGreaterThan(0);
        // One source picked: the panels count that source's records only.
        for (const source of SOURCES) {
          const one = { ...selections, source: { values: [source] } };
          const countedOne = await run(`Records of ${source}`, renderSql(records.target.rawSql!, { variables: vars, selections: one }, range));
          const storedOne = await run(
            `count of records of ${source}`,
            `SELECT count(*) AS n FROM ${stack.schema}.records WHERE source = '${source}' AND event_time BETWEEN '${range.from.toISOString()}' AND '${range.to.toISOString()}'`,
          );
          expect(first(countedOne, 'records'), `Records of ${source} (rollup) equals count(*) of its records`).toBe(first(storedOne, 'n'));
          expect(first(storedOne, 'n'), source).toBeGreaterThan(0);
          expect(first(storedOne, 'n'), source).toBeLessThan(first(stored, 'n'));
        }
        const loaded = panelQueries(d).find((q) => q.key === 'analytics-history / Loaded up to / A')!;
        const watermarks = await run('Loaded up to', renderSql(loaded.target.rawSql!, { variables: vars, selections }, range));
        expect(
          watermarks.rows.map((r: { Source: string }) => r.Source),
          'one watermark per source',
        ).toEqual(SOURCES);
        const users = panelQueries(d).find((q) => q.key === 'analytics-history / Users / A')!;
        const usersCounted = await run('Users', renderSql(users.target.rawSql!, { variables: vars, selections }, range));
        const distinctUsers = await run(
          'distinct users of records',
          `SELECT count(DISTINCT payload ->> 'userId') AS n FROM ${stack.schema}.records WHERE event_time BETWEEN '${range.from.toISOString()}' AND '${range.to.toISOString()}'`,
        );
        expect(first(usersCounted, 'users'), 'Users (distinct rollup) equals count(DISTINCT userId) of records').toBe(first(distinctUsers, 'n'));
        expect(first(distinctUsers, 'n')).toBeGreaterThan(0);

        const picked = { ...selections, customer: { values: selections.customer!.values.slice(0, 2) } };
        // A time range without records: "All" over no customers must still parse (no rows is fine).
        const none = { ...selections, customer: { values: [], all: true } };
        const sqlQueries = panelQueries(d);
        expect(sqlQueries.length).toBeGreaterThan(8);
        for (const key of Object.keys(SQL_MAY_BE_EMPTY))
          expect(
            sqlQueries.map((q) => q.key),
            'SQL_MAY_BE_EMPTY names a query that exists',
          ).toContain(key);
        // Every query runs, whatever failed before it, so one run lists every problem.
        const problems: string[] = [];
        const empty = new Set<string>();
        for (const { key, target } of sqlQueries) {
          for (const [scenario, scope] of [
            ['All', selections],
            ['picked', picked],
            ['no customers', none],
          ] as const) {
            const sql = renderSql(target.rawSql!, { variables: vars, selections: scope }, range);
            const where = `${key} [${scenario}]`;
            let result: pg.QueryResult;
            try {
              result = await client.query(sql);
            } catch (error) {
              problems.push(`${where}: ${(error as Error).message}\n${sql}`);
              continue;
            }
            const { rows, fields } = result;
            if (scenario === 'no customers') continue;
            if (rows.length === 0) {
              empty.add(key);
              if (!(key in SQL_MAY_BE_EMPTY)) problems.push(`${where}: no rows\n${sql}`);
            }
            if (target.format === 'time_series') {
              // What Grafana needs of a time series: a "time" column, ascending, and numeric values.
              const times = rows.map((r: Record<string, unknown>) => Number(r.time));
              if (!fields.some((f) => f.name === 'time')) problems.push(`${where}: no "time" column`);
              else if (times.some((t, i) => !Number.isFinite(t) || (i > 0 && t < times[i - 1]!))) problems.push(`${where}: "time" is not ascending`);
              for (const f of fields.filter((f) => f.name !== 'time' && f.name !== 'metric')) {
                if (rows.some((r: Record<string, unknown>) => !Number.isFinite(Number(r[f.name])))) problems.push(`${where}: column ${f.name} is not numeric`);
              }
            }
          }
        }
        expect(problems, 'SQL queries failing or without rows').toEqual([]);
        // The allowance is for what the demo never produces: each listed query is empty.
        expect(empty, 'SQL_MAY_BE_EMPTY matches what is empty').toEqual(new Set(Object.keys(SQL_MAY_BE_EMPTY)));
      }
    } finally {
      await client.end();
    }
  }, 60_000);
});
