/**
 * Serializers for the two formats `/metrics` serves: Prometheus text 0.0.4 and OpenMetrics
 * 1.0.0, and the content negotiation between them. They re-expose what was read from E7
 * ("E7 notes") together with the exporter's own metrics.
 *
 * Both start with {@link normalizeFamilies}, so whatever they are given, the output is valid:
 * what breaks a rule is left out rather than served (habit 10 of STYLE.md).
 */
import { labelSetKey, owningFamily } from './family.js';
import { normalizeFamilies } from './normalize.js';
import { parseGoFloat } from './number.js';
import type { MetricFamily, MetricType, Sample } from './types.js';

/** Content type of {@link serializeText}'s output. */
export const TEXT_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

/** Content type of {@link serializeOpenMetrics}'s output. */
export const OPENMETRICS_CONTENT_TYPE = 'application/openmetrics-text; version=1.0.0; charset=utf-8';

// ---------------------------------------------------------------------------------------------
// Shared formatting

/**
 * A sample value as both formats write it, such that Go's `ParseFloat` (and our parser) reads
 * back the same float64: `NaN`, `+Inf`, `-Inf`, `-0`, otherwise JavaScript's shortest
 * round-trip decimal (`0.1`, `1e+21`, `5e-324`).
 */
export function formatValue(value: number): string {
  if (value !== value) return 'NaN';
  if (value === Infinity) return '+Inf';
  if (value === -Infinity) return '-Inf';
  if (value === 0 && 1 / value < 0) return '-0';
  return String(value);
}

const LABEL_VALUE_SPECIALS_ALL = /[\\"\n]/g;
const TEXT_HELP_SPECIALS = /[\\\n]/;
const TEXT_HELP_SPECIALS_ALL = /[\\\n]/g;

function escapeChar(c: string): string {
  return c === '\n' ? '\\n' : `\\${c}`;
}

/** Label values in both formats, and HELP in OpenMetrics: `\` → `\\`, `"` → `\"`, LF → `\n`. */
function escapeQuoted(value: string): string {
  // A loop beats a regular expression call on the short strings label values are.
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i);
    if (c === 92 || c === 34 || c === 10) return value.replace(LABEL_VALUE_SPECIALS_ALL, escapeChar);
  }
  return value;
}

/** HELP in the text format, which knows only `\\` and `\n` (`\"` is an error for promtool). */
function escapeTextHelp(help: string): string {
  return TEXT_HELP_SPECIALS.test(help) ? help.replace(TEXT_HELP_SPECIALS_ALL, escapeChar) : help;
}

/**
 * Collects output lines and joins them into flat strings, a few thousand lines at a time. Text
 * built by `+=` is a rope of one object per piece until it is flattened: for 100,000 samples
 * that is several times the size of the text itself, at the moment the serializer returns.
 */
export class Lines {
  readonly #lines: string[] = [];
  readonly #chunks: string[] = [];
  /** In part mode, the chunks as UTF-8. */
  readonly #encoded: Buffer[] = [];
  readonly #part: boolean;
  /** UTF-8 bytes pushed so far, in part mode (see the constructor). */
  bytes = 0;
  /** {@link bytes} where the last family's first sample line starts (after its metadata lines). */
  bodyAt = 0;

  /**
   * @param part part mode, for a large output that {@link toBuffer} ends and whose caller
   *   records where each family lies: keeps {@link bytes}, and encodes each chunk as soon as it
   *   is joined, so the output is never held as strings on the collected heap.
   */
  constructor(part = false) {
    this.#part = part;
  }

  push(line: string): void {
    if (this.#part) this.bytes += Buffer.byteLength(line);
    this.#lines.push(line);
    if (this.#lines.length >= 4096) this.#flush();
  }

  #flush(): void {
    if (this.#part) this.#encoded.push(Buffer.from(this.#lines.join('')));
    else this.#chunks.push(this.#lines.join(''));
    this.#lines.length = 0;
  }

  toString(): string {
    if (this.#part) return this.toBuffer().toString();
    this.#chunks.push(this.#lines.join(''));
    this.#lines.length = 0;
    const text = this.#chunks.length === 1 ? this.#chunks[0]! : this.#chunks.join('');
    this.#chunks.length = 0;
    return text;
  }

  /** The output as UTF-8, written chunk by chunk into one buffer (no joined string on the way). */
  toBuffer(): Buffer {
    if (this.#part) {
      this.#flush();
      const buffer = Buffer.concat(this.#encoded, this.bytes);
      this.#encoded.length = 0;
      return buffer;
    }
    this.#chunks.push(this.#lines.join(''));
    this.#lines.length = 0;
    let size = 0;
    for (const chunk of this.#chunks) size += Buffer.byteLength(chunk);
    const buffer = Buffer.allocUnsafe(size);
    let at = 0;
    for (const chunk of this.#chunks) at += buffer.write(chunk, at);
    this.#chunks.length = 0;
    return buffer;
  }
}

/** `{a="x",b="y"}`, or nothing for no labels; `first` (already formatted pairs) goes before the labels' own. */
function formatLabels(labels: ReadonlyArray<readonly [string, string]>, first = ''): string {
  if (labels.length === 0) return first === '' ? '' : `{${first}}`;
  let out = first === '' ? '{' : `{${first},`;
  for (let i = 0; i < labels.length; i++) {
    const pair = labels[i]!;
    out += `${i === 0 ? '' : ','}${pair[0]}="${escapeQuoted(pair[1])}"`;
  }
  return `${out}}`;
}

export interface SerializeOptions {
  /**
   * The caller vouches that `families` is normalized, as {@link normalizeFamilies} would return
   * it, and the serializer skips that step: for {@link parseExposition}'s result, a
   * {@link prefixFamilies} rename of it, or a subset of either. Saves a set of series keys per
   * call (100,000 samples: about 0.1 s and 12 MB). Output for a list that is not normalized may
   * be invalid.
   */
  normalized?: boolean;
}

// ---------------------------------------------------------------------------------------------
// Text format 0.0.4

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

// ---------------------------------------------------------------------------------------------
// OpenMetrics 1.0.0

export type OpenMetricsType = 'counter' | 'gauge' | 'histogram' | 'summary' | 'unknown';

/**
 * A float as OpenMetrics wants `le` and `quantile` label values ("Canonical Numbers"): Go's
 * `strconv.FormatFloat(v, 'g', -1, 64)`, with `.0` appended when that has neither a point nor an
 * exponent: `0.0`, `0.001`, `1.0`, `100000.0`, `1e+06`, `1e-05`, `+Inf`.
 */
export function canonicalFloat(value: number): string {
  if (value !== value) return 'NaN';
  if (value === Infinity) return '+Inf';
  if (value === -Infinity) return '-Inf';
  if (value === 0) return 1 / value < 0 ? '-0.0' : '0.0';
  const magnitude = Math.abs(value);
  // In [1e-4, 1e6) Go's %g writes fixed notation with the shortest digits, which is what
  // JavaScript's String() writes there too: no need for the digit surgery below.
  if (magnitude >= 1e-4 && magnitude < 1e6) {
    const fixed = String(value);
    return fixed.includes('.') ? fixed : `${fixed}.0`;
  }
  const sign = value < 0 ? '-' : '';
  // toExponential() without an argument gives the shortest digits that round-trip, like Go's -1 precision.
  const [mantissa = '', exponentText = '0'] = Math.abs(value).toExponential().split('e');
  const digits = mantissa.replace('.', '');
  const exponent = Number(exponentText);
  // %g with shortest precision switches to exponent form below 1e-4 and from 1e+6 (Go's eprec = 6).
  if (exponent < -4 || exponent >= 6) {
    const abs = Math.abs(exponent);
    return `${sign}${mantissa}e${exponent < 0 ? '-' : '+'}${abs < 10 ? '0' : ''}${abs}`;
  }
  let fixed: string;
  if (exponent < 0) fixed = `0.${'0'.repeat(-exponent - 1)}${digits}`;
  else if (digits.length > exponent + 1) fixed = `${digits.slice(0, exponent + 1)}.${digits.slice(exponent + 1)}`;
  else fixed = `${digits}${'0'.repeat(exponent + 1 - digits.length)}.0`;
  return sign + fixed;
}

/** Milliseconds since the epoch as OpenMetrics' seconds, exactly: 1500 → `1.5`, 7 → `0.007`. */
function formatSeconds(ms: number): string {
  const sign = ms < 0 ? '-' : '';
  const abs = Math.abs(ms);
  const fraction = abs % 1000;
  const whole = (abs - fraction) / 1000;
  if (fraction === 0) return `${sign}${whole}`;
  return `${sign}${whole}.${String(fraction).padStart(3, '0').replace(/0+$/, '')}`;
}

function labelValueOf(sample: Sample, name: string): string | undefined {
  const labels = sample.labels;
  for (let i = 0; i < labels.length; i++) if (labels[i]![0] === name) return labels[i]![1];
  return undefined;
}

/** The sample with label `name` set to `value` (same object when it already is). */
function withLabel(sample: Sample, name: string, value: string): Sample {
  if (labelValueOf(sample, name) === value) return sample;
  return { ...sample, labels: sample.labels.map(([n, v]): [string, string] => (n === name ? [n, value] : [n, v])) };
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

interface Point {
  timestampMs: number | undefined;
  /** Buckets (`le`) or quantiles (`quantile`) with their threshold. */
  parts: Array<{ bound: number; sample: Sample }>;
  count?: Sample;
  sum?: Sample;
}

/**
 * Groups a histogram's or summary's samples into MetricPoints (one per label set without
 * `le`/`quantile`), in order of first appearance. Undefined when two samples of one point carry
 * different timestamps, which OpenMetrics cannot express as one point.
 */
function points(family: MetricFamily, samples: readonly Sample[], boundLabel: 'le' | 'quantile'): Point[] | undefined {
  const byMetric = new Map<string, Point>();
  for (const sample of samples) {
    const key = labelSetKey(sample.labels, boundLabel);
    let point = byMetric.get(key);
    if (point === undefined) {
      point = { timestampMs: sample.timestampMs, parts: [] };
      byMetric.set(key, point);
    } else if (point.timestampMs !== sample.timestampMs) {
      return undefined;
    }
    const suffix = sample.name.slice(family.name.length);
    if (suffix === '_count') point.count = sample;
    else if (suffix === '_sum') point.sum = sample;
    // normalizeFamilies guarantees a float bound on every bucket and quantile sample.
    else point.parts.push({ bound: parseGoFloat(labelValueOf(sample, boundLabel) ?? '') ?? NaN, sample });
  }
  return [...byMetric.values()];
}

/**
 * The histogram's samples in OpenMetrics order (per point: buckets by increasing `le`, `_count`,
 * `_sum`) with canonical `le`, or undefined when a point breaks OpenMetrics' histogram rules:
 * at least one bucket and one `+Inf` bucket, unique non-NaN thresholds, cumulative non-negative
 * integer bucket values, `_count` present exactly when `_sum` is and equal to the `+Inf` bucket,
 * a sum that is not NaN or negative and absent when a threshold is negative.
 */
function histogramSamples(family: MetricFamily, samples: readonly Sample[]): Sample[] | undefined {
  const grouped = points(family, samples, 'le');
  if (grouped === undefined) return undefined;
  const out: Sample[] = [];
  for (const { parts, count, sum } of grouped) {
    if (parts.length === 0 || parts.some((p) => Number.isNaN(p.bound))) return undefined;
    parts.sort((a, b) => a.bound - b.bound);
    let previous: { bound: number; sample: Sample } | undefined;
    for (const part of parts) {
      const value = part.sample.value;
      if (!Number.isInteger(value) || value < 0) return undefined;
      if (previous !== undefined && (previous.bound === part.bound || previous.sample.value > value)) return undefined;
      previous = part;
    }
    const last = parts[parts.length - 1]!;
    if (last.bound !== Infinity) return undefined;
    if ((count === undefined) !== (sum === undefined)) return undefined;
    if (count !== undefined && count.value !== last.sample.value) return undefined;
    if (sum !== undefined && (!(sum.value >= 0) || parts[0]!.bound < 0)) return undefined;
    for (const part of parts) out.push(withLabel(part.sample, 'le', canonicalFloat(part.bound)));
    if (count !== undefined) out.push(count);
    if (sum !== undefined) out.push(sum);
  }
  return out;
}

/**
 * The summary's samples in OpenMetrics order (per point: quantiles, `_count`, `_sum`) with
 * canonical `quantile`, or undefined when a point breaks OpenMetrics' summary rules: quantiles
 * unique and within [0, 1], quantile values not negative, `_count` a non-negative integer, `_sum`
 * neither NaN nor negative.
 */
function summarySamples(family: MetricFamily, samples: readonly Sample[]): Sample[] | undefined {
  const grouped = points(family, samples, 'quantile');
  if (grouped === undefined) return undefined;
  const out: Sample[] = [];
  for (const { parts, count, sum } of grouped) {
    const seen = new Set<number>();
    for (const { bound, sample } of parts) {
      if (!(bound >= 0 && bound <= 1) || seen.has(bound) || sample.value < 0) return undefined;
      seen.add(bound);
    }
    if (count !== undefined && !(Number.isInteger(count.value) && count.value >= 0)) return undefined;
    if (sum !== undefined && !(sum.value >= 0)) return undefined;
    for (const { bound, sample } of parts) out.push(withLabel(sample, 'quantile', canonicalFloat(bound)));
    if (count !== undefined) out.push(count);
    if (sum !== undefined) out.push(sum);
  }
  return out;
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

// ---------------------------------------------------------------------------------------------
// Negotiation

/** q of an Accept media range; NaN for a malformed one. */
function parseQ(text: string): number {
  return /^\d+(\.\d+)?$/.test(text) ? Number(text) : NaN;
}

/**
 * Picks the format for an `Accept` header: OpenMetrics only when the header gives
 * `application/openmetrics-text` (version 1.x or 0.0.1, which Prometheus parses alike, or no
 * version) a higher q than `text/plain` (any version). The most specific range decides each
 * type's q: the exact type, else `application/*` or `text/*`, else the full wildcard. Ranges
 * with a malformed q are ignored. Prometheus 2 sends
 * `application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5`
 * and the full wildcard at q=0.1, and gets OpenMetrics; no header, or only the wildcard, gets text.
 *
 * @returns `'openmetrics'` or `'text'`. Never throws.
 */
export function negotiateFormat(acceptHeader: string | undefined): 'text' | 'openmetrics' {
  if (acceptHeader === undefined || acceptHeader === '') return 'text';
  let openMetrics = -1;
  let application = -1;
  let text = -1;
  let anyText = -1;
  let any = -1;
  for (const range of acceptHeader.split(',')) {
    const [typeText = '', ...params] = range.split(';');
    const mediaType = typeText.trim().toLowerCase();
    let q = 1;
    let version: string | undefined;
    for (const param of params) {
      const eq = param.indexOf('=');
      if (eq === -1) continue;
      const key = param.slice(0, eq).trim().toLowerCase();
      const value = param
        .slice(eq + 1)
        .trim()
        .replace(/^"(.*)"$/, '$1');
      if (key === 'q') q = parseQ(value);
      else if (key === 'version') version = value;
    }
    if (!(q >= 0 && q <= 1)) continue;
    switch (mediaType) {
      case 'application/openmetrics-text':
        if (version === undefined || version.startsWith('1.') || version === '0.0.1') openMetrics = Math.max(openMetrics, q);
        break;
      case 'application/*':
        application = Math.max(application, q);
        break;
      case 'text/plain':
        text = Math.max(text, q);
        break;
      case 'text/*':
        anyText = Math.max(anyText, q);
        break;
      case '*/*':
        any = Math.max(any, q);
        break;
    }
  }
  const pick = (specific: number, group: number): number => (specific >= 0 ? specific : group >= 0 ? group : Math.max(any, 0));
  return pick(openMetrics, application) > pick(text, anyText) ? 'openmetrics' : 'text';
}
