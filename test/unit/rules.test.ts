/**
 * The rules as a mixin (prometheus/src → prometheus/rules/analytics-exporter.rules.yml): the
 * committed file equals the generator's output byte for byte, the YAML means exactly the rules
 * built (folding never changes a text), every alert links a section of docs/runbook.md that
 * exists, the parameters reach every selector, threshold, range, `for` and text, overrides are
 * validated, recording rules follow `level:metric:operations` over metrics the exporter registers,
 * and the promtool unit-test file covers every alert and recording rule.
 *
 * Regenerate the file with `npm run rules`. promtool itself runs in
 * test/integration/prometheus-rules.test.ts.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { parse } from 'yaml';
import { ZodError } from 'zod';
import { runbookAnchor, type AlertingRule } from '../../prometheus/src/alerts.js';
import { DEFAULT_RULES_CONFIG, rulesConfig } from '../../prometheus/src/config.js';
import { RULES_DIR, RULES_FILE, main } from '../../prometheus/src/generate.js';
import { buildRules, renderRules, wrap } from '../../prometheus/src/rules.js';
import { ExporterMetrics } from '../../src/metrics/registry.js';

const RUNBOOK_FILE = resolve(RULES_DIR, '../../docs/runbook.md');
const TEST_FILE = resolve(RULES_DIR, 'analytics-exporter.rules.test.yml');

const alerts = (file = buildRules()): AlertingRule[] => file.groups[0].rules;
const records = (file = buildRules()) => file.groups[1].rules;
const alert = (name: string, file = buildRules()): AlertingRule => alerts(file).find((rule) => rule.alert === name)!;
/** Every `name{matchers}` selector of a PromQL expression. */
const selectors = (expr: string): string[] => [...expr.matchAll(/[a-zA-Z_:][a-zA-Z0-9_:]*\{[^}]*\}/g)].map((m) => m[0]);

/** The anchors GitHub gives the headings of a Markdown text, by heading level and text. */
function headings(markdown: string): Array<{ level: number; text: string; anchor: string }> {
  return [...markdown.replace(/^```[\s\S]*?^```$/gm, '').matchAll(/^(#{1,6}) (.+)$/gm)].map((m) => ({
    level: m[1]!.length,
    text: m[2]!,
    anchor: runbookAnchor(m[2]!),
  }));
}

/** The text of a `## heading` section of the runbook, up to the next heading of level 2. */
function section(markdown: string, heading: string): string {
  const start = markdown.indexOf(`\n## ${heading}\n`);
  if (start < 0) return '';
  const next = markdown.indexOf('\n## ', start + 1);
  return markdown.slice(start, next < 0 ? undefined : next);
}

describe('the generated rule file', () => {
  it('matches the generator byte for byte', () => {
    const committed = readFileSync(RULES_FILE, 'utf8');
    if (committed !== renderRules()) {
      expect.fail('prometheus/rules/analytics-exporter.rules.yml differs from prometheus/src: run `npm run rules` and commit the result');
    }
  });

  it.each([
    ['the defaults', DEFAULT_RULES_CONFIG],
    [
      'other parameters',
      rulesConfig({
        selector: 'job="ae", namespace=~"prod|stage"',
        syncIntervalMinutes: 60,
        syncFailing: { ratio: 0.25, range: '2h' },
        runbookUrl: 'https://x.example/r.md',
      }),
    ],
  ])('parses to exactly the rules built, for %s (folding keeps every text)', (_name, config) => {
    expect(parse(renderRules(config))).toEqual(buildRules(config));
  });

  it('has an alerting group and a recording group', () => {
    expect(buildRules().groups.map((group) => group.name)).toEqual(['analytics-exporter', 'analytics-exporter.rules']);
    expect(alerts().map((rule) => rule.alert)).toEqual([
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
  });
});

describe('runbook', () => {
  const runbook = readFileSync(RUNBOOK_FILE, 'utf8');
  const anchors = new Set(headings(runbook).map((h) => h.anchor));

  it('is linked by every alert through a runbook_url whose anchor is a heading of docs/runbook.md', () => {
    for (const rule of alerts()) {
      expect(rule.annotations.summary, rule.alert).toMatch(/\S/);
      expect(rule.annotations.description, rule.alert).toMatch(/\S/);
      const [base, anchor, ...rest] = rule.annotations.runbook_url.split('#');
      expect(base, rule.alert).toBe('docs/runbook.md');
      expect(rest, rule.alert).toEqual([]);
      expect(anchors, `${rule.alert}: #${anchor} in docs/runbook.md`).toContain(anchor);
      expect(anchor).toBe(rule.alert.toLowerCase());
    }
  });

  it('has one section per alert, each saying what it means, how to confirm it with a command, and how to fix it', () => {
    const names = alerts().map((rule) => rule.alert);
    const alertSections = headings(runbook).filter((h) => h.level === 2 && /^Analytics[A-Za-z]+$/.test(h.text));
    expect(alertSections.map((h) => h.text)).toEqual(names);
    for (const name of names) {
      const text = section(runbook, name);
      expect(text, name).toContain('**What it means.**');
      expect(text, name).toMatch(/\*\*Fix[.*, ]/);
      const confirm = text.slice(text.indexOf('**Confirm.**'));
      expect(text.indexOf('**Confirm.**'), `${name} has a Confirm part`).toBeGreaterThan(0);
      expect(confirm, `${name}: a command to confirm it`).toMatch(/^```(promql|sql|sh)$/m);
    }
  });

  it('links sections that exist, and names only recording rules that exist', () => {
    for (const [, anchor] of runbook.matchAll(/\]\(#([^)]+)\)/g)) expect(anchors, `#${anchor}`).toContain(anchor);
    const named = new Set([...runbook.matchAll(/\b((?:instance_source|source):analytics_exporter_\w+:?\w*)/g)].map((m) => m[1]!));
    expect([...named].sort()).toEqual(
      records()
        .map((rule) => rule.record)
        .sort(),
    );
  });

  it('builds the address from the runbookUrl parameter', () => {
    const file = buildRules(rulesConfig({ runbookUrl: 'https://git.example/ops/analytics-exporter/-/blob/main/docs/runbook.md' }));
    expect(alert('AnalyticsSyncStale', file).annotations.runbook_url).toBe(
      'https://git.example/ops/analytics-exporter/-/blob/main/docs/runbook.md#analyticssyncstale',
    );
  });
});

describe('parameters', () => {
  it('put the selector into every selector of every rule, and nowhere leave the default job', () => {
    const selector = 'job="ae", namespace=~"prod|stage"';
    const file = buildRules(rulesConfig({ selector }));
    for (const rule of [...alerts(file), ...records(file)]) {
      const found = selectors(rule.expr);
      expect(found.length, rule.expr).toBeGreaterThan(0);
      for (const s of found) expect(s.endsWith(`{${selector}}`), s).toBe(true);
      expect(rule.expr).not.toContain('analytics-exporter');
    }
    expect(alert('AnalyticsExporterAbsent', file).expr).toBe(`absent(up{${selector}})`);
    expect(alert('AnalyticsExporterAbsent', file).annotations.description).toContain(`its scrape job is not named ${selector} as these rules expect`);
  });

  it('set the thresholds, ranges and for durations, and the texts that state them', () => {
    const file = buildRules(
      rulesConfig({
        syncIntervalMinutes: 60,
        syncStale: { intervals: 3 },
        syncFailing: { ratio: 0.25, range: '2h', for: '30m' },
        exporterDown: { for: '10m' },
        exporterAbsent: { for: '1m' },
        upstreamDown: { for: '15m' },
        recordsQuarantined: { range: '6h' },
        syncUnstableInstants: { count: 5, range: '3h', for: '1h' },
        syncWindowsParked: { for: '1m' },
        auditDriftLeft: { for: '2h' },
        configReloadFailed: { for: '20m' },
        databaseSchema: 'stats',
        rateRange: '10m',
      }),
    );
    const down = alert('AnalyticsExporterDown', file);
    expect([down.for, down.annotations.description]).toEqual(['10m', expect.stringContaining('for 10 minutes.')]);
    expect(alert('AnalyticsExporterAbsent', file).annotations.description).toMatch(/^For 1 minute Prometheus/);
    const upstream = alert('AnalyticsUpstreamDown', file);
    expect(upstream.for).toBe('15m');
    expect(upstream.annotations.description).toContain('has failed for 15 minutes:');
    expect(upstream.annotations.description).toContain('source=%q}[15m]) > 0)');
    const stale = alert('AnalyticsSyncStale', file);
    expect(stale.expr).toMatch(/\) > 3 \* 60 \* 60\n$/);
    expect(stale.annotations.description).toContain("(threshold 3h: 3 × SYNC_SCHEDULE's interval of 60 minutes)");
    expect(stale.annotations.description).toContain('from stats.sync_runs where');
    const failing = alert('AnalyticsSyncFailing', file);
    expect([failing.for, failing.expr]).toEqual([
      '30m',
      expect.stringMatching(/\[2h\]\)\)\n {2}\/ sum without \(instance, pod\) \(increase\(.*\[2h\]\)\)\n> 0\.25\n$/),
    ]);
    expect(failing.annotations.summary).toMatch(/failed in the last 2 hours$/);
    expect(failing.annotations.description).toContain('(threshold: more than 25%, for 30 minutes)');
    const quarantined = alert('AnalyticsRecordsQuarantined', file);
    expect(quarantined.expr).toBe('increase(analytics_exporter_sync_records_quarantined_total{job="analytics-exporter"}[6h]) > 0');
    expect(quarantined.annotations.description).toMatch(/^In the last 6 hours the sync/);
    expect(quarantined.annotations.description).toContain('from stats.records_quarantine where');
    const unstable = alert('AnalyticsSyncUnstableInstants', file);
    expect([unstable.for, unstable.expr]).toEqual([
      '1h',
      'sum without (instance, pod) (increase(analytics_exporter_sync_unstable_instants_total{job="analytics-exporter"}[3h])) > 5',
    ]);
    expect(alert('AnalyticsSyncWindowsParked', file).for).toBe('1m');
    expect(alert('AnalyticsAuditDriftLeft', file).for).toBe('2h');
    const reload = alert('AnalyticsConfigReloadFailed', file);
    expect([reload.for, reload.expr]).toEqual(['20m', 'analytics_exporter_config_last_reload_successful{job="analytics-exporter"} == 0']);
    expect(reload.annotations.description).toContain('failed at least 20 minutes ago');
    expect(records(file).map((rule) => rule.record)).toEqual([
      'source:analytics_exporter_sync_lag_seconds',
      'instance_source:analytics_exporter_sync_records:rate10m',
      'instance_source:analytics_exporter_upstream_up:avg_over_time10m',
      'source:analytics_exporter_sync_failures:ratio2h',
      'source:analytics_exporter_audit_drift_windows:max',
      'instance_source:analytics_exporter_audit_windows_repaired:increase1d',
    ]);
  });

  it('share one expression between an alert and the recording rule of its value', () => {
    const byName = Object.fromEntries(records().map((rule) => [rule.record, rule.expr]));
    expect(alert('AnalyticsSyncStale').expr).toBe(`${byName['source:analytics_exporter_sync_lag_seconds']!.trimEnd()} > 2 * 15 * 60\n`);
    expect(alert('AnalyticsSyncFailing').expr).toBe(`${byName['source:analytics_exporter_sync_failures:ratio1h']!.trimEnd()}\n> 0.5\n`);
  });

  it('are validated: an unknown key or a bad value is refused, naming it', () => {
    const refused = (overrides: unknown): string => {
      try {
        rulesConfig(overrides);
      } catch (error) {
        expect(error).toBeInstanceOf(ZodError);
        return (error as ZodError).issues.map((issue) => `${issue.path.join('.')}: ${issue.message}`).join('; ');
      }
      throw new Error(`accepted ${JSON.stringify(overrides)}`);
    };
    expect(refused({ selectr: 'job="x"' })).toMatch(/selectr/);
    expect(refused({ syncStale: { for: '5 minutes' } })).toMatch(/^syncStale\.for: a Prometheus duration of one unit/);
    expect(refused({ syncStale: { lookbak: '1h' } })).toMatch(/lookbak/);
    expect(refused({ selector: '{job="x"}' })).toMatch(/^selector: PromQL label matchers without braces/);
    expect(refused({ selector: 'job="x"} or vector(1) or up{a="b"' })).toMatch(/^selector:/);
    expect(refused({ syncFailing: { ratio: 1 } })).toMatch(/^syncFailing\.ratio/);
    expect(refused({ runbookUrl: 'docs/runbook.md#x' })).toMatch(/^runbookUrl/);
    expect(refused({ databaseSchema: 'Analytics; drop' })).toMatch(/^databaseSchema/);
    expect(refused([])).toMatch(/expected object/);
    // Nested objects merge key by key: the other keys keep their defaults.
    expect(rulesConfig({ syncStale: { intervals: 4 } }).syncStale).toEqual({ ...DEFAULT_RULES_CONFIG.syncStale, intervals: 4 });
    expect(rulesConfig()).toEqual(DEFAULT_RULES_CONFIG);
  });
});

describe('replicas', () => {
  it('judge the sync per source across the replicas of the job, the rest per process', () => {
    // Two serve replicas on one database take turns under the source's lock: a replica that loses it
    // at every tick must not make the source stale, and the runs of both are the source's runs.
    const stale = alert('AnalyticsSyncStale');
    expect(stale.expr).toContain('max without (instance, pod) (max_over_time(analytics_exporter_sync_last_success_timestamp_seconds{');
    expect(stale.expr).toContain('min without (instance, pod) (');
    expect(alert('AnalyticsSyncFailing').expr).toMatch(/^sum without \(instance, pod\) \(increase\(analytics_exporter_sync_failures_total\{/);
    expect(alert('AnalyticsSyncUnstableInstants').expr).toMatch(/^sum without \(instance, pod\) \(increase\(/);
    for (const name of ['AnalyticsSyncStale', 'AnalyticsSyncFailing', 'AnalyticsSyncUnstableInstants']) {
      const { summary, description } = alert(name).annotations;
      expect(`${summary} ${description}`, name).not.toContain('$labels.instance');
      expect(description, name).toContain('{{ $labels.job }}');
    }
    expect(alert('AnalyticsUpstreamDown').annotations.summary).toContain('{{ $labels.instance }}');
  });
});

describe('recording rules', () => {
  it('are named level:metric:operations after a metric the exporter registers', () => {
    const metrics = new Set((new ExporterMetrics().registry.getMetricsAsArray() as unknown as Array<{ name: string }>).map((m) => m.name));
    for (const { record, expr } of records()) {
      const match = /^(instance_source|source):(analytics_exporter_[a-z_]+?)(?::([a-z0-9_]+))?$/.exec(record);
      expect(match, record).not.toBeNull();
      const metric = match![2]!;
      // The metric part is the exporter's, without _total, or (the lag) a quantity derived from it.
      const named = [...expr.matchAll(/\b(analytics_exporter_\w+)\{/g)].map((m) => m[1]!);
      expect(named.length, record).toBeGreaterThan(0);
      for (const name of named) expect(metrics, name).toContain(name);
      if (metric !== 'analytics_exporter_sync_lag_seconds')
        expect(
          named.map((n) => n.replace(/_total$/, '')),
          record,
        ).toContain(metric);
      // instance_source keeps every label of the target; source aggregates `by (job, source)`, or the
      // replicas' labels away (`without (instance, pod)`: every selector inside such an aggregation).
      if (match![1] === 'source') expect(expr).toMatch(/^\w+ by \(job, source\) |\bwithout \(instance, pod\) \(/);
      if (match![1] === 'source' && !expr.includes(' by (job, source) ')) {
        const outside = expr.replace(/\b(?:max|min|sum) without \(instance, pod\) \((?:[^()]|\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*\))*\)/g, '');
        expect(outside, record).not.toMatch(/analytics_exporter_\w+\{/);
      }
    }
  });
});

describe('promtool unit tests (prometheus/rules/analytics-exporter.rules.test.yml)', () => {
  interface TestFile {
    rule_files: string[];
    tests: Array<{
      alert_rule_test?: Array<{ alertname: string; exp_alerts?: Array<{ exp_annotations?: Record<string, string> }> }>;
      promql_expr_test?: Array<{ expr: string; exp_samples?: unknown[] }>;
    }>;
  }
  const file = parse(readFileSync(TEST_FILE, 'utf8')) as TestFile;
  const cases = file.tests.flatMap((test) => test.alert_rule_test ?? []);

  it('show every alert firing, with its runbook_url, and quiet', () => {
    expect(file.rule_files).toEqual(['analytics-exporter.rules.yml']);
    for (const rule of alerts()) {
      const mine = cases.filter((c) => c.alertname === rule.alert);
      expect(
        mine.some((c) => (c.exp_alerts ?? []).length > 0),
        `${rule.alert} fires in some case`,
      ).toBe(true);
      expect(
        mine.some((c) => (c.exp_alerts ?? []).length === 0),
        `${rule.alert} stays quiet in some case`,
      ).toBe(true);
      for (const fired of mine.flatMap((c) => c.exp_alerts ?? [])) expect(fired.exp_annotations?.runbook_url, rule.alert).toBe(rule.annotations.runbook_url);
    }
  });

  it("show every recording rule's value", () => {
    const exprTests = file.tests.flatMap((test) => test.promql_expr_test ?? []);
    for (const { record } of records()) {
      expect(
        exprTests.some((t) => t.expr === record && (t.exp_samples ?? []).length > 0),
        record,
      ).toBe(true);
    }
  });
});

describe('npm run rules', () => {
  it('writes the rules for a JSON file of overrides, and refuses bad usage with status 2', () => {
    const dir = mkdtempSync(join(tmpdir(), 'rules-'));
    const stdout = vi.spyOn(process.stdout, 'write').mockReturnValue(true);
    const stderr = vi.spyOn(process.stderr, 'write').mockReturnValue(true);
    try {
      const overrides = join(dir, 'overrides.json');
      const out = join(dir, 'my.rules.yml');
      writeFileSync(overrides, JSON.stringify({ selector: 'job="ae"', exporterDown: { for: '7m' } }));
      expect(main(['--config', overrides, '--out', out])).toBe(0);
      expect(readFileSync(out, 'utf8')).toBe(renderRules(rulesConfig({ selector: 'job="ae"', exporterDown: { for: '7m' } })));
      expect(stdout).toHaveBeenCalledWith(`wrote ${out}\n`);

      writeFileSync(overrides, JSON.stringify({ exporterDown: { for: 'soon' } }));
      expect(main(['--config', overrides, '--out', out])).toBe(2);
      expect(String(stderr.mock.calls.at(-1)?.[0])).toMatch(/^npm run rules: bad overrides:\n.*at exporterDown\.for/s);
      writeFileSync(overrides, '{ not json');
      expect(main(['--config', overrides, '--out', out])).toBe(2);
      expect(String(stderr.mock.calls.at(-1)?.[0])).toContain(`npm run rules: ${overrides} is not JSON`);
      expect(main(['--confg', overrides])).toBe(2);
      expect(main(['--config', join(dir, 'missing.json'), '--out', out])).toBe(1);
    } finally {
      stdout.mockRestore();
      stderr.mockRestore();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('wraps prose at the width, keeping paragraphs and long words', () => {
    expect(wrap('a bb ccc dddd\n\neeeee   f', 6)).toBe('a bb\nccc\ndddd\n\neeeee\nf');
    expect(wrap('averyveryverylongword x', 5)).toBe('averyveryverylongword\nx');
  });
});
