/**
 * The model of Prometheus exposition text that the parser produces and the serializers consume.
 *
 * Glossary:
 * - **exposition format**: the text a Prometheus target serves on `/metrics`. We read the
 *   Prometheus text format 0.0.4 (the platform's E7 endpoint, `GET /analytics/prometheus`, and
 *   prom-client's output) and write either text 0.0.4 or OpenMetrics 1.0.0.
 * - **metric family**: the unit that `# HELP` and `# TYPE` describe: one name, one type, one help
 *   text and the samples that belong to it. A histogram `x` owns the sample names `x_bucket`,
 *   `x_sum` and `x_count`; a summary `x` owns `x` (with a `quantile` label), `x_sum` and `x_count`;
 *   every other family owns only its own name.
 * - **sample**: one line `name{labels} value [timestamp]`: a float value, optionally with a
 *   timestamp in integer milliseconds since the epoch.
 * - **series**: what a sample's name and label set identify. Label order does not matter, and a
 *   label with an empty value is the same as no label at all (Prometheus drops such labels), so
 *   `x{a="1",b=""}` and `x{a="1"}` are one series. An exposition carries each series at most once.
 * - **untyped**: a family without a `# TYPE` line (or with `# TYPE x untyped`). The upstream
 *   usually sends only untyped samples. OpenMetrics calls this type `unknown`.
 */

/** The five types of the text format 0.0.4. */
export type MetricType = 'counter' | 'gauge' | 'histogram' | 'summary' | 'untyped';

/** The types in the order the text format's documentation lists them. */
export const METRIC_TYPES: readonly MetricType[] = ['counter', 'gauge', 'histogram', 'summary', 'untyped'];

export interface Sample {
  /** The sample's full name, e.g. `x_bucket` for a bucket of histogram `x`. */
  name: string;
  /** Label pairs in the order they were written; names unique, none starting with `__`. */
  labels: Array<[string, string]>;
  /** Any float64, including NaN, +Inf, -Inf and -0. */
  value: number;
  /** Milliseconds since the Unix epoch: a non-negative safe integer, when the line carried one. */
  timestampMs?: number;
}

export interface MetricFamily {
  name: string;
  type: MetricType;
  /** Help text, unescaped. Absent when there was none (an empty HELP counts as none). */
  help?: string;
  samples: Sample[];
}

/**
 * Why a line was dropped. These become values of a metric label
 * (`..._upstream_invalid_lines_total{reason}`), so the set is small, snake_case and stable:
 * adding one is fine, renaming one breaks dashboards and alerts.
 *
 * - `bad_syntax`: the line does not have the shape of a sample or comment: an unterminated
 *   quote or brace, a missing `=` or comma, trailing garbage after the value or timestamp, or a
 *   NUL character (Prometheus's own lexer takes NUL for the end of input).
 * - `bad_metric_name`: the metric name does not match `[a-zA-Z_:][a-zA-Z0-9_:]*`.
 * - `bad_label_name`: a label name does not match `[a-zA-Z_][a-zA-Z0-9_]*` or starts with `__`.
 * - `duplicate_label`: one label name twice in one sample.
 * - `bad_escape`: a backslash not followed by `\`, `"` or `n` in a label value, or by `\` or `n`
 *   in help text.
 * - `bad_value`: the value is missing or not a float as Go's `strconv.ParseFloat` reads it.
 * - `bad_timestamp`: the timestamp is not a non-negative integer of at most 2^53 − 1 ms.
 * - `bad_type`: `# TYPE` without a type, with a type other than the five of the text format, or
 *   with more after the type.
 * - `duplicate_metadata`: a second `# TYPE` or `# HELP` for the same family.
 * - `late_metadata`: `# TYPE` or `# HELP` after samples of that family.
 * - `family_mismatch`: the line does not fit the family structure: a sample that its typed family
 *   cannot have (`x_bucket` without a float `le`, a summary quantile without a float `quantile`,
 *   `le` on a histogram's `_sum` or `_count`, the bare name of a histogram), or a `# TYPE`/`# HELP`
 *   whose family would take names another family already has (`# TYPE x histogram` after samples
 *   of an untyped `x_bucket`, `# HELP x_sum` for a summary `x`).
 * - `duplicate_series`: the series already appeared earlier in the text; the first one is kept.
 */
export type InvalidReason =
  | 'bad_syntax'
  | 'bad_metric_name'
  | 'bad_label_name'
  | 'duplicate_label'
  | 'bad_escape'
  | 'bad_value'
  | 'bad_timestamp'
  | 'bad_type'
  | 'duplicate_metadata'
  | 'late_metadata'
  | 'family_mismatch'
  | 'duplicate_series';

/** Every {@link InvalidReason}, e.g. to initialise a labelled counter at zero for each. */
export const INVALID_REASONS: readonly InvalidReason[] = [
  'bad_syntax',
  'bad_metric_name',
  'bad_label_name',
  'duplicate_label',
  'bad_escape',
  'bad_value',
  'bad_timestamp',
  'bad_type',
  'duplicate_metadata',
  'late_metadata',
  'family_mismatch',
  'duplicate_series',
];

export interface InvalidLine {
  /** 1-based line number in the input. */
  line: number;
  reason: InvalidReason;
  /** The line as received (without its line ending), cut to at most 200 characters. */
  text: string;
}

export interface ParseResult {
  /** Families in the order their first line (sample or metadata) appeared. */
  families: MetricFamily[];
  /** Dropped lines in input order. */
  invalid: InvalidLine[];
}

/** What {@link normalizeFamilies} (parse.ts) left out of a hand-built or merged family list, and why. */
export interface FamilyProblem {
  /** The family's name as given (it may itself be the problem). */
  family: string;
  /** The sample's name, when one sample was dropped rather than the whole family. */
  sample?: string;
  reason: InvalidReason;
}
