/**
 * Prometheus text format 0.0.4, as `/metrics` serves it by default: it re-exposes what was read
 * from E7 ("E7 notes") together with the exporter's own metrics.
 *
 * It starts with {@link normalizeFamilies}, so whatever it is given, the output is valid: what
 * breaks a rule is left out rather than served (CONTRIBUTING.md, "Bad upstream data").
 */
import { escapeTextHelp, formatLabels, formatValue, type SerializeOptions } from './format.js';
import { Lines } from './lines.js';
import { normalizeFamilies } from './normalize.js';
import type { MetricFamily } from './types.js';

/** Content type of {@link serializeText}'s output. */
export const TEXT_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

/**
 * Writes Prometheus text format 0.0.4: per family `# HELP` (when there is help), `# TYPE`
 * (always, `untyped` included), then its samples, families and samples in the given order, LF
 * line endings. Label values escape `\`, `"` and LF; help escapes `\` and LF; values as
 * {@link formatValue}; timestamps as integer milliseconds.
 *
 * The families first go through {@link normalizeFamilies}, which leaves out what would make the
 * text invalid (for a parser result nothing). `parseExposition(serializeText(f))` returns `f`
 * again for any normalized `f`.
 *
 * @returns the body for {@link TEXT_CONTENT_TYPE}; empty for no families. Never throws.
 */
export function serializeText(families: readonly MetricFamily[], options: SerializeOptions = {}): string {
  const out = new Lines();
  writeText(out, families, options);
  return out.toString();
}

/** {@link serializeText} as UTF-8 bytes, without the whole text as a string on the way (for large outputs). */
export function serializeTextBuffer(families: readonly MetricFamily[], options: SerializeOptions = {}): Buffer {
  const out = new Lines();
  writeText(out, families, options);
  return out.toBuffer();
}

function writeText(out: Lines, families: readonly MetricFamily[], options: SerializeOptions): void {
  for (const family of options.normalized === true ? families : normalizeFamilies(families).families) writeTextFamily(out, family);
}

/**
 * One family of {@link serializeText}: its metadata lines, then (from `out.bodyAt`) its samples.
 * With `targetLabels` (`a="x",b="y"`, escaped as label values are), every sample is written as if
 * those pairs came first in its labels: for a caller that has checked that no sample has a label
 * of one of those names (see addTargetLabels), and would otherwise make a new label list per sample.
 */
export function writeTextFamily(out: Lines, family: MetricFamily, targetLabels?: string): void {
  if (family.help !== undefined) out.push(`# HELP ${family.name} ${escapeTextHelp(family.help)}\n`);
  out.push(`# TYPE ${family.name} ${family.type}\n`);
  out.bodyAt = out.bytes;
  for (const s of family.samples) {
    out.push(`${s.name}${formatLabels(s.labels, targetLabels)} ${formatValue(s.value)}${s.timestampMs === undefined ? '' : ` ${s.timestampMs}`}\n`);
  }
}

/** Label pairs as {@link writeTextFamily}'s `targetLabels` wants them: `a="x",b="y"`. */
export function formatTargetLabels(pairs: ReadonlyArray<readonly [string, string]>): string {
  return formatLabels(pairs).slice(1, -1);
}
