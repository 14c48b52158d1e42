/**
 * OpenMetrics' rules for histograms and summaries: samples grouped into MetricPoints, checked,
 * ordered, `le`/`quantile` canonical. Undefined where a rule breaks: the family is then `unknown`.
 */
import { labelSetKey } from './family.js';
import { parseGoFloat } from './number.js';
import type { MetricFamily, Sample } from './types.js';

/** OpenMetrics' canonical number: Go's `FormatFloat(v, 'g', -1, 64)`, `.0` added (`1.0`, `1e+06`). */
export function canonicalFloat(value: number): string {
  if (value !== value) return 'NaN';
  if (value === Infinity) return '+Inf';
  if (value === -Infinity) return '-Inf';
  if (value === 0) return 1 / value < 0 ? '-0.0' : '0.0';
  const magnitude = Math.abs(value);
  // In [1e-4, 1e6) Go's %g and String() agree.
  if (magnitude >= 1e-4 && magnitude < 1e6) {
    const fixed = String(value);
    return fixed.includes('.') ? fixed : `${fixed}.0`;
  }
  const sign = value < 0 ? '-' : '';
  const [mantissa = '', exponentText = '0'] = Math.abs(value).toExponential().split('e');
  const digits = mantissa.replace('.', '');
  const exponent = Number(exponentText);
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

function labelValueOf(sample: Sample, name: string): string | undefined {
  const labels = sample.labels;
  for (let i = 0; i < labels.length; i++) if (labels[i]![0] === name) return labels[i]![1];
  return undefined;
}

function withLabel(sample: Sample, name: string, value: string): Sample {
  if (labelValueOf(sample, name) === value) return sample;
  return { ...sample, labels: sample.labels.map(([n, v]): [string, string] => (n === name ? [n, value] : [n, v])) };
}

interface Point {
  timestampMs: number | undefined;
  /** Buckets or quantiles. */
  parts: Array<{ bound: number; sample: Sample }>;
  count?: Sample;
  sum?: Sample;
}

/** MetricPoints in order of first appearance; undefined when a point's samples differ in timestamp. */
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
    else point.parts.push({ bound: parseGoFloat(labelValueOf(sample, boundLabel) ?? '') ?? NaN, sample });
  }
  return [...byMetric.values()];
}

/** Per point: buckets by `le`, `_count`, `_sum`; undefined when a point breaks a histogram rule. */
export function histogramSamples(family: MetricFamily, samples: readonly Sample[]): Sample[] | undefined {
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

/** Per point: quantiles, `_count`, `_sum`; undefined when a point breaks a summary rule. */
export function summarySamples(family: MetricFamily, samples: readonly Sample[]): Sample[] | undefined {
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
