/**
 * The rule file as data and as text: the alerting rules (alerts.ts) and the recording rules
 * (recording.ts) for one {@link RulesConfig}, in two groups, rendered as the YAML Prometheus loads
 * (https://prometheus.io/docs/prometheus/latest/configuration/recording_rules/), each rule under
 * the comment that explains it.
 */
import { Document, Scalar, YAMLMap, YAMLSeq } from 'yaml';
import { alertingRules, type AlertingRule, type Commented } from './alerts.js';
import { DEFAULT_RULES_CONFIG, type RulesConfig } from './config.js';
import { recordingRules, type RecordingRule } from './recording.js';

/** Name of the group of alerting rules (the one group of the rule file before the generator). */
export const ALERTS_GROUP = 'analytics-exporter';
/** Name of the group of recording rules. */
export const RECORDING_GROUP = 'analytics-exporter.rules';

/** A rule file of Prometheus: its groups and their rules. */
export interface RuleFile {
  groups: [{ name: typeof ALERTS_GROUP; rules: AlertingRule[] }, { name: typeof RECORDING_GROUP; rules: RecordingRule[] }];
}

/** Line width of the rendered YAML: descriptions and comments are wrapped to it (summaries and expressions are not). */
const LINE_WIDTH = 110;

/** The rules for `config` as data (what the YAML parses to); for a PrometheusRule's `spec`, say. */
export function buildRules(config: RulesConfig = DEFAULT_RULES_CONFIG): RuleFile {
  return {
    groups: [
      { name: ALERTS_GROUP, rules: alertingRules(config).map((item) => item.rule) },
      { name: RECORDING_GROUP, rules: recordingRules(config).map((item) => item.rule) },
    ],
  };
}

function header(config: RulesConfig): string {
  return `Alerting and recording rules for analytics-exporter \`serve\`: the exporter itself, its reads of the
platform's Prometheus text (E7), the scheduled sync (ETL) into PostgreSQL, and the audit.

GENERATED from prometheus/src/ (TypeScript): do not edit by hand. Change the source or its
parameters (prometheus/src/config.ts: the selector, thresholds, ranges and \`for\` durations), then
\`npm run rules\`; test/unit/rules.test.ts fails while this file differs from the source. For another
deployment, write a JSON file of overrides and run
\`npm run rules -- --config overrides.json --out my.rules.yml\`.

Every alert has summary, description and runbook_url: the section of docs/runbook.md
(runbookUrl: ${config.runbookUrl}) saying what it means, how to confirm it and how to fix it.

Loaded by prometheus/prometheus.yml through \`rule_files: [/etc/prometheus/rules/*.rules.yml]\`.
Keep that glob narrower than \`*.yml\`: analytics-exporter.rules.test.yml beside this file holds
promtool's unit tests, and Prometheus refuses to start on it as a rule file.

Tied to your deployment (parameters of the generator):
  - Every selector carries ${config.selector} (selector), the scrape job of prometheus/prometheus.yml.
    Under another job name nothing here matches; AnalyticsExporterAbsent then fires, which is how
    such a mismatch shows.
  - The sync thresholds assume a sync run every ${config.syncIntervalMinutes} minutes (syncIntervalMinutes;
    SYNC_SCHEDULE's default is "*/15 * * * *"); each rule says which number follows it.

When the exporter cannot be scraped its own series go stale, so the upstream and sync alerts resolve
rather than fire: AnalyticsExporterDown / AnalyticsExporterAbsent cover that time.

Sources: one exporter reads one or more sources (the \`sources\` of CONFIG_FILE, or the one named
\`default\` that the environment describes), and labels every upstream and sync series with
\`source\`. The upstream and sync alerts fire per source, each carrying the source's label; the
process alerts (Down, Absent) have no source.

Replicas: several \`serve\` processes of one job on one database (the Kubernetes serve overlay runs
two) take turns at each source's sync under its lock, so the sync's freshness, failure share and
unstable instants (AnalyticsSyncStale, AnalyticsSyncFailing, AnalyticsSyncUnstableInstants and
the \`source:\` recording rules) are judged per source across them (\`instance\` and \`pod\`
aggregated away); the other alerts are per process. Exporters of one job that sync different
databases must name their sources apart.

Tests: \`promtool test rules prometheus/rules/analytics-exporter.rules.test.yml\` (every alert firing
and not firing, every recording rule's value), and test/integration/prometheus-rules.test.ts (a real
Prometheus evaluating these rules against the real exporter).`;
}

/** Indents every line of a comment by one space after its `#`, as the file's comments read. */
const commentText = (text: string): string =>
  text
    .split('\n')
    .map((line) => ` ${line}`)
    .join('\n');

/** Columns before a rule's comment text: the indentation of a rule in its group's list and "# ". */
const RULE_COMMENT_INDENT = 8;

/**
 * Prose reflowed to lines of at most `width` characters (a longer word stays whole on its own
 * line); paragraphs are separated by a blank line in `text` and in the result.
 */
export function wrap(text: string, width: number): string {
  return text
    .split(/\n\s*\n/)
    .map((paragraph) => {
      const lines: string[] = [];
      for (const word of paragraph.split(/\s+/).filter(Boolean)) {
        const last = lines.length - 1;
        if (last >= 0 && lines[last]!.length + 1 + word.length <= width) lines[last] += ` ${word}`;
        else lines.push(word);
      }
      return lines.join('\n');
    })
    .join('\n\n');
}

/** A rule as a YAML map with its comment above it, multi-line expressions as literal blocks (`|`) and descriptions folded (`>-`). */
function ruleNode(doc: Document, item: Commented<AlertingRule | RecordingRule>, first: boolean): YAMLMap {
  const node = doc.createNode(item.rule) as YAMLMap;
  node.commentBefore = commentText(wrap(item.comment, LINE_WIDTH - RULE_COMMENT_INDENT));
  node.spaceBefore = !first;
  const expr = node.get('expr', true) as Scalar;
  if (String(expr.value).includes('\n')) expr.type = Scalar.BLOCK_LITERAL;
  const annotations = node.get('annotations', true) as YAMLMap | undefined;
  const description = annotations?.get('description', true);
  if (description) description.type = Scalar.BLOCK_FOLDED;
  return node;
}

/**
 * The rule file's exact text for `config`: a header comment, then the groups of
 * {@link buildRules}, each rule under its comment; final newline.
 */
export function renderRules(config: RulesConfig = DEFAULT_RULES_CONFIG): string {
  const doc = new Document({});
  doc.commentBefore = commentText(header(config));
  const groups = new YAMLSeq();
  const sets: Array<[string, Array<Commented<AlertingRule | RecordingRule>>]> = [
    [ALERTS_GROUP, alertingRules(config)],
    [RECORDING_GROUP, recordingRules(config)],
  ];
  sets.forEach(([name, items], index) => {
    const group = new YAMLMap();
    group.spaceBefore = index > 0;
    group.set('name', name);
    const rules = new YAMLSeq();
    rules.items = items.map((item, i) => ruleNode(doc, item, i === 0));
    group.set('rules', rules);
    groups.items.push(group);
  });
  doc.contents = new YAMLMap();
  doc.contents.set('groups', groups);
  return foldBlocks(doc.toString({ lineWidth: 0, singleQuote: true }));
}

/**
 * Wraps the one line of each folded block (`>-`, written unfolded) at {@link LINE_WIDTH}: a
 * folded block reads a line break as a space, so the text means the same, and the other
 * scalars (summaries, expressions) stay on their lines as written.
 */
function foldBlocks(text: string): string {
  const lines = text.split('\n');
  return lines
    .flatMap((line, index) => {
      const indent = /^ */.exec(line)![0];
      if (index === 0 || !/: >-$/.test(lines[index - 1]!) || indent.length === 0) return [line];
      return wrap(line, LINE_WIDTH - indent.length)
        .split('\n')
        .map((part) => `${indent}${part}`);
    })
    .join('\n');
}
