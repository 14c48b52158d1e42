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

export const OPENMETRICS_CONTENT_TYPE = 'application/openmetrics-text; version=1.0.0; charset=utf-8';

export type OpenMetricsType = 'counter' | 'gauge' | 'histogram' | 'summary' | 'unknown';

/** Exact seconds: 1500 → `1.5`, 7 → `0.007`. */
function formatSeconds(ms: number): string {
  const sign = ms < 0 ? '-' : '';
  const abs = Math.abs(ms);
  const fraction = abs % 1000;
  const whole = (abs - fraction) / 1000;
  if (fraction === 0) return `${sign}${whole}`;
  return `${sign}${whole}.${String(fraction).padStart(3, '0').replace(/0+$/, '')}`;
}

/** `# TYPE`, then `# HELP` when there is help. */
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

/** A family OpenMetrics cannot type: one `unknown` block per sample name. */
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
 * OpenMetrics 1.0.0, typed where its rules allow, else `unknown` one block per sample name; `_` names left
 * out; `# EOF` unless `eof` is false. Mapping: docs/design/exposition-merge.md ("OpenMetrics"). Never throws.
 * @internal the product writes bytes ({@link serializeOpenMetricsBuffer}); the tests read this.
 */
export function serializeOpenMetrics(families: readonly MetricFamily[], options: SerializeOptions & { eof?: boolean } = {}): string {
  const out = new Lines();
  writeOpenMetrics(out, families, options);
  return out.toString();
}

/** {@link serializeOpenMetrics} as UTF-8, never held as one string. */
export function serializeOpenMetricsBuffer(families: readonly MetricFamily[], options: SerializeOptions & { eof?: boolean } = {}): Buffer {
  const out = new Lines();
  writeOpenMetrics(out, families, options);
  return out.toBuffer();
}

/**
 * One family's bytes as {@link serializeOpenMetricsBuffer} writes it among the others, and what it asked
 * `claim` (at most once) with the answer: the same answer gives the same bytes. Never throws.
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
 * The exposition's claims on OpenMetrics-only names (`foo`, `foo_created` of `foo_total`;
 * `x_created`): granted when no family of `types` owns them and no earlier claim took them.
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

/** How a family was written: `unknownBlocks` is one block per sample name, `skipped` a `_` name. */
export interface OpenMetricsForm {
  form: 'skipped' | 'typed' | 'unknown' | 'unknownBlocks';
  /** A counter's values ≥ 0; a histogram's or summary's points valid OpenMetrics. */
  valid: boolean;
}

/**
 * For a family whose OpenMetrics sample lines are its text lines byte for byte (gauge, counter or
 * untyped; no timestamp, no `_` names: what E7 sends), the header {@link writeOpenMetricsFamily}
 * would write, its claims taken. Undefined, nothing claimed, for any other family.
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

/** Counter `foo` for `foo_total` when valid and `claim` grants `foo`, `foo_created`; else `unknown`. */
export function openMetricsCounter(name: string, valid: boolean, claim: (names: string[]) => boolean): { name: string; type: 'counter' | 'unknown' } {
  const base = name.endsWith('_total') && name.length > '_total'.length ? name.slice(0, -'_total'.length) : undefined;
  return base !== undefined && valid && claim([base, `${base}_created`]) ? { name: base, type: 'counter' } : { name, type: 'unknown' };
}

/** One family, `claim` shared by the exposition; a single block's samples start at `out.bodyAt`. */
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
