/**
 * OpenMetrics 1.0.0, as `/metrics` serves it to a scraper that asks for it (see negotiate.ts):
 * what was read from E7 ("E7 notes") together with the exporter's own metrics, typed where
 * OpenMetrics' stricter rules allow and `unknown` elsewhere.
 *
 * It starts with {@link normalizeFamilies}, so whatever it is given, the output is valid: what
 * breaks a rule is left out rather than served (CONTRIBUTING.md, "Bad upstream data").
 */
import { owningFamily } from './family.js';
import { escapeQuoted, formatLabels, formatValue, type SerializeOptions } from './format.js';
import { Lines } from './lines.js';
import { normalizeFamilies } from './normalize.js';
import { histogramSamples, summarySamples } from './openmetrics-points.js';
import type { MetricFamily, MetricType, Sample } from './types.js';

/** Content type of {@link serializeOpenMetrics}'s output. */
export const OPENMETRICS_CONTENT_TYPE = 'application/openmetrics-text; version=1.0.0; charset=utf-8';

export type OpenMetricsType = 'counter' | 'gauge' | 'histogram' | 'summary' | 'unknown';

/** Milliseconds since the epoch as OpenMetrics' seconds, exactly: 1500 → `1.5`, 7 → `0.007`. */
function formatSeconds(ms: number): string {
  const sign = ms < 0 ? '-' : '';
  const abs = Math.abs(ms);
  const fraction = abs % 1000;
  const whole = (abs - fraction) / 1000;
  if (fraction === 0) return `${sign}${whole}`;
  return `${sign}${whole}.${String(fraction).padStart(3, '0').replace(/0+$/, '')}`;
}

/** The metadata lines OpenMetrics writes before a family's samples: `# TYPE`, then `# HELP` when there is help. */
export function openMetricsHeader(name: string, type: OpenMetricsType, help: string | undefined): string {
  return `# TYPE ${name} ${type}\n${help === undefined ? '' : `# HELP ${name} ${escapeQuoted(help)}\n`}`;
}

function block(out: Lines, name: string, type: OpenMetricsType, help: string | undefined, samples: readonly Sample[]): void {
  out.push(openMetricsHeader(name, type, help));
  out.bodyAt = out.bytes;
  for (const s of samples) {
    out.push(`${s.name}${formatLabels(s.labels)} ${formatValue(s.value)}${s.timestampMs === undefined ? '' : ` ${formatSeconds(s.timestampMs)}`}\n`);
  }
}

/** A family OpenMetrics cannot type, as `unknown` families, one per sample name. */
function unknownBlocks(out: Lines, family: MetricFamily, samples: readonly Sample[]): void {
  if (samples.length === 0) return block(out, family.name, 'unknown', family.help, []);
  const byName = new Map<string, Sample[]>();
  for (const sample of samples) {
    const group = byName.get(sample.name);
    if (group === undefined) byName.set(sample.name, [sample]);
    else group.push(sample);
  }
  for (const [name, group] of byName) block(out, name, 'unknown', family.help, group);
}

function startsWithUnderscore(name: string): boolean {
  return name.charCodeAt(0) === 95;
}

/**
 * Writes OpenMetrics 1.0.0 text: per family `# TYPE`, `# HELP` (when there is help; escapes
 * `\`, `"`, LF), then its samples; `# EOF` at the end unless `eof` is false (for a caller that
 * appends more families and writes `# EOF` itself). Values as {@link formatValue}, timestamps
 * in seconds (exact decimals of the milliseconds).
 *
 * Types map as follows, and wherever OpenMetrics' stricter rules would be broken the family is
 * written as `unknown` instead (one `unknown` family per sample name, so every sample is still
 * served under the same series name as in the text format):
 * - `untyped` → `unknown`; `gauge` → `gauge`.
 * - `counter` → `counter` named without `_total` (`# TYPE foo counter`, samples `foo_total`),
 *   when the family name ends in `_total` and no value is NaN or negative; a sloppy counter
 *   (`foo` without `_total`, or a negative value) becomes `unknown`.
 * - `histogram` and `summary` keep their type when every point is valid OpenMetrics; their
 *   samples are then grouped per point, buckets sorted by `le`, and `le`/`quantile` written as
 *   canonical numbers ({@link canonicalFloat}).
 * - A typed family whose OpenMetrics-only names (`foo` and `foo_created` for counter
 *   `foo_total`, `x_created` for histogram or summary `x`) another family already uses is
 *   written as `unknown` too, so no two families can claim one sample name.
 *
 * Names starting with `_` are reserved in OpenMetrics: such families, and samples with such a
 * label name, are left out here (the text format keeps them).
 *
 * @returns the body for {@link OPENMETRICS_CONTENT_TYPE}. Never throws.
 */
export function serializeOpenMetrics(families: readonly MetricFamily[], options: SerializeOptions & { eof?: boolean } = {}): string {
  const out = new Lines();
  writeOpenMetrics(out, families, options);
  return out.toString();
}

/** {@link serializeOpenMetrics} as UTF-8 bytes, without the whole text as a string on the way (for large outputs). */
export function serializeOpenMetricsBuffer(families: readonly MetricFamily[], options: SerializeOptions & { eof?: boolean } = {}): Buffer {
  const out = new Lines();
  writeOpenMetrics(out, families, options);
  return out.toBuffer();
}

/**
 * One family of an exposition in OpenMetrics, as {@link serializeOpenMetricsBuffer} writes it
 * among the others, for a caller that keeps each family's bytes apart (the exporter's own part,
 * src/metrics/own-part.ts). `family` must be normalized as part of the whole list (see
 * {@link normalizeFamilies}); `claim` is the exposition's (see {@link openMetricsClaims}), asked
 * at most once.
 *
 * @returns the family's bytes, and the names it asked `claim` for (undefined: it asked nothing)
 *   with the answer: the same family, given the same answer, writes the same bytes. Never throws.
 */
export function serializeOpenMetricsFamily(
  family: MetricFamily,
  claim: (names: string[]) => boolean,
): { bytes: Buffer; claimed?: { names: string[]; taken: boolean } } {
  const out = new Lines();
  let claimed: { names: string[]; taken: boolean } | undefined;
  writeOpenMetricsFamily(out, family, (names) => {
    const taken = claim(names);
    claimed = { names, taken };
    return taken;
  });
  const bytes = out.toBuffer();
  return claimed === undefined ? { bytes } : { bytes, claimed };
}

function writeOpenMetrics(out: Lines, families: readonly MetricFamily[], options: SerializeOptions & { eof?: boolean }): void {
  const clean = options.normalized === true ? families : normalizeFamilies(families).families;
  const claim = openMetricsClaims(new Map(clean.map((family) => [family.name, family.type])));
  for (const family of clean) writeOpenMetricsFamily(out, family, claim);
  if (options.eof ?? true) out.push('# EOF\n');
}

/**
 * Takes the OpenMetrics-only names of a typed family (`foo` and `foo_created` of counter
 * `foo_total`, `x_created` of histogram or summary `x`) when no family of `types` (every family
 * of the exposition, by name) owns them and no earlier typed family took them.
 *
 * @returns a function answering whether it took the names (and then they are taken). Never throws.
 */
export function openMetricsClaims(types: ReadonlyMap<string, MetricType>): (names: string[]) => boolean {
  const typeOf = (name: string): MetricType | undefined => types.get(name);
  const claimed = new Set<string>();
  return (names) => {
    if (names.some((name) => claimed.has(name) || owningFamily(name, typeOf) !== undefined)) return false;
    for (const name of names) claimed.add(name);
    return true;
  };
}

/**
 * How {@link writeOpenMetricsFamily} wrote a family: `skipped` (a name starting with `_`),
 * `typed` (one block of its own type: gauge, counter, histogram, summary), `unknown` (one
 * `unknown` block for an untyped family or a counter that could not be typed; `unknownBlocks`
 * for a histogram or summary that could not: one block per sample name).
 */
export interface OpenMetricsForm {
  form: 'skipped' | 'typed' | 'unknown' | 'unknownBlocks';
  /** A counter's samples (those written) are all ≥ 0; a histogram's or summary's points are all valid OpenMetrics. */
  valid: boolean;
}

/**
 * For a family whose OpenMetrics sample lines are its text format sample lines byte for byte (a
 * gauge, counter or untyped family, named without a leading `_`, no sample with a timestamp or
 * a label name starting with `_`; E7 sends such families): the metadata lines
 * {@link writeOpenMetricsFamily} would write before them, and how, taking the names it would
 * claim. Undefined for any other family, and nothing is claimed.
 */
export function openMetricsHeaderOfPlain(family: MetricFamily, claim: (names: string[]) => boolean): { header: string; form: OpenMetricsForm } | undefined {
  const { name, type, help, samples } = family;
  if (type === 'histogram' || type === 'summary' || startsWithUnderscore(name)) return undefined;
  for (const s of samples) {
    if (s.timestampMs !== undefined || s.labels.some(([n]) => startsWithUnderscore(n))) return undefined;
  }
  if (type === 'gauge') return { header: openMetricsHeader(name, 'gauge', help), form: { form: 'typed', valid: true } };
  if (type === 'untyped') return { header: openMetricsHeader(name, 'unknown', help), form: { form: 'unknown', valid: true } };
  const valid = samples.every((s) => s.value >= 0);
  const counter = openMetricsCounter(name, valid, claim);
  return { header: openMetricsHeader(counter.name, counter.type, help), form: { form: counter.type === 'counter' ? 'typed' : 'unknown', valid } };
}

/**
 * How OpenMetrics writes counter family `name`: as counter `foo` for `foo_total` when the name
 * ends in `_total`, `valid` (every value written ≥ 0) and `claim` takes `foo` and `foo_created`;
 * otherwise as `unknown` under its own name (`claim` is then not asked when it need not be).
 */
export function openMetricsCounter(name: string, valid: boolean, claim: (names: string[]) => boolean): { name: string; type: 'counter' | 'unknown' } {
  const base = name.endsWith('_total') && name.length > '_total'.length ? name.slice(0, -'_total'.length) : undefined;
  return base !== undefined && valid && claim([base, `${base}_created`]) ? { name: base, type: 'counter' } : { name, type: 'unknown' };
}

/**
 * One family of {@link serializeOpenMetrics}, with `claim` shared by every family of the exposition
 * (see {@link openMetricsClaims}). A single block's samples start at `out.bodyAt`.
 */
export function writeOpenMetricsFamily(out: Lines, family: MetricFamily, claim: (names: string[]) => boolean): OpenMetricsForm {
  if (startsWithUnderscore(family.name)) return { form: 'skipped', valid: true };
  const samples = family.samples.some((s) => s.labels.some(([n]) => startsWithUnderscore(n)))
    ? family.samples.filter((s) => !s.labels.some(([n]) => startsWithUnderscore(n)))
    : family.samples;
  const { name, help } = family;
  switch (family.type) {
    case 'gauge':
      block(out, name, 'gauge', help, samples);
      return { form: 'typed', valid: true };
    case 'untyped':
      block(out, name, 'unknown', help, samples);
      return { form: 'unknown', valid: true };
    case 'counter': {
      const valid = samples.every((s) => s.value >= 0);
      const counter = openMetricsCounter(name, valid, claim);
      block(out, counter.name, counter.type, help, samples);
      return { form: counter.type === 'counter' ? 'typed' : 'unknown', valid };
    }
    case 'histogram':
    case 'summary': {
      const ordered = family.type === 'histogram' ? histogramSamples(family, samples) : summarySamples(family, samples);
      if (ordered !== undefined && claim([`${name}_created`])) {
        block(out, name, family.type, help, ordered);
        return { form: 'typed', valid: true };
      }
      unknownBlocks(out, family, samples);
      return { form: 'unknownBlocks', valid: ordered !== undefined };
    }
  }
}
