/**
 * The generated files of deploy/kubernetes/monitoring/ agree with their sources: the
 * PrometheusRule with prometheus/rules/analytics-exporter.rules.yml and the dashboards' copies
 * with grafana/dashboards/*.json (scripts/kubernetes.ts; regenerate with `npm run kubernetes:generate`).
 * Rendering the overlays with kubectl, validating them against the schemas and running promtool
 * on the rendered rules is test/integration/kubernetes.test.ts.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import {
  DASHBOARD_COPIES_DIR,
  dashboardFiles,
  kubernetesDrift,
  MONITORING_DIR,
  PROMETHEUS_RULE_FILE,
  renderPrometheusRule,
  ROOT,
  RULES_FILE,
} from '../../scripts/kubernetes.js';

const read = (path: string): string => readFileSync(join(ROOT, path), 'utf8');

interface Generator {
  name: string;
  files?: string[];
}

describe('deploy/kubernetes/monitoring', () => {
  it('holds the files scripts/kubernetes.ts generates, byte for byte (npm run kubernetes:generate)', () => {
    expect(kubernetesDrift(), 'files that differ from their sources: run npm run kubernetes:generate').toEqual([]);
  });

  it('has a PrometheusRule whose groups are those of the rule file', () => {
    const rule = parse(read(PROMETHEUS_RULE_FILE)) as { kind: string; spec: { groups: unknown } };
    expect(rule.kind).toBe('PrometheusRule');
    expect(rule.spec.groups).toEqual((parse(read(RULES_FILE)) as { groups: unknown }).groups);
  });

  it('sees a change to the rule file as drift', () => {
    const text = read(RULES_FILE);
    const changed = text.replace(/for: 5m/, 'for: 6m');
    expect(changed).not.toBe(text);
    expect(renderPrometheusRule(changed)).not.toBe(read(PROMETHEUS_RULE_FILE));
    expect(() => renderPrometheusRule('rules: []\n')).toThrow(/no `groups` sequence/);
  });

  it('turns every dashboard, and nothing else, into a ConfigMap labelled for the Grafana sidecar', () => {
    const kustomization = parse(read(`${MONITORING_DIR}/kustomization.yaml`)) as {
      generatorOptions: { labels: Record<string, string>; disableNameSuffixHash: boolean };
      configMapGenerator: Generator[];
    };
    expect(kustomization.generatorOptions.labels.grafana_dashboard).toBe('1');
    expect(kustomization.generatorOptions.disableNameSuffixHash).toBe(true);
    const files = kustomization.configMapGenerator.flatMap((generator) => generator.files ?? []);
    expect(files.sort()).toEqual(dashboardFiles().map((name) => `dashboards/${name}`));
    expect(dashboardFiles()).toHaveLength(3);
    for (const name of dashboardFiles()) expect(read(`${DASHBOARD_COPIES_DIR}/${name}`)).toBe(read(`grafana/dashboards/${name}`));
  });
});
