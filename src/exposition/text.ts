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

export const TEXT_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

/**
 * Text format 0.0.4, `# TYPE` always; `parseExposition(serializeText(f))` gives back a normalized `f`. Never throws.
 * @internal the product writes bytes ({@link serializeTextBuffer}); the tests read this.
 */
export function serializeText(families: readonly MetricFamily[], options: SerializeOptions = {}): string {
  const out = new Lines();
  writeText(out, families, options);
  return out.toString();
}

/** {@link serializeText} as UTF-8, never held as one string. */
export function serializeTextBuffer(families: readonly MetricFamily[], options: SerializeOptions = {}): Buffer {
  const out = new Lines();
  writeText(out, families, options);
  return out.toBuffer();
}

function writeText(out: Lines, families: readonly MetricFamily[], options: SerializeOptions): void {
  for (const family of options.normalized === true ? families : normalizeFamilies(families).families) writeTextFamily(out, family);
}

/**
 * One family; its samples start at `out.bodyAt`. `targetLabels` (`a="x",b="y"`) are written first
 * in every sample: the caller has checked no sample has a label of those names.
 */
export function writeTextFamily(out: Lines, family: MetricFamily, targetLabels?: string): void {
  if (family.help !== undefined) out.push(`# HELP ${family.name} ${escapeTextHelp(family.help)}\n`);
  out.push(`# TYPE ${family.name} ${family.type}\n`);
  out.bodyAt = out.bytes;
  for (const s of family.samples) {
    out.push(`${s.name}${formatLabels(s.labels, targetLabels)} ${formatValue(s.value)}${s.timestampMs === undefined ? '' : ` ${s.timestampMs}`}\n`);
  }
}

/** `a="x",b="y"`, for {@link writeTextFamily}. */
export function formatTargetLabels(pairs: ReadonlyArray<readonly [string, string]>): string {
  return formatLabels(pairs).slice(1, -1);
}
