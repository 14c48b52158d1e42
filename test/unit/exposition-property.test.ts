/**
 * Property tests for the exposition module.
 *
 * What "round-trips" means here: `parseExposition(serializeText(x))` returns exactly `x` (same
 * families in the same order, same samples in the same order, labels in the same order, values
 * equal as by Object.is, so NaN and -0 too) for every family list `x` that is already
 * normalized, i.e. one that `parseExposition` could have produced:
 * - names valid, label names valid and not starting with `__`, label values without NUL;
 * - every sample fits its family (histogram `x`: `x_bucket` with a float `le`, `x_sum`/`x_count`
 *   without `le`; summary `x`: `x` with a float `quantile`, `x_sum`/`x_count` without it);
 * - no two families own one sample name, each series (name + label set, order and empty values
 *   ignored) once;
 * - help has no leading blank, no trailing CR and is not empty (absent instead);
 * - timestamps are integers in [0, 2^53 − 1].
 * Anything else is normalized first (`normalizeFamilies`), so for every input
 * `parseExposition(serializeText(f))` equals `normalizeFamilies(f).families`.
 *
 * OpenMetrics output is checked by a strict reader written here from the OpenMetrics 1.0 ABNF
 * and its MUST rules. Through OpenMetrics the model round-trips exactly for families that
 * OpenMetrics can type (counters named `_total` with non-negative values, valid histograms and
 * summaries with canonical `le`/`quantile` and samples in point order, names that leave room for
 * OpenMetrics' suffixes); for all others every sample still arrives, with `le`/`quantile` in
 * canonical form, and a family that cannot keep its type arrives as `unknown`.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  PartWriter,
  mergeParts,
  targetLabels,
  negotiateFormat,
  normalizeFamilies,
  parseExposition,
  serializeOpenMetricsBuffer,
  serializeTextBuffer,
  type IndexedPart,
  type MetricFamily,
  type MetricType,
  type Sample,
} from '../../src/exposition/index.js';
import { INVALID_REASONS, METRIC_TYPES } from '../helpers/exposition.js';
import { addTargetLabels, mergeSources, mergeFamilies, prefixFamilies } from '../../src/exposition/merge.js';
import { canonicalFloat } from '../../src/exposition/openmetrics-points.js';
import { formatValue } from '../../src/exposition/format.js';
import { parseGoFloat } from '../../src/exposition/number.js';
import { serializeOpenMetrics } from '../../src/exposition/openmetrics.js';
import { serializeText } from '../../src/exposition/text.js';

// -----------------------------------------------------------------------------------------------
// A strict OpenMetrics 1.0 reader: the oracle for serializeOpenMetrics.

const OM_SUFFIXES: Record<string, string[]> = {
  counter: ['_total', '_created'],
  gauge: [''],
  unknown: [''],
  stateset: [''],
  info: ['_info'],
  histogram: ['_bucket', '_count', '_sum', '_created'],
  gaugehistogram: ['_bucket', '_gcount', '_gsum'],
  summary: ['', '_count', '_sum', '_created'],
};

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;

function readNumber(text: string): number | undefined {
  if (/^[+-]?(inf|infinity)$/i.test(text)) return text.startsWith('-') ? -Infinity : Infinity;
  if (/^nan$/i.test(text)) return NaN;
  if (/^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/.test(text)) return Number(text);
  return undefined;
}

/** Canonical Numbers (OpenMetrics, "Considerations: Canonical Numbers"), checked by shape and range. */
function isCanonicalNumber(text: string): boolean {
  if (text === '+Inf' || text === '-Inf') return true;
  const value = readNumber(text);
  if (value === undefined || Number.isNaN(value)) return false;
  const magnitude = Math.abs(value);
  if (/^-?\d+\.\d+$/.test(text)) return magnitude === 0 || (magnitude >= 1e-4 && magnitude < 1e6);
  if (/^-?\d(\.\d+)?e[+-]\d{2,3}$/.test(text)) return magnitude < 1e-4 || magnitude >= 1e6;
  return false;
}

/** escaped-string of the ABNF, with only the three escapes we are allowed to write (`\\`, `\"`, `\n`). */
function unescapeStrict(text: string, where: string): string {
  let out = '';
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (c === '\n' || c === '"') throw new Error(`${where}: raw ${JSON.stringify(c)}`);
    if (c !== '\\') {
      out += c;
      continue;
    }
    const next = text[++i];
    if (next === 'n') out += '\n';
    else if (next === '\\' || next === '"') out += next;
    else throw new Error(`${where}: escape \\${next ?? ''}`);
  }
  return out;
}

function readSampleLine(line: string, where: string): Sample {
  const name = /^[a-zA-Z_:][a-zA-Z0-9_:]*/.exec(line)?.[0];
  if (name === undefined) throw new Error(`${where}: no metric name`);
  let i = name.length;
  const labels: Array<[string, string]> = [];
  if (line[i] === '{') {
    i++;
    if (line[i] === '}') {
      i++;
    } else {
      for (;;) {
        const labelName = /^[a-zA-Z_][a-zA-Z0-9_]*/.exec(line.slice(i))?.[0];
        if (labelName === undefined) throw new Error(`${where}: bad label name`);
        i += labelName.length;
        if (line.slice(i, i + 2) !== '="') throw new Error(`${where}: expected ="`);
        i += 2;
        const valueStart = i;
        while (i < line.length && line[i] !== '"') i += line[i] === '\\' ? 2 : 1;
        if (i >= line.length) throw new Error(`${where}: unterminated label value`);
        if (labels.some(([n]) => n === labelName)) throw new Error(`${where}: duplicate label ${labelName}`);
        labels.push([labelName, unescapeStrict(line.slice(valueStart, i), where)]);
        i++;
        if (line[i] === ',') {
          i++;
          continue;
        }
        if (line[i] === '}') {
          i++;
          break;
        }
        throw new Error(`${where}: expected , or }`);
      }
    }
  }
  const rest = line.slice(i);
  const parts = rest.split(' ');
  if (parts[0] !== '' || parts.length < 2 || parts.length > 3) throw new Error(`${where}: expected " value [timestamp]"`);
  const value = readNumber(parts[1]!);
  if (value === undefined) throw new Error(`${where}: bad value ${parts[1]}`);
  if (parts.length === 2) return { name, labels, value };
  // Timestamps are seconds; we write at most three decimals, so milliseconds come back exactly.
  const ts = /^(\d+)(?:\.(\d{1,3}))?$/.exec(parts[2]!);
  if (ts === null) throw new Error(`${where}: bad timestamp ${parts[2]}`);
  return { name, labels, value, timestampMs: Number(ts[1]) * 1000 + Number((ts[2] ?? '').padEnd(3, '0')) };
}

interface OmFamily {
  name: string;
  type: string;
  help?: string;
  samples: Sample[];
}

function keyWithout(labels: Array<[string, string]>, skip: string): string {
  return JSON.stringify(labels.filter(([n, v]) => n !== skip && v !== '').sort((a, b) => (a[0] < b[0] ? -1 : 1)));
}

/** Checks the MetricPoint rules of a histogram or summary; samples must come point by point. */
function checkPoints(family: OmFamily): void {
  const histogram = family.type === 'histogram';
  const bound = histogram ? 'le' : 'quantile';
  const done = new Set<string>();
  let current: string | undefined;
  let point: Sample[] = [];
  const finish = (): void => {
    if (current === undefined) return;
    const where = `${family.name}{${current}}`;
    if (new Set(point.map((s) => s.timestampMs)).size > 1) throw new Error(`${where}: timestamps differ within a point`);
    const parts = point.filter((s) => s.name === family.name + (histogram ? '_bucket' : ''));
    const count = point.filter((s) => s.name === `${family.name}_count`);
    const sum = point.filter((s) => s.name === `${family.name}_sum`);
    if (count.length > 1 || sum.length > 1) throw new Error(`${where}: two counts or sums`);
    const order = point.map((s) => (parts.includes(s) ? 0 : 1));
    if (order.some((o, i) => i > 0 && o < order[i - 1]!)) throw new Error(`${where}: ${bound} samples after _count/_sum`);
    const bounds = parts.map((s) => s.labels.find(([n]) => n === bound)?.[1] ?? '');
    for (const b of bounds) if (!isCanonicalNumber(b)) throw new Error(`${where}: ${bound}="${b}" is not canonical`);
    const values = bounds.map((b) => readNumber(b)!);
    if (new Set(values).size !== values.length) throw new Error(`${where}: repeated ${bound}`);
    if (count[0] !== undefined && !(Number.isInteger(count[0].value) && count[0].value >= 0)) throw new Error(`${where}: bad count`);
    if (sum[0] !== undefined && !(sum[0].value >= 0)) throw new Error(`${where}: bad sum`);
    if (histogram) {
      if (parts.length === 0 || values.at(-1) !== Infinity) throw new Error(`${where}: no +Inf bucket last`);
      for (let i = 1; i < values.length; i++) if (!(values[i - 1]! < values[i]!)) throw new Error(`${where}: buckets not sorted`);
      for (let i = 0; i < parts.length; i++) {
        const v = parts[i]!.value;
        if (!Number.isInteger(v) || v < 0 || (i > 0 && v < parts[i - 1]!.value)) throw new Error(`${where}: buckets not cumulative integers`);
      }
      if ((count.length === 0) !== (sum.length === 0)) throw new Error(`${where}: _count without _sum or the reverse`);
      if (count[0] !== undefined && count[0].value !== parts.at(-1)!.value) throw new Error(`${where}: _count is not the +Inf bucket`);
      if (sum.length > 0 && values[0]! < 0) throw new Error(`${where}: sum with negative buckets`);
    } else {
      for (let i = 0; i < parts.length; i++) {
        if (!(values[i]! >= 0 && values[i]! <= 1)) throw new Error(`${where}: quantile out of range`);
        if (parts[i]!.value < 0) throw new Error(`${where}: negative quantile value`);
      }
    }
    done.add(current);
  };
  for (const sample of family.samples) {
    const key = keyWithout(sample.labels, bound);
    if (key !== current) {
      finish();
      if (done.has(key)) throw new Error(`${family.name}: metric ${key} interleaved`);
      current = key;
      point = [];
    }
    point.push(sample);
  }
  finish();
}

/**
 * Reads OpenMetrics text strictly (throws on any breach of the ABNF or a MUST we can check) and
 * returns it in our model: counter `foo` → family `foo_total`, `unknown` → `untyped`,
 * timestamps back in milliseconds.
 */
function readOpenMetrics(text: string): MetricFamily[] {
  if (!text.endsWith('# EOF\n')) throw new Error('does not end with # EOF');
  const body = text.slice(0, -'# EOF\n'.length);
  if (body !== '' && !body.endsWith('\n')) throw new Error('no LF before # EOF');
  const lines = body === '' ? [] : body.slice(0, -1).split('\n');
  const families: OmFamily[] = [];
  let family: OmFamily | undefined;
  lines.forEach((line, index) => {
    const where = `line ${index + 1} ${JSON.stringify(line.slice(0, 80))}`;
    if (line.endsWith('\r')) throw new Error(`${where}: CR`);
    if (line.startsWith('#')) {
      const type = /^# TYPE ([^ ]+) ([^ ]+)$/.exec(line);
      if (type !== null) {
        const [, name = '', kind = ''] = type;
        if (!METRIC_NAME.test(name) || !(kind in OM_SUFFIXES)) throw new Error(`${where}: bad TYPE`);
        if (families.some((f) => f.name === name)) throw new Error(`${where}: family ${name} twice`);
        family = { name, type: kind, samples: [] };
        families.push(family);
        return;
      }
      const help = /^# HELP ([^ ]+) ([\s\S]*)$/.exec(line);
      if (help === null || family === undefined || help[1] !== family.name) throw new Error(`${where}: stray comment`);
      if (family.help !== undefined || family.samples.length > 0) throw new Error(`${where}: HELP twice or after samples`);
      family.help = unescapeStrict(help[2]!, where);
      if (family.help === '') throw new Error(`${where}: empty HELP`);
      return;
    }
    if (family === undefined) throw new Error(`${where}: sample before any TYPE`);
    const sample = readSampleLine(line, where);
    if (!OM_SUFFIXES[family.type]!.some((suffix) => sample.name === family!.name + suffix)) {
      throw new Error(`${where}: ${sample.name} does not belong to ${family.type} ${family.name}`);
    }
    family.samples.push(sample);
  });

  const owners = new Map<string, string>();
  for (const f of families) {
    if (f.name.startsWith('_')) throw new Error(`${f.name}: reserved name`);
    for (const suffix of OM_SUFFIXES[f.type]!) {
      const other = owners.get(f.name + suffix);
      if (other !== undefined) throw new Error(`${f.name}: sample name ${f.name + suffix} could also belong to ${other}`);
      owners.set(f.name + suffix, f.name);
    }
    const series = new Set<string>();
    for (const s of f.samples) {
      if (s.labels.some(([n]) => n.startsWith('_'))) throw new Error(`${f.name}: reserved label name`);
      const key = s.name + keyWithout(s.labels, '');
      if (series.has(key)) throw new Error(`${f.name}: label set twice`);
      series.add(key);
      if (f.type === 'counter' && !(s.value >= 0)) throw new Error(`${f.name}: counter value ${s.value}`);
      if (f.type === 'histogram' && s.name !== `${f.name}_bucket` && s.labels.some(([n]) => n === 'le')) throw new Error(`${f.name}: le outside buckets`);
    }
    if (f.type === 'histogram' || f.type === 'summary') checkPoints(f);
  }

  return families.map((f) => {
    const name = f.type === 'counter' ? `${f.name}_total` : f.name;
    const type = (f.type === 'unknown' ? 'untyped' : f.type) as MetricType;
    return f.help === undefined ? { name, type, samples: f.samples } : { name, type, help: f.help, samples: f.samples };
  });
}

// -----------------------------------------------------------------------------------------------
// Arbitraries

/** Characters that matter to the format, and any other code point (NUL excluded: never valid). */
const textUnit = fc.oneof(
  fc.constantFrom('\\', '"', '\n', '\r', '\t', ' ', '{', '}', ',', '=', '#', '\u2028', '\uFEFF', '\uD800', 'é', '😀'),
  fc.constantFrom('a', 'b', 'x', '0', '9', '_'),
  fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }).filter((c) => c !== '\0'),
);
const labelValue = fc.string({ unit: textUnit, maxLength: 8 });
/** Help as the parser keeps it: no leading blanks, no trailing CR, absent when empty. */
const help = fc.option(
  fc.string({ unit: textUnit, maxLength: 12 }).map((h) => h.replace(/^[ \t]+/, '').replace(/\r+$/, '') || undefined),
  { nil: undefined },
);
const metricName = fc
  .tuple(fc.stringMatching(/^[a-zA-Z_:][a-zA-Z0-9_:]{0,8}$/), fc.constantFrom('', '', '', '_total', '_sum', '_count', '_bucket', '_created'))
  .map(([base, suffix]) => base + suffix);
const labelName = fc
  .oneof(fc.constantFrom('a', 'b', 'le', 'quantile', 'customer', 'customer_id', '_x'), fc.stringMatching(/^[a-zA-Z_][a-zA-Z0-9_]{0,6}$/))
  .filter((n) => !n.startsWith('__'));
const labelSet = fc.uniqueArray(fc.tuple(labelName, labelValue), { selector: ([n]) => n, maxLength: 3 });
const timestamp = fc.option(fc.maxSafeNat(), { nil: undefined });
/** `le`/`quantile` values in many spellings Go accepts. */
const bound = fc.oneof(
  fc.constantFrom('0.5', '1', '+Inf', 'Inf', 'inf', '1e3', '0.001', '-1', 'NaN', '0x1p-3', '1_0', '0', '.5', '1.0'),
  fc.double().map(formatValue),
);

function owned(name: string, type: MetricType): string[] {
  if (type === 'histogram') return [name, `${name}_bucket`, `${name}_sum`, `${name}_count`];
  if (type === 'summary') return [name, `${name}_sum`, `${name}_count`];
  return [name];
}

function seriesKey(sample: Sample): string {
  return sample.name + keyWithout(sample.labels, '');
}

function makeSample(name: string, labels: Array<[string, string]>, value: number, timestampMs: number | undefined): Sample {
  return timestampMs === undefined ? { name, labels, value } : { name, labels, value, timestampMs };
}

function makeFamily(name: string, type: MetricType, helpText: string | undefined, samples: Sample[]): MetricFamily {
  return helpText === undefined ? { name, type, samples } : { name, type, help: helpText, samples };
}

const sampleSpec = fc.record({
  kind: fc.constantFrom('main', 'main', 'bucket', 'sum', 'count'),
  labels: labelSet,
  bound,
  boundFirst: fc.boolean(),
  value: fc.double(),
  timestamp,
});
const familyFields = {
  name: metricName,
  type: fc.constantFrom(...METRIC_TYPES),
  help,
  samples: fc.array(sampleSpec, { maxLength: 6 }),
};
const familySpec = fc.record(familyFields);
type FamilySpec = typeof familySpec extends fc.Arbitrary<infer T> ? T : never;

/** Any normalized family list: the shapes the parser can produce, including ones OpenMetrics cannot type. */
const normalizedFamilies = fc.array(familySpec, { maxLength: 6 }).map(toNormalized);

/** Normalized family lists over a few names, so that lists drawn apart share names and clash. */
const clashingFamilies = fc
  .array(fc.record({ ...familyFields, name: fc.constantFrom('x', 'x_total', 'x_bucket', 'x_sum', 'x_count', 'x_created', 'y_total', '_z') }), {
    maxLength: 5,
  })
  .map(toNormalized);

function toNormalized(specs: FamilySpec[]): MetricFamily[] {
  const taken = new Set<string>();
  const families: MetricFamily[] = [];
  for (const spec of specs) {
    const names = owned(spec.name, spec.type);
    if (names.some((n) => taken.has(n))) continue;
    for (const n of names) taken.add(n);
    const seen = new Set<string>();
    const samples: Sample[] = [];
    for (const s of spec.samples) {
      let name = spec.name;
      let labels = s.labels;
      if (spec.type === 'histogram' || spec.type === 'summary') {
        const boundLabel = spec.type === 'histogram' ? 'le' : 'quantile';
        labels = labels.filter(([n]) => n !== boundLabel);
        if (s.kind === 'sum' || s.kind === 'count') {
          name = `${spec.name}_${s.kind}`;
        } else {
          if (spec.type === 'histogram') name = `${spec.name}_bucket`;
          labels = s.boundFirst ? [[boundLabel, s.bound], ...labels] : [...labels, [boundLabel, s.bound]];
        }
      }
      const sample = makeSample(name, labels, s.value, s.timestamp);
      if (seen.has(seriesKey(sample))) continue;
      seen.add(seriesKey(sample));
      samples.push(sample);
    }
    families.push(makeFamily(spec.name, spec.type, spec.help, samples));
  }
  return families;
}

const CANONICAL_LE = ['-5.0', '0.0', '0.005', '0.01', '0.1', '0.25', '0.5', '1.0', '2.5', '10.0', '100000.0', '1e+06', '1e-05', '1.5e+10'];
const CANONICAL_QUANTILES = ['0.0', '0.5', '0.9', '0.95', '0.99', '0.999', '1.0'];

const metricSpec = fc.record({
  labels: fc.uniqueArray(
    fc.tuple(
      labelName.filter((n) => !n.startsWith('_') && n !== 'le' && n !== 'quantile'),
      labelValue,
    ),
    { selector: ([n]) => n, maxLength: 2 },
  ),
  value: fc.double(),
  timestamp,
  buckets: fc.uniqueArray(fc.constantFrom(...CANONICAL_LE), { maxLength: 4 }),
  increments: fc.array(fc.nat({ max: 1000 }), { minLength: 5, maxLength: 5 }),
  quantiles: fc.uniqueArray(fc.constantFrom(...CANONICAL_QUANTILES), { maxLength: 3 }),
  quantileValues: fc.array(fc.oneof(fc.double({ min: 0, noNaN: true }), fc.constant(NaN)), { minLength: 3, maxLength: 3 }),
  withSum: fc.boolean(),
  sum: fc.double({ min: 0, noNaN: true }),
  count: fc.nat(),
});
const omFamilySpec = fc.record({
  base: fc.stringMatching(/^[a-zA-Z:][a-zA-Z0-9_:]{0,8}$/),
  type: fc.constantFrom(...METRIC_TYPES),
  help,
  metrics: fc.array(metricSpec, { maxLength: 3 }),
});

/** Families OpenMetrics can type, with samples already in OpenMetrics point order and canonical bounds. */
const openMetricsFamilies = fc.array(omFamilySpec, { maxLength: 5 }).map((specs) => {
  const taken = new Set<string>();
  const families: MetricFamily[] = [];
  for (const spec of specs) {
    const name = spec.type === 'counter' ? `${spec.base}_total` : spec.base;
    const reserved =
      spec.type === 'counter'
        ? [name, spec.base, `${spec.base}_created`]
        : spec.type === 'histogram' || spec.type === 'summary'
          ? [...owned(name, spec.type), `${name}_created`]
          : [name];
    if (reserved.some((n) => taken.has(n))) continue;
    for (const n of reserved) taken.add(n);
    const metricKeys = new Set<string>();
    const samples: Sample[] = [];
    for (const m of spec.metrics) {
      const key = keyWithout(m.labels, '');
      if (metricKeys.has(key)) continue;
      metricKeys.add(key);
      const labels = m.labels;
      if (spec.type === 'histogram') {
        const les = [...m.buckets].sort((a, b) => Number(a) - Number(b));
        les.push('+Inf');
        let cumulative = 0;
        les.forEach((le, i) => {
          cumulative += m.increments[i]!;
          samples.push(makeSample(`${name}_bucket`, [...labels, ['le', le]], cumulative, m.timestamp));
        });
        if (m.withSum && !les.some((le) => Number(le) < 0)) {
          samples.push(makeSample(`${name}_count`, labels, cumulative, m.timestamp));
          samples.push(makeSample(`${name}_sum`, labels, m.sum, m.timestamp));
        }
      } else if (spec.type === 'summary') {
        m.quantiles.forEach((q, i) => samples.push(makeSample(name, [...labels, ['quantile', q]], m.quantileValues[i]!, m.timestamp)));
        if (m.withSum) {
          samples.push(makeSample(`${name}_count`, labels, m.count, m.timestamp));
          samples.push(makeSample(`${name}_sum`, labels, m.sum, m.timestamp));
        }
      } else {
        const value = spec.type === 'counter' ? (Number.isNaN(m.value) ? 0 : Math.abs(m.value)) : m.value;
        samples.push(makeSample(name, labels, value, m.timestamp));
      }
    }
    families.push(makeFamily(name, spec.type, spec.help, samples));
  }
  return families;
});

/** Characters and fragments of hostile or broken input. */
const FRAGMENTS = [
  'x',
  'x_bucket',
  'x_sum',
  'x_count',
  'y_total',
  'le',
  'quantile',
  '{',
  '}',
  '"',
  '\\',
  '\\\\',
  '\\"',
  '\\n',
  '=',
  ',',
  ' ',
  '\t',
  '\r',
  '\0',
  '#',
  '# TYPE ',
  '# HELP ',
  'counter',
  'gauge',
  'histogram',
  'summary',
  'untyped',
  '1',
  '-1',
  '0.5',
  '+Inf',
  'NaN',
  '1e3',
  '0x1p3',
  '1_0',
  'a="b"',
  'le="1"',
  'le="+Inf"',
  'quantile="0.5"',
  '__x',
  'é',
  '\uD83D',
  '😀',
  '\uFEFF',
];
const garbageLine = fc.oneof(
  fc.string({ unit: fc.oneof(textUnit, fc.constant('\0')), maxLength: 40 }),
  fc.array(fc.constantFrom(...FRAGMENTS), { maxLength: 12 }).map((parts) => parts.join('')),
);
const garbageText = fc.array(garbageLine, { maxLength: 25 }).map((lines) => lines.join('\n'));

// -----------------------------------------------------------------------------------------------
// Helpers for comparing through OpenMetrics

function canonicalBound(value: string): string {
  const number = parseGoFloat(value);
  return number === undefined ? value : canonicalFloat(number);
}

/** One sample as a string that survives OpenMetrics: labels sorted, le/quantile canonical. */
function flat(sample: Sample): string {
  const labels = sample.labels
    .map(([n, v]): [string, string] => [n, n === 'le' || n === 'quantile' ? canonicalBound(v) : v])
    .sort((a, b) => (a[0] < b[0] ? -1 : 1));
  return `${sample.name} ${JSON.stringify(labels)} ${formatValue(sample.value)} ${sample.timestampMs ?? ''}`;
}

function servedThroughOpenMetrics(families: MetricFamily[]): Sample[] {
  return families.filter((f) => !f.name.startsWith('_')).flatMap((f) => f.samples.filter((s) => !s.labels.some(([n]) => n.startsWith('_'))));
}

const RUNS = { numRuns: 500 };

/** The text as it goes over the wire and back (a lone surrogate becomes U+FFFD), to compare with bytes read back. */
function utf8(text: string): string {
  return Buffer.from(text).toString();
}

/** A PartWriter's part of `families` (left as they are: the writer gets copies), with `target` labels when given. */
function writePart(families: readonly MetricFamily[], target?: Array<[string, string]>): IndexedPart {
  const writer = new PartWriter(new Map(families.map((f) => [f.name, f.type])));
  const labels = target === undefined ? undefined : targetLabels(target);
  for (const family of structuredClone(families)) writer.add(family, labels);
  return writer.finish();
}

/** Labels a source adds besides `source`: none, one that samples may have too, one OpenMetrics leaves out. */
const extraTargetLabels = fc.constantFrom<Array<[string, string]>>([], [['a', 't"1']], [['_x', 't2']]);

// -----------------------------------------------------------------------------------------------

describe('round trips', () => {
  it("normalized: the parser's families, renamed and filtered, serialise the same without normalising again", () => {
    const text = fc.oneof(
      garbageText,
      normalizedFamilies.map((families) => serializeText(families)),
    );
    fc.assert(
      fc.property(text, fc.boolean(), (input, everyOther) => {
        const families = prefixFamilies(parseExposition(input).families, 'p_').filter((_, i) => !everyOther || i % 2 === 0);
        expect(serializeText(families, { normalized: true })).toBe(serializeText(families));
        expect(serializeOpenMetrics(families, { normalized: true })).toBe(serializeOpenMetrics(families));
        // The buffer forms are the same text in UTF-8.
        expect(serializeTextBuffer(families).equals(Buffer.from(serializeText(families)))).toBe(true);
        expect(serializeOpenMetricsBuffer(families, { eof: false }).equals(Buffer.from(serializeOpenMetrics(families, { eof: false })))).toBe(true);
      }),
      RUNS,
    );
  });

  it('merge: our part and the kept upstream part serialised apart and concatenated are the merged list serialised', () => {
    fc.assert(
      fc.property(normalizedFamilies, normalizedFamilies, (own, upstream) => {
        const { families, dropped } = mergeFamilies(own, upstream);
        const kept = families.slice(own.length);
        expect(kept.length + dropped.length).toBe(upstream.length);
        expect(serializeText(own) + serializeText(kept)).toBe(serializeText(families));
        expect(serializeOpenMetrics(own, { eof: false }) + serializeOpenMetrics(kept, { eof: false }) + '# EOF\n').toBe(serializeOpenMetrics(families));
      }),
      RUNS,
    );
  });

  it('parts: a PartWriter writes the list as the serializers do, family by family, target labels added as addTargetLabels adds them', () => {
    fc.assert(
      fc.property(fc.oneof(normalizedFamilies, openMetricsFamilies), fc.option(extraTargetLabels, { nil: undefined }), (raw, extra) => {
        const target: Array<[string, string]> | undefined = extra === undefined ? undefined : [['source', 's'], ...extra];
        const families = target === undefined ? raw : addTargetLabels(raw, target);
        const part = writePart(raw, target);
        expect(part.text.toString()).toBe(utf8(serializeText(families, { normalized: true })));
        expect(part.openMetrics.toString()).toBe(utf8(serializeOpenMetrics(families, { eof: false, normalized: true })));
        expect(part.samples).toBe(families.reduce((n, f) => n + f.samples.length, 0));
      }),
      RUNS,
    );
  });

  it("parts: several sources' parts merged from their bytes are mergeSources' families serialised", () => {
    // A shared list (null) gives every source the same names and types, typed histograms and
    // summaries included; the clashing lists give conflicts of type and of reserved names.
    const lists = fc.tuple(openMetricsFamilies, fc.array(fc.oneof(fc.constant(null), clashingFamilies, normalizedFamilies), { minLength: 2, maxLength: 3 }));
    fc.assert(
      fc.property(lists, extraTargetLabels, ([shared, drawn], extra) => {
        const sources = drawn.map((families, i) => {
          const target: Array<[string, string]> = [['source', `s${i}`], ...extra];
          return { source: `s${i}`, raw: families ?? shared, target, families: addTargetLabels(families ?? shared, target) };
        });
        const expected = mergeSources(sources);
        const { part, dropped } = mergeParts(sources.map(({ source, raw, target }) => ({ source, part: writePart(raw, target) })));
        expect(dropped).toEqual(expected.dropped);
        expect(part.text.toString()).toBe(utf8(serializeText(expected.families, { normalized: true })));
        expect(part.openMetrics.toString()).toBe(utf8(serializeOpenMetrics(expected.families, { eof: false, normalized: true })));
        expect(part.samples).toBe(expected.families.reduce((n, f) => n + f.samples.length, 0));
      }),
      RUNS,
    );
  });

  it('text: parse(serializeText(x)) is x for any normalized family list', () => {
    fc.assert(
      fc.property(normalizedFamilies, (families) => {
        expect(normalizeFamilies(families)).toEqual({ families, problems: [] });
        expect(parseExposition(serializeText(families))).toEqual({ families, invalid: [] });
      }),
      RUNS,
    );
  });

  it('OpenMetrics: valid output that serves every sample, typed where OpenMetrics allows it', () => {
    fc.assert(
      fc.property(normalizedFamilies, (families) => {
        const back = readOpenMetrics(serializeOpenMetrics(families));
        expect(
          back
            .flatMap((f) => f.samples)
            .map(flat)
            .sort(),
        ).toEqual(servedThroughOpenMetrics(families).map(flat).sort());
        const types = new Map(back.map((f) => [f.name, f.type]));
        for (const f of families.filter((g) => !g.name.startsWith('_'))) {
          if (types.get(f.name) === f.type) continue;
          expect(f.type === 'gauge' || f.type === 'untyped', `${f.type} ${f.name} lost its type`).toBe(false);
          const kept = f.samples.filter((s) => !s.labels.some(([n]) => n.startsWith('_')));
          const names = kept.length === 0 ? [f.name] : kept.map((s) => s.name);
          for (const n of names) expect(types.get(n), `${n} of ${f.type} ${f.name}`).toBe('untyped');
        }
      }),
      RUNS,
    );
  });

  it('OpenMetrics: exact round trip for families OpenMetrics can type, and text too', () => {
    fc.assert(
      fc.property(openMetricsFamilies, (families) => {
        expect(readOpenMetrics(serializeOpenMetrics(families))).toEqual(families);
        expect(parseExposition(serializeText(families))).toEqual({ families, invalid: [] });
      }),
      RUNS,
    );
  });

  it('serializers normalise any input the same way', () => {
    const junkFamily = fc.record({
      name: fc.oneof(metricName, fc.string({ maxLength: 5 })),
      type: fc.oneof(fc.constantFrom(...METRIC_TYPES), fc.string({ maxLength: 5 })),
      help: fc.option(fc.string({ unit: fc.oneof(textUnit, fc.constant('\0')), maxLength: 6 }), { nil: undefined }),
      samples: fc.array(
        fc.record({
          name: fc.oneof(metricName, fc.string({ maxLength: 4 })),
          labels: fc.array(
            fc.tuple(fc.oneof(labelName, fc.string({ maxLength: 3 })), fc.string({ unit: fc.oneof(textUnit, fc.constant('\0')), maxLength: 4 })),
            { maxLength: 3 },
          ),
          value: fc.double(),
          timestampMs: fc.option(fc.oneof(fc.integer(), fc.double()), { nil: undefined }),
        }),
        { maxLength: 5 },
      ),
    });
    fc.assert(
      fc.property(fc.array(junkFamily, { maxLength: 5 }), (junk) => {
        const families = junk as unknown as MetricFamily[];
        const { families: clean } = normalizeFamilies(families);
        expect(parseExposition(serializeText(families))).toEqual({ families: clean, invalid: [] });
        readOpenMetrics(serializeOpenMetrics(families));
      }),
      RUNS,
    );
  });
});

describe('garbage', () => {
  it('never throws, reports only known reasons, and what it keeps serializes to valid text and OpenMetrics', () => {
    fc.assert(
      fc.property(garbageText, (text) => {
        const result = parseExposition(text);
        const lineCount = text.split('\n').length;
        for (const line of result.invalid) {
          expect(INVALID_REASONS).toContain(line.reason);
          expect(line.line).toBeGreaterThanOrEqual(1);
          expect(line.line).toBeLessThanOrEqual(lineCount);
          expect(line.text.length).toBeLessThanOrEqual(200);
        }
        expect(normalizeFamilies(result.families).problems).toEqual([]);
        expect(parseExposition(serializeText(result.families))).toEqual({ families: result.families, invalid: [] });
        readOpenMetrics(serializeOpenMetrics(result.families));
      }),
      { numRuns: 1000 },
    );
  });

  it('valid lines mixed into garbage survive unchanged', () => {
    const VALUES: Array<[string, number]> = [
      ['1', 1],
      ['-2.5', -2.5],
      ['NaN', NaN],
      ['+Inf', Infinity],
      ['1e3', 1000],
      ['0x10p0', 16],
      ['12345678901234567890', 12345678901234567000],
    ];
    const validLine = fc.record({
      labels: fc.uniqueArray(fc.tuple(labelName, labelValue), { selector: ([n]) => n, maxLength: 3 }),
      value: fc.constantFrom(...VALUES),
      timestamp,
      blank: fc.constantFrom(' ', '\t', '  '),
      trailingComma: fc.boolean(),
      crlf: fc.boolean(),
    });
    const escape = (v: string): string => v.replace(/[\\"\n]/g, (c) => (c === '\n' ? '\\n' : `\\${c}`));
    const entries = fc.array(
      fc.oneof(
        garbageLine.filter((g) => !g.includes('zz_ok')).map((garbage) => ({ garbage })),
        validLine.map((valid) => ({ valid })),
      ),
      { maxLength: 30 },
    );
    fc.assert(
      fc.property(entries, (list) => {
        const expected: MetricFamily[] = [];
        const lines = list.map((entry, i) => {
          if ('garbage' in entry) return entry.garbage;
          const { labels, value, timestamp: ts, blank, trailingComma, crlf } = entry.valid;
          const name = `zz_ok_${i}`;
          expected.push({ name, type: 'untyped', samples: [makeSample(name, labels, value[1], ts)] });
          const rendered = labels.map(([n, v]) => `${n}="${escape(v)}"`).join(',') + (trailingComma && labels.length > 0 ? ',' : '');
          return `${name}{${rendered}}${blank}${value[0]}${ts === undefined ? '' : `${blank}${ts}`}${crlf ? '\r' : ''}`;
        });
        const { families } = parseExposition(lines.join('\n'));
        expect(families.filter((f) => f.name.startsWith('zz_ok_'))).toEqual(expected);
      }),
      { numRuns: 500 },
    );
  });
});

describe('hostile input', () => {
  // Linear work on these inputs takes milliseconds to about a second; catastrophic backtracking
  // or quadratic work on 300,000 characters or 100,000 lines takes minutes, past the test timeout. Speed itself is measured
  // by the benchmarks (`npm run bench`, suite 7: 100,000 series), not here.

  /** Parses and serialises `input`; the output is valid text whatever the input (it parses with no invalid line). */
  function survives(input: string): void {
    const result = parseExposition(input);
    expect(parseExposition(serializeText(result.families)).invalid).toEqual([]);
    expect(serializeOpenMetrics(result.families).endsWith('# EOF\n')).toBe(true);
  }

  const cases: Array<[string, () => string]> = [
    ['300,000 open braces', () => '{'.repeat(3e5)],
    ['300,000 backslashes', () => '\\'.repeat(3e5)],
    ['300,000 quotes', () => '"'.repeat(3e5)],
    ['an unterminated label value of backslashes', () => `m{a="${'\\'.repeat(3e5)}`],
    ['a label value of 150,000 escaped quotes', () => `m{a="${'\\"'.repeat(1.5e5)}"} 1`],
    ['100,000 distinct labels on one line', () => `m{${Array.from({ length: 1e5 }, (_, i) => `l${i}="v"`).join(',')}} 1`],
    ['100,000 repeated labels', () => `m{${'a="b",'.repeat(1e5)}} 1`],
    ['300,000 commas', () => `m{${','.repeat(3e5)}} 1`],
    ['a 300,000-digit value', () => `m ${'9'.repeat(3e5)}`],
    ['a 300,000-digit fraction', () => `m 0.${'0'.repeat(3e5)}1`],
    ['a 300,000-digit hexadecimal value', () => `m 0x${'f'.repeat(3e5)}p-1200000`],
    ['a 300,000-digit timestamp', () => `m 1 ${'1'.repeat(3e5)}`],
    ['300,000 underscores in a value', () => `m 1${'_1'.repeat(1.5e5)}`],
    ['300,000 blanks', () => `m${' '.repeat(3e5)}1${'\t'.repeat(3e5)}`],
    ['a HELP of 150,000 escapes', () => `# HELP m ${'\\\\'.repeat(1.5e5)}`],
    ['a TYPE with a 300,000-character type', () => `# TYPE m ${'x'.repeat(3e5)}`],
    ['100,000 lines of braces', () => '{\n'.repeat(1e5)],
    ['100,000 copies of one series', () => 'm{a="b"} 1\n'.repeat(1e5)],
    ['100,000 TYPE lines', () => Array.from({ length: 1e5 }, (_, i) => `# TYPE m${i} histogram`).join('\n')],
    [
      'a 100,000-bucket histogram',
      () => `# TYPE h histogram\n${Array.from({ length: 1e5 }, (_, i) => `h_bucket{le="${i}"} ${i}`).join('\n')}\nh_bucket{le="+Inf"} 1e5\n`,
    ],
  ];

  it.each(cases)('%s', (_name, make) => {
    survives(make());
  });

  it('generated repetitions of format characters are read and served', () => {
    fc.assert(
      fc.property(fc.array(fc.constantFrom(...FRAGMENTS), { minLength: 1, maxLength: 4 }), fc.integer({ min: 1000, max: 50_000 }), (parts, times) => {
        survives(parts.join('').repeat(times));
      }),
      { numRuns: 40 },
    );
  });

  it('a hostile Accept header is negotiated', () => {
    for (const header of [';'.repeat(1e6), ','.repeat(1e6), `application/openmetrics-text;version="${'a'.repeat(1e6)}`, 'q='.repeat(3e5)]) {
      expect(negotiateFormat(header)).toBe('text');
    }
  });
});
