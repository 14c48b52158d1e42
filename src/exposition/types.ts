/**
 * The model of an exposition that the parser produces and the serializers consume. A family owns
 * its name (a histogram also `_bucket`, `_sum`, `_count`; a summary `_sum`, `_count`); a series is
 * a name and a label set, order and empty values ignored. Glossary: docs/design/exposition-merge.md.
 */

export type MetricType = 'counter' | 'gauge' | 'histogram' | 'summary' | 'untyped';

export interface Sample {
  /** `x_bucket` for a bucket of histogram `x`. */
  name: string;
  /** In written order; names unique, none starting with `__`. */
  labels: Array<[string, string]>;
  /** Any float64, including NaN, +Inf, -Inf and -0. */
  value: number;
  /** Milliseconds since the epoch, a non-negative safe integer. */
  timestampMs?: number;
}

export interface MetricFamily {
  name: string;
  type: MetricType;
  /** Unescaped; absent for none or an empty HELP. */
  help?: string;
  samples: Sample[];
}

/**
 * Why a line was dropped: values of the label `..._upstream_invalid_lines_total{reason}`, so never
 * renamed. Each is defined in docs/design/exposition-merge.md ("Why a line is dropped").
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

export interface InvalidLine {
  /** 1-based. */
  line: number;
  reason: InvalidReason;
  /** The line without its ending, cut to at most 200 characters. */
  text: string;
}

export interface ParseResult {
  /** In the order of their first line. */
  families: MetricFamily[];
  invalid: InvalidLine[];
}

/** What {@link normalizeFamilies} left out of a family list, and why. */
export interface FamilyProblem {
  /** As given. */
  family: string;
  /** Set when one sample was dropped rather than the whole family. */
  sample?: string;
  reason: InvalidReason;
}
