/**
 * The committed dashboards (grafana/dashboards/*.json) as the integration tests run them: their
 * targets by data source, their variables resolved against a real Prometheus, and every PromQL
 * target evaluated as Grafana would (variables substituted by grafana/src/interpolate.ts),
 * twice: with every variable on "All", and with the first two values of each picked.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Dashboard, Panel, RowPanel, VariableModel } from '@grafana/grafana-foundation-sdk/dashboard';
import { DASHBOARDS_DIR } from '../../grafana/src/generate.js';
import { renderPromQL, type Selection } from '../../grafana/src/interpolate.js';

/** Grafana's built-ins as the emulator substitutes them (the tests scrape every second). */
export const BUILTINS = { __rate_interval: '1m', __interval: '15s', __range: '1h' };

export interface Target {
  refId: string;
  datasource: { type: string; uid: string };
  expr?: string;
  instant?: boolean;
  range?: boolean;
  rawSql?: string;
  format?: string;
}

export interface DashboardQuery {
  /** dashboard uid / panel title / refId */
  key: string;
  dashboard: Dashboard;
  target: Target;
}

/** One series of a query's result: its labels and its values as Prometheus prints them. */
export interface Series {
  labels: Record<string, string>;
  values: string[];
}

/** The three committed dashboards, as Grafana's provisioning reads them. */
export function loadDashboards(): Dashboard[] {
  return ['platform-usage.json', 'analytics-history.json', 'exporter-health.json'].map(
    (file) => JSON.parse(readFileSync(join(DASHBOARDS_DIR, file), 'utf8')) as Dashboard,
  );
}

/** Every target of data source `type` of every panel (inside rows too) of `dashboards`. */
export function dashboardQueries(dashboards: Dashboard[], type: string): DashboardQuery[] {
  return dashboards.flatMap((dashboard) =>
    (dashboard.panels ?? [])
      .flatMap((p: Panel | RowPanel) => (p.type === 'row' ? (p as RowPanel).panels : [p as Panel]))
      .flatMap((panel) =>
        ((panel.targets ?? []) as unknown as Target[])
          .filter((t) => t.datasource.type === type)
          .map((target) => ({ key: `${dashboard.uid} / ${panel.title} / ${target.refId}`, dashboard, target })),
      ),
  );
}

export const templating = (d: Dashboard): VariableModel[] => d.templating.list ?? [];
/** A variable's query as text: a string in our dashboards (the SDK also allows an object). */
export const queryText = (v: VariableModel | undefined): string => (typeof v?.query === 'string' ? v.query : JSON.stringify(v?.query ?? ''));
export const variable = (d: Dashboard, name: string): VariableModel => {
  const found = templating(d).find((v) => v.name === name);
  if (!found) throw new Error(`${d.uid} has no variable ${name}`);
  return found;
};

/** Variables of `label_values(selector, label)`, Grafana's function, answered by the label values API. */
const LABEL_VALUES = /^label_values\((.+),\s*(\w+)\)$/;

/** A Prometheus HTTP API call (GET: the label values API takes no POST in Prometheus 2.42), failing on any error answer. */
export async function promApi<T>(url: string, path: string, params: Record<string, string>): Promise<T> {
  const response = await fetch(`${url}${path}?${new URLSearchParams(params).toString()}`);
  const text = await response.text();
  let body: { status: string; data?: T; error?: string; errorType?: string };
  try {
    body = JSON.parse(text) as typeof body;
  } catch {
    throw new Error(`Prometheus ${path} answered HTTP ${response.status}: ${text.slice(0, 300)}`);
  }
  if (body.status !== 'success' || body.data === undefined) throw new Error(`Prometheus ${path} ${JSON.stringify(params)}: ${body.errorType}: ${body.error}`);
  return body.data;
}

/** Series of an instant query's vector (or scalar, without labels) at `now` (Unix seconds). */
async function instantSeries(url: string, expr: string, now: number): Promise<Series[]> {
  const data = await promApi<{ resultType: string; result: unknown }>(url, '/api/v1/query', { query: expr, time: String(now) });
  if (data.resultType === 'scalar') return [{ labels: {}, values: [(data.result as [number, string])[1]] }];
  if (data.resultType !== 'vector') throw new Error(`an instant query gave a ${data.resultType}`);
  return (data.result as Array<{ metric: Record<string, string>; value: [number, string] }>).map((sample) => ({
    labels: sample.metric,
    values: [sample.value[1]],
  }));
}

/** Series of a range query over the two minutes before `now` at a 5 s step, as Grafana runs time series targets. */
async function rangeSeries(url: string, expr: string, now: number, target: Target): Promise<Series[]> {
  if (target.range !== true) throw new Error('a target neither instant nor range');
  const data = await promApi<{ resultType: string; result: Array<{ metric: Record<string, string>; values: Array<[number, string]> }> }>(
    url,
    '/api/v1/query_range',
    { query: expr, start: String(now - 120), end: String(now), step: '5' },
  );
  if (data.resultType !== 'matrix') throw new Error(`a range query gave a ${data.resultType}`);
  return data.result.map((series) => ({ labels: series.metric, values: series.values.map((v) => v[1]) }));
}

/** Each Prometheus dashboard's variables: the values each offers, and "All" of each. */
export interface ResolvedVariables {
  /** dashboard uid → variable → the values it offers */
  options: Map<string, Map<string, string[]>>;
  /** dashboard uid → every variable on All */
  all: Map<string, Record<string, Selection>>;
}

/**
 * Resolves the query variables of every Prometheus dashboard in order (each seeing those before
 * it on All), through `/api/v1/label/<label>/values` over the hour before `now`.
 *
 * @throws Error when a variable is not `label_values(selector, label)` or Prometheus refuses it.
 */
export async function resolveVariables(url: string, dashboards: Dashboard[], now: number): Promise<ResolvedVariables> {
  const window = { start: String(now - 3600), end: String(now) };
  const options = new Map<string, Map<string, string[]>>();
  const allSelections = new Map<string, Record<string, Selection>>();
  for (const d of dashboards.filter((d) => variable(d, 'datasource').query === 'prometheus')) {
    const found = new Map<string, string[]>();
    const all: Record<string, Selection> = {};
    for (const v of templating(d).filter((v) => v.type === 'query')) {
      const m = LABEL_VALUES.exec(queryText(v));
      if (!m) throw new Error(`${d.uid} variable ${v.name}: ${queryText(v)} is not label_values(selector, label)`);
      const selector = renderPromQL(m[1]!, { variables: templating(d), selections: all, builtins: BUILTINS });
      const values = await promApi<string[]>(url, `/api/v1/label/${m[2]}/values`, { 'match[]': selector, ...window });
      found.set(v.name, values);
      all[v.name] = { values, all: true };
    }
    options.set(d.uid!, found);
    allSelections.set(d.uid!, all);
  }
  return { options, all: allSelections };
}

/** One evaluation of one target in one scenario. */
export interface Evaluation {
  query: DashboardQuery;
  scenario: 'All' | 'picked';
  /** The PromQL as Prometheus ran it. */
  expr: string;
  /** `<key> [<scenario>]: <expr>` */
  where: string;
  /** The series, or the error Prometheus (or the emulator) gave. */
  series?: Series[];
  error?: string;
}

/**
 * Runs every target of `queries` twice (every variable on All; the first two values of each
 * picked) at `now`: instant targets as instant queries, the others as range queries.
 *
 * @returns every evaluation, errors included (nothing throws, so one run lists every problem).
 */
export async function evaluatePromQL(url: string, queries: DashboardQuery[], variables: ResolvedVariables, now: number): Promise<Evaluation[]> {
  const evaluations: Evaluation[] = [];
  for (const query of queries) {
    const { dashboard, target, key } = query;
    const picked: Record<string, Selection> = Object.fromEntries(
      [...variables.options.get(dashboard.uid!)!].map(([name, values]) => [name, { values: values.slice(0, 2) }]),
    );
    for (const [scenario, selections] of [
      ['All', variables.all.get(dashboard.uid!)!],
      ['picked', picked],
    ] as const) {
      let expr = target.expr!;
      try {
        expr = renderPromQL(target.expr!, { variables: templating(dashboard), selections, builtins: BUILTINS });
        const series = target.instant ? await instantSeries(url, expr, now) : await rangeSeries(url, expr, now, target);
        evaluations.push({ query, scenario, expr, where: `${key} [${scenario}]: ${expr}`, series });
      } catch (error) {
        evaluations.push({ query, scenario, expr, where: `${key} [${scenario}]: ${expr}`, error: (error as Error).message });
      }
    }
  }
  return evaluations;
}

/** Whether an evaluation has data: at least one number (a histogram_quantile over no requests gives NaN). */
export const hasData = (e: Evaluation): boolean => (e.series ?? []).some((s) => s.values.some((v) => v !== 'NaN'));
