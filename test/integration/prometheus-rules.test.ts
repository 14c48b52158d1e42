/**
 * Proves prometheus/: the alerting and recording rules (generated from prometheus/src) pass
 * `promtool check rules` with every lint and their own `promtool test rules` unit tests (which make
 * each alert fire and show it quiet, and show each recording rule's value), the example
 * configuration passes `promtool check config` as compose.yaml mounts it, and a real Prometheus
 * scraping the real exporter (simulator → serve → PostgreSQL, test/helpers/stack.ts) evaluates
 * every rule without error, reads real series with every selector, records one series per source,
 * and fires nothing for the healthy stack. docs/runbook.md's PromQL runs in that Prometheus and
 * its SQL in the stack's database.
 *
 * The stack syncs every 10 s, so its sync metrics look healthy by any of the rules' thresholds;
 * the firing cases live in the unit tests, where time can be made to pass.
 */
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { useTestDatabase } from '../helpers/db.js';
import { promtool, type PromApiResponse } from '../helpers/prometheus.js';
import { startStack, type Stack } from '../helpers/stack.js';

const PROMETHEUS_DIR = resolve(dirname(fileURLToPath(import.meta.url)), '../../prometheus');
const CONFIG_FILE = join(PROMETHEUS_DIR, 'prometheus.yml');
const RULES_DIR = join(PROMETHEUS_DIR, 'rules');
const RULES_FILE = join(RULES_DIR, 'analytics-exporter.rules.yml');
const RULES_TEST_FILE = join(RULES_DIR, 'analytics-exporter.rules.test.yml');
/** Where compose.yaml mounts prometheus/ inside the Prometheus container. */
const CONTAINER_CONFIG_DIR = '/etc/prometheus';
const JOB = 'analytics-exporter';

/** An alerting rule as written in the rule file. */
interface AlertRuleSpec {
  alert: string;
  expr: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

/** A recording rule as written in the rule file. */
interface RecordingRuleSpec {
  record: string;
  expr: string;
}

interface RuleFileSpec {
  groups: Array<{ name: string; rules: Array<AlertRuleSpec | RecordingRuleSpec> }>;
}

/** The parts of a promtool unit-test file this test reads. */
interface RuleTestFileSpec {
  rule_files: string[];
  tests: Array<{
    name?: string;
    alert_rule_test?: Array<{ eval_time: string; alertname: string; exp_alerts?: unknown[] }>;
    promql_expr_test?: Array<{ expr: string; eval_time: string; exp_samples?: unknown[] }>;
  }>;
}

interface ScrapeConfigSpec {
  job_name: string;
  scrape_interval?: string;
  scrape_timeout?: string;
  static_configs?: Array<{ targets: string[] }>;
}

interface PrometheusConfigSpec {
  global?: { scrape_interval?: string; scrape_timeout?: string; evaluation_interval?: string };
  rule_files?: string[];
  scrape_configs?: ScrapeConfigSpec[];
}

/** A rule as `/api/v1/rules` reports it (https://prometheus.io/docs/prometheus/latest/querying/api/#rules). */
interface ApiRule {
  type: 'alerting' | 'recording';
  name: string;
  query: string;
  /** `for` in seconds (alerting rules only). */
  duration?: number;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  /** Alerting rules only. */
  state?: 'inactive' | 'pending' | 'firing';
  /** "unknown" until first evaluated, "err" when the last evaluation failed (then lastError says why). */
  health: 'ok' | 'err' | 'unknown';
  lastError?: string;
  /** RFC 3339; "0001-01-01T00:00:00Z" before the first evaluation. */
  lastEvaluation: string;
}

interface ApiRuleGroup {
  name: string;
  file: string;
  rules: ApiRule[];
  /** Evaluation interval in seconds. */
  interval: number;
}

/** Alerts about the exporter process, which has no `source`; every other alert fires per source. */
const PROCESS_ALERTS = ['AnalyticsExporterDown', 'AnalyticsExporterAbsent', 'AnalyticsConfigReloadFailed'];
/** Alerts that judge each source across the replicas of the job (instance and pod aggregated away): they name the job, not an instance. */
const REPLICA_ALERTS = ['AnalyticsSyncStale', 'AnalyticsSyncFailing', 'AnalyticsSyncUnstableInstants'];

const rulesSpec = parse(readFileSync(RULES_FILE, 'utf8')) as RuleFileSpec;
const allRules = rulesSpec.groups.flatMap((group) => group.rules);
const alertRules: AlertRuleSpec[] = allRules.filter((rule): rule is AlertRuleSpec => 'alert' in rule);
const alertNames = alertRules.map((rule) => rule.alert);
const recordingRules: RecordingRuleSpec[] = allRules.filter((rule): rule is RecordingRuleSpec => 'record' in rule);
const recordNames = recordingRules.map((rule) => rule.record);
const RUNBOOK = readFileSync(resolve(PROMETHEUS_DIR, '../docs/runbook.md'), 'utf8');

/** The code blocks of a Markdown text fenced as ```lang, each block's text. */
function codeBlocks(markdown: string, lang: string): string[] {
  return [...markdown.matchAll(new RegExp(`^\`\`\`${lang}\n([\\s\\S]*?)^\`\`\`$`, 'gm'))].map((match) => match[1]!);
}

/** Seconds in a Prometheus duration of one unit, as the rules use them ("5m", "30s", "1h"). */
function durationSeconds(text: string): number {
  const match = /^(\d+)([smh])$/.exec(text);
  if (!match) throw new Error(`Not a one-unit duration: ${JSON.stringify(text)}`);
  return Number(match[1]) * { s: 1, m: 60, h: 3600 }[match[2] as 's' | 'm' | 'h'];
}

/** Every `name{matchers}` selector in a PromQL expression (`up{job="x"}` → `up{job="x"}`). */
function selectors(expr: string): string[] {
  return [...expr.matchAll(/[a-zA-Z_:][a-zA-Z0-9_:]*\{[^}]*\}/g)].map((match) => match[0]);
}

/**
 * GET /api/v1/rules of the Prometheus at `url`: its rule groups with every rule's health, state
 * and last evaluation.
 *
 * @throws Error when the answer is not HTTP 200 with `status: "success"`.
 */
async function getRules(url: string): Promise<ApiRuleGroup[]> {
  const response = await fetch(`${url}/api/v1/rules`);
  const body = (await response.json()) as PromApiResponse<{ groups: ApiRuleGroup[] }>;
  if (response.status !== 200 || body.status !== 'success' || body.data === undefined) {
    throw new Error(`GET ${url}/api/v1/rules answered HTTP ${response.status}: ${JSON.stringify(body)}`);
  }
  return body.data.groups;
}

/** Polls {@link getRules} every 200 ms until `predicate` accepts the rules; returns them. */
async function waitForRules(url: string, predicate: (rules: ApiRule[]) => boolean, timeoutMs: number): Promise<ApiRule[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const rules = (await getRules(url)).flatMap((group) => group.rules);
    if (predicate(rules)) return rules;
    if (Date.now() > deadline) throw new Error(`Timed out after ${timeoutMs} ms waiting for the rules; last seen: ${JSON.stringify(rules, null, 2)}`);
    await new Promise((done) => setTimeout(done, 200));
  }
}

describe('prometheus/rules/analytics-exporter.rules.yml', () => {
  it('passes promtool check rules with every lint, printing nothing but success', async () => {
    const result = await promtool(['check', 'rules', '--lint=all', '--lint-fatal', RULES_FILE]);
    expect(result).toEqual({ code: 0, stdout: `Checking ${RULES_FILE}\n  SUCCESS: ${allRules.length} rules found\n\n`, stderr: '' });
  });

  it('gives every alert a for, a severity, a summary and a description naming the target', () => {
    expect(alertNames).toEqual([
      'AnalyticsExporterDown',
      'AnalyticsExporterAbsent',
      'AnalyticsUpstreamDown',
      'AnalyticsSyncStale',
      'AnalyticsSyncFailing',
      'AnalyticsRecordsQuarantined',
      'AnalyticsSyncUnstableInstants',
      'AnalyticsSyncWindowsParked',
      'AnalyticsAuditDriftLeft',
      'AnalyticsConfigReloadFailed',
    ]);
    for (const rule of alertRules) {
      expect(durationSeconds(rule.for ?? ''), rule.alert).toBeGreaterThanOrEqual(300);
      expect(['warning', 'critical'], rule.alert).toContain(rule.labels?.severity);
      expect(rule.annotations?.summary, rule.alert).toMatch(/\S/);
      expect(rule.annotations?.description, rule.alert).toContain('Runbook:');
      // absent() has no instance to name, and the alerts over the job's replicas none either: they name the job.
      const replicas = REPLICA_ALERTS.includes(rule.alert);
      const target = rule.alert === 'AnalyticsExporterAbsent' || replicas ? '{{ $labels.job }}' : '{{ $labels.instance }}';
      if (replicas) expect(`${rule.annotations?.summary} ${rule.annotations?.description}`, rule.alert).not.toContain('{{ $labels.instance }}');
      else expect(rule.annotations?.summary, rule.alert).toContain(target);
      expect(rule.annotations?.description, rule.alert).toContain(target);
      // The upstream and sync alerts fire per source: they name it.
      if (PROCESS_ALERTS.includes(rule.alert)) continue;
      expect(rule.annotations?.summary, rule.alert).toContain('{{ $labels.source }}');
      expect(rule.annotations?.description, rule.alert).toContain('{{ $labels.source }}');
    }
  });

  it('selects the one scrape job in every selector, of every alerting and recording rule', () => {
    expect(recordingRules.length).toBeGreaterThan(0);
    for (const rule of allRules) {
      const found = selectors(rule.expr);
      const name = 'alert' in rule ? rule.alert : rule.record;
      expect(found.length, name).toBeGreaterThan(0);
      for (const selector of found) expect(selector, name).toMatch(new RegExp(`\\{job="${JOB}"\\}$`));
    }
  });

  it("passes its promtool unit tests, which show every alert firing and quiet, and every recording rule's value", async () => {
    const result = await promtool(['test', 'rules', RULES_TEST_FILE]);
    expect(result.stderr).toBe('');
    expect(result.stdout).toBe(`Unit Testing:  ${RULES_TEST_FILE}\n  SUCCESS\n\n`);
    expect(result.code).toBe(0);

    const tests = parse(readFileSync(RULES_TEST_FILE, 'utf8')) as RuleTestFileSpec;
    expect(tests.rule_files).toEqual(['analytics-exporter.rules.yml']);
    const cases = tests.tests.flatMap((test) => test.alert_rule_test ?? []);
    for (const name of alertNames) {
      const mine = cases.filter((c) => c.alertname === name);
      expect(
        mine.some((c) => (c.exp_alerts ?? []).length > 0),
        `${name} fires in some case`,
      ).toBe(true);
      expect(
        mine.some((c) => (c.exp_alerts ?? []).length === 0),
        `${name} stays quiet in some case`,
      ).toBe(true);
    }
    const exprTests = tests.tests.flatMap((test) => test.promql_expr_test ?? []);
    for (const name of recordNames) {
      expect(
        exprTests.some((t) => t.expr === name && (t.exp_samples ?? []).length > 0),
        `${name} has its value shown in some case`,
      ).toBe(true);
    }
  });
});

describe('prometheus/prometheus.yml', () => {
  const config = parse(readFileSync(CONFIG_FILE, 'utf8')) as PrometheusConfigSpec;

  it('scrapes the exporter as compose.yaml runs it, with the job the rules select', () => {
    expect(config.global).toEqual({ scrape_interval: '30s', scrape_timeout: '10s', evaluation_interval: '30s' });
    expect(config.rule_files).toEqual([`${CONTAINER_CONFIG_DIR}/rules/*.rules.yml`]);
    expect(config.scrape_configs).toHaveLength(1);
    expect(config.scrape_configs?.[0]).toMatchObject({
      job_name: JOB,
      scrape_interval: '30s',
      scrape_timeout: '10s',
      static_configs: [{ targets: ['analytics-exporter:9877'] }],
    });
  });

  it('passes promtool check config in a folder mirroring /etc/prometheus, loading the rules and not their tests', async () => {
    // compose.yaml mounts prometheus/prometheus.yml and prometheus/rules/ under /etc/prometheus;
    // the copy keeps that layout in a temp folder, with only the absolute paths rewritten. The
    // whole rules folder goes along, so the glob is shown to skip the unit-test file.
    const root = mkdtempSync(join(tmpdir(), 'prometheus-config-check-'));
    try {
      const mirror = join(root, 'etc', 'prometheus');
      mkdirSync(join(mirror, 'rules'), { recursive: true });
      for (const file of readdirSync(RULES_DIR)) copyFileSync(join(RULES_DIR, file), join(mirror, 'rules', file));
      const text = readFileSync(CONFIG_FILE, 'utf8');
      expect(text).toContain(`${CONTAINER_CONFIG_DIR}/rules/`);
      writeFileSync(join(mirror, 'prometheus.yml'), text.replaceAll(`${CONTAINER_CONFIG_DIR}/`, `${mirror}/`));

      const result = await promtool(['check', 'config', '--lint=all', '--lint-fatal', join(mirror, 'prometheus.yml')]);
      expect(result.stderr).toBe('');
      expect(result.stdout).toBe(
        [
          `Checking ${mirror}/prometheus.yml`,
          '  SUCCESS: 1 rule files found',
          ` SUCCESS: ${mirror}/prometheus.yml is valid prometheus config file syntax`,
          '',
          `Checking ${mirror}/rules/analytics-exporter.rules.yml`,
          `  SUCCESS: ${allRules.length} rules found`,
          '',
          '',
        ].join('\n'),
      );
      expect(result.code).toBe(0);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});

describe('the rules in a real Prometheus scraping the exporter', () => {
  const db = useTestDatabase();
  let stack: Stack;
  let instance: string;

  beforeAll(async () => {
    stack = await startStack({ databaseUrl: db.url, records: 20_000, ruleFiles: [RULES_FILE] });
    instance = new URL(stack.serve.url).host;
    // The upstream gauge starts at 0 and turns 1 with the first scrape's read; the failure
    // ratio is 0/0 until Prometheus has seen a run finish (the next tick, within 2 s).
    await stack.prometheus.waitFor(`analytics_exporter_upstream_up{job="${JOB}"} == 1`, (r) => r.length === 1, 20_000);
    await stack.prometheus.waitFor(`increase(analytics_exporter_sync_runs_total{job="${JOB}"}[1h]) > 0`, (r) => r.length === 1, 30_000);
  }, 90_000);

  afterAll(async () => {
    await stack?.stop();
  });

  it('loads every rule with its for, and evaluates each without error', async () => {
    const rules = await waitForRules(stack.prometheus.url, (all) => all.length > 0 && all.every((rule) => rule.health !== 'unknown'), 10_000);
    expect(rules.map((rule) => rule.name)).toEqual([...alertNames, ...recordNames]);
    for (const rule of rules.filter((r) => r.type === 'recording')) {
      expect({ name: rule.name, health: rule.health, lastError: rule.lastError ?? '' }).toEqual({ name: rule.name, health: 'ok', lastError: '' });
    }
    for (const rule of rules.filter((r) => r.type === 'alerting')) {
      const spec = alertRules.find((r) => r.alert === rule.name)!;
      expect({ name: rule.name, type: rule.type, health: rule.health, lastError: rule.lastError ?? '' }).toEqual({
        name: spec.alert,
        type: 'alerting',
        health: 'ok',
        lastError: '',
      });
      expect(rule.duration, rule.name).toBe(durationSeconds(spec.for ?? ''));
      expect(rule.labels, rule.name).toEqual(spec.labels);
    }
  });

  it('has no alert firing or pending for the healthy stack', async () => {
    // Every rule's `for` is minutes long, so "not firing" alone would prove little: inactive
    // means each expression is false now, for every series.
    const alerting = (all: ApiRule[]) => all.filter((rule) => rule.type === 'alerting');
    const rules = await waitForRules(
      stack.prometheus.url,
      (all) => alerting(all).length === alertRules.length && alerting(all).every((rule) => rule.state === 'inactive'),
      10_000,
    );
    expect(alerting(rules).map((rule) => [rule.name, rule.state])).toEqual(alertNames.map((name) => [name, 'inactive']));
    expect(await stack.prometheus.query('ALERTS{alertstate="firing"}')).toEqual([]);
    expect(await stack.prometheus.query('ALERTS')).toEqual([]);
  });

  it('parses and evaluates each alert expression through the query API, empty for the healthy stack', async () => {
    for (const rule of alertRules) {
      const answer = await stack.prometheus.queryRaw(rule.expr);
      expect({ alert: rule.alert, status: answer.status, error: answer.error ?? '', resultType: answer.data?.resultType, result: answer.data?.result }).toEqual(
        {
          alert: rule.alert,
          status: 'success',
          error: '',
          resultType: 'vector',
          result: [],
        },
      );
    }
  });

  it('finds series of the real exporter behind every selector the rules use', async () => {
    for (const selector of new Set(allRules.flatMap((rule) => selectors(rule.expr)))) {
      const series = await stack.prometheus.query(selector);
      expect(
        series.map((s) => s.metric.instance),
        selector,
      ).toEqual([instance]);
    }
  });

  it('computes the values behind each threshold from the real metrics, one series per exporter', async () => {
    // Each alert's expression without its comparison, and the values the healthy stack must
    // give: the exporter and its upstream up, seconds since the last success (syncs run every
    // 10 s), no failed run, no quarantined record and no unstable instant (the simulator's
    // records are all storable and its order stable). A changed threshold must be changed here too.
    const thresholds: Record<string, { comparison: RegExp; healthy: (value: number) => boolean }> = {
      AnalyticsExporterDown: { comparison: / == 0$/, healthy: (v) => v === 1 },
      AnalyticsUpstreamDown: { comparison: / == 0$/, healthy: (v) => v === 1 },
      AnalyticsSyncStale: { comparison: /\s*> 2 \* 15 \* 60$/, healthy: (v) => v >= 0 && v < 60 },
      AnalyticsSyncFailing: { comparison: /\s*> 0\.5$/, healthy: (v) => v === 0 },
      AnalyticsRecordsQuarantined: { comparison: / > 0$/, healthy: (v) => v === 0 },
      AnalyticsSyncUnstableInstants: { comparison: / > 2$/, healthy: (v) => v === 0 },
      AnalyticsSyncWindowsParked: { comparison: / > 0$/, healthy: (v) => v === 0 },
      // No audit has run yet (AUDIT_SCHEDULE is daily): exported at 0 from the start.
      AnalyticsAuditDriftLeft: { comparison: / > 0$/, healthy: (v) => v === 0 },
      // The start counts as a good load of CONFIG_FILE (here the environment's one source).
      AnalyticsConfigReloadFailed: { comparison: / == 0$/, healthy: (v) => v === 1 },
    };
    // absent() has no value to show: it is either empty (a target exists) or 1.
    expect(Object.keys(thresholds).sort()).toEqual(alertNames.filter((name) => name !== 'AnalyticsExporterAbsent').sort());

    for (const [alert, { comparison, healthy }] of Object.entries(thresholds)) {
      const expr = alertRules.find((rule) => rule.alert === alert)!.expr.trim();
      const value = expr.replace(comparison, '');
      expect(value, `${alert}: ${comparison} must end its expression`).not.toBe(expr);
      const series = await stack.prometheus.query(value);
      // Per-source alerts keep the source label: the stack runs the environment's one source, `default`;
      // those over the job's replicas drop the instance.
      const perSource = !PROCESS_ALERTS.includes(alert);
      const perInstance = !REPLICA_ALERTS.includes(alert);
      expect(
        series.map((s) => ({ job: s.metric.job, instance: s.metric.instance, ...(perSource ? { source: s.metric.source } : {}) })),
        alert,
      ).toEqual([{ job: JOB, instance: perInstance ? instance : undefined, ...(perSource ? { source: 'default' } : {}) }]);
      const number = Number(series[0]!.value[1]);
      expect(healthy(number), `${alert}: ${value} = ${number}`).toBe(true);
    }
  });
  it("records one series per source of each recording rule, with the healthy stack's values", async () => {
    // Seconds since the last success (syncs run every 10 s), records written (the first run's at
    // least), every read of E7 succeeded, no failed run, no drift left and none repaired (no audit
    // has run: AUDIT_SCHEDULE is daily, its series exported at 0).
    const healthy: Record<string, (value: number) => boolean> = {
      'source:analytics_exporter_sync_lag_seconds': (v) => v >= 0 && v < 60,
      'instance_source:analytics_exporter_sync_records:rate5m': (v) => v > 0,
      'instance_source:analytics_exporter_upstream_up:avg_over_time5m': (v) => v > 0 && v <= 1,
      'source:analytics_exporter_sync_failures:ratio1h': (v) => v === 0,
      'source:analytics_exporter_audit_drift_windows:max': (v) => v === 0,
      'instance_source:analytics_exporter_audit_windows_repaired:increase1d': (v) => v === 0,
    };
    expect(Object.keys(healthy).sort()).toEqual([...recordNames].sort());
    for (const [name, ok] of Object.entries(healthy)) {
      // The latest evaluation may predate the run the stack waited for (0/0 before it): wait for a
      // healthy value, then show whatever is there if none came.
      const series = await stack.prometheus.waitFor(name, (r) => r.length > 0 && ok(Number(r[0]!.value[1])), 20_000).catch(() => stack.prometheus.query(name));
      // `instance_source:` keeps the exporter and the source; `source:` takes the job's exporters together.
      const expected = name.startsWith('instance_source:') ? { job: JOB, instance, source: 'default' } : { job: JOB, source: 'default' };
      expect(
        series.map((s) => ({ ...s.metric })),
        name,
      ).toEqual([{ __name__: name, ...expected }]);
      const value = Number(series[0]!.value[1]);
      expect(ok(value), `${name} = ${value}`).toBe(true);
    }
  });

  it('runs every PromQL query of docs/runbook.md in Prometheus and every SQL query in the database', async () => {
    const promql = codeBlocks(RUNBOOK, 'promql').flatMap((block) => block.split('\n').filter((line) => line.trim() !== ''));
    expect(promql.length).toBeGreaterThan(10);
    for (const query of promql) {
      const answer = await stack.prometheus.queryRaw(query);
      expect({ query, status: answer.status, error: answer.error ?? '' }).toEqual({ query, status: 'success', error: '' });
    }
    const sql = codeBlocks(RUNBOOK, 'sql').flatMap((block) => block.split(';').filter((text) => text.trim() !== ''));
    expect(sql.length).toBeGreaterThanOrEqual(5);
    const pool = db.pool();
    for (const statement of sql) {
      // The runbook names the default schema, which the stack uses; or reads the server's settings and catalogue.
      expect(statement, 'runbook SQL names its tables in the schema analytics').toMatch(
        /\banalytics\.\w+|^\s*show \w+\s*$|\bpg_catalog\.|\bpg_(db_role_setting|roles|database|settings|locks|stat_activity)\b/,
      );
      await expect(pool.query(statement), statement).resolves.toBeDefined();
    }
  });
});
