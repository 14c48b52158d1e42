/**
 * Parser for the Prometheus text format 0.0.4, and the family rules that both the parser and the
 * serializers enforce. Implements the reading side of E7 (`GET /analytics/prometheus`, see
 * `../shared/reference/platform-api.md`, "E7 notes"): the platform sends lines
 * `<metric_name>{<labels>} <number>`, usually without `# HELP`/`# TYPE`.
 *
 * The grammar follows Prometheus's own text lexer (`model/textparse/promlex.l`, what a scrape
 * uses) and the reference parser in `prometheus/common/expfmt` (what `promtool check metrics`
 * uses) where they agree, and the stricter one where they differ, so that nothing we accept can
 * make our output fail in either. It is a hand-written scanner: every character is looked at a
 * bounded number of times, so no input can make it backtrack.
 */
import type { FamilyProblem, InvalidLine, InvalidReason, MetricFamily, MetricType, ParseResult, Sample } from './types.js';

const TAB = 9;
const CR = 13;
const SPACE = 32;
const QUOTE = 34;
const HASH = 35;
const PLUS = 43;
const COMMA = 44;
const MINUS = 45;
const DOT = 46;
const EQUALS = 61;
const BACKSLASH = 92;
const UNDERSCORE = 95;
const LBRACE = 123;
const RBRACE = 125;

/** Longest excerpt of a dropped line kept in {@link InvalidLine.text}. */
const INVALID_TEXT_MAX_CHARS = 200;

const TYPES_BY_NAME: ReadonlyMap<string, MetricType> = new Map<string, MetricType>([
  ['counter', 'counter'],
  ['gauge', 'gauge'],
  ['histogram', 'histogram'],
  ['summary', 'summary'],
  ['untyped', 'untyped'],
]);

// ---------------------------------------------------------------------------------------------
// Character classes and names

function isLetter(c: number): boolean {
  return (c >= 97 && c <= 122) || (c >= 65 && c <= 90);
}

function isDigit(c: number): boolean {
  return c >= 48 && c <= 57;
}

function isBlank(c: number): boolean {
  return c === SPACE || c === TAB;
}

function isMetricNameStart(c: number): boolean {
  return isLetter(c) || c === UNDERSCORE || c === 58;
}

function isMetricNameChar(c: number): boolean {
  return isMetricNameStart(c) || isDigit(c);
}

function isLabelNameStart(c: number): boolean {
  return isLetter(c) || c === UNDERSCORE;
}

function isLabelNameChar(c: number): boolean {
  return isLabelNameStart(c) || isDigit(c);
}

/** Whether `name` matches `[a-zA-Z_:][a-zA-Z0-9_:]*`, the metric names of the text format. */
export function isValidMetricName(name: string): boolean {
  if (name.length === 0 || !isMetricNameStart(name.charCodeAt(0))) return false;
  for (let i = 1; i < name.length; i++) if (!isMetricNameChar(name.charCodeAt(i))) return false;
  return true;
}

/** Whether `name` matches `[a-zA-Z_][a-zA-Z0-9_]*` and does not start with `__` (reserved for Prometheus). */
export function isValidLabelName(name: string): boolean {
  if (name.length === 0 || !isLabelNameStart(name.charCodeAt(0))) return false;
  if (name.length > 1 && name.charCodeAt(0) === UNDERSCORE && name.charCodeAt(1) === UNDERSCORE) return false;
  for (let i = 1; i < name.length; i++) if (!isLabelNameChar(name.charCodeAt(i))) return false;
  return true;
}

function skipBlanks(text: string, i: number, end: number): number {
  while (i < end && isBlank(text.charCodeAt(i))) i++;
  return i;
}

function skipToken(text: string, i: number, end: number): number {
  while (i < end && !isBlank(text.charCodeAt(i))) i++;
  return i;
}

// ---------------------------------------------------------------------------------------------
// Numbers

/**
 * Reads a float the way Go's `strconv.ParseFloat(s, 64)` does, since that is what Prometheus
 * uses for sample values, `le` and `quantile`: decimal with optional exponent (`1`, `-1.5e-3`,
 * `.5`, `5.`), hexadecimal with a binary exponent (`0x1.8p3`), underscores between digits
 * (`1_000`), and case-insensitive `NaN`, `Inf`, `Infinity` (the last two with an optional sign).
 *
 * @returns the number, or `undefined` when Go would return an error: bad syntax, or a finite
 *   literal that rounds to ±Inf (Go's `ErrRange`). Literals that round to zero are fine, as in Go.
 */
export function parseGoFloat(s: string): number | undefined {
  const n = s.length;
  if (n === 0) return undefined;
  let i = 0;
  let negative = false;
  const first = s.charCodeAt(0);
  if (first === PLUS || first === MINUS) {
    negative = first === MINUS;
    i = 1;
  }
  const rest = n - i;
  if (rest === 3 || rest === 8) {
    const word = s.slice(i).toLowerCase();
    if (word === 'inf' || word === 'infinity') return negative ? -Infinity : Infinity;
    // Go's special() accepts a sign only before Inf, not before NaN.
    if (word === 'nan') return i === 0 ? NaN : undefined;
  }
  if (rest > 2 && s.charCodeAt(i) === 48 && (s.charCodeAt(i + 1) | 0x20) === 0x78) return parseHexFloat(s, i + 2, negative);

  let sawDigits = false;
  let sawDot = false;
  for (; i < n; i++) {
    const c = s.charCodeAt(i);
    if (isDigit(c)) sawDigits = true;
    else if (c === DOT && !sawDot) sawDot = true;
    else if (c !== UNDERSCORE) break;
  }
  if (!sawDigits) return undefined;
  if (i < n && (s.charCodeAt(i) | 0x20) === 0x65) {
    i = skipExponent(s, i + 1);
    if (i < 0) return undefined;
  }
  if (i !== n) return undefined;
  const underscores = s.includes('_');
  if (underscores && !underscoreOK(s)) return undefined;
  const value = Number(underscores ? s.replaceAll('_', '') : s);
  // Every string that got here is a JavaScript decimal literal too, so NaN cannot happen; an
  // infinite result is an overflow, which Go reports as ErrRange.
  return Number.isFinite(value) ? value : undefined;
}

/** Skips `[+-]?[0-9][0-9_]*` from `i`; returns the index after it, or -1 when there is no digit. */
function skipExponent(s: string, i: number): number {
  const n = s.length;
  if (i < n && (s.charCodeAt(i) === PLUS || s.charCodeAt(i) === MINUS)) i++;
  if (i >= n || !isDigit(s.charCodeAt(i))) return -1;
  while (i < n && (isDigit(s.charCodeAt(i)) || s.charCodeAt(i) === UNDERSCORE)) i++;
  return i;
}

/** Go's `underscoreOK`: underscores only between digits (a base prefix counts as a digit). */
function underscoreOK(s: string): boolean {
  let i = 0;
  if (s.charCodeAt(0) === PLUS || s.charCodeAt(0) === MINUS) i = 1;
  let saw = '^';
  let hex = false;
  if (s.length - i >= 2 && s.charCodeAt(i) === 48) {
    const p = s.charCodeAt(i + 1) | 0x20;
    if (p === 0x62 || p === 0x6f || p === 0x78) {
      i += 2;
      saw = '0';
      hex = p === 0x78;
    }
  }
  for (; i < s.length; i++) {
    const c = s.charCodeAt(i);
    const lower = c | 0x20;
    if (isDigit(c) || (hex && lower >= 0x61 && lower <= 0x66)) {
      saw = '0';
      continue;
    }
    if (c === UNDERSCORE) {
      if (saw !== '0') return false;
      saw = '_';
      continue;
    }
    if (saw === '_') return false;
    saw = '!';
  }
  return saw !== '_';
}

function isHexDigit(c: number): boolean {
  const lower = c | 0x20;
  return isDigit(c) || (lower >= 0x61 && lower <= 0x66);
}

/** Go's hexadecimal float: `0x` mantissa (hex digits, one optional dot), then a required `p` exponent. */
function parseHexFloat(s: string, start: number, negative: boolean): number | undefined {
  const n = s.length;
  let fractionDigits = 0;
  let sawDot = false;
  let sawDigits = false;
  let i = start;
  for (; i < n; i++) {
    const c = s.charCodeAt(i);
    if (isHexDigit(c)) {
      sawDigits = true;
      if (sawDot) fractionDigits++;
    } else if (c === UNDERSCORE) {
      // checked by underscoreOK below
    } else if (c === DOT && !sawDot) {
      sawDot = true;
    } else {
      break;
    }
  }
  if (!sawDigits || i >= n || (s.charCodeAt(i) | 0x20) !== 0x70) return undefined;
  const digits = s.slice(start, i).replace(/[._]/g, '').replace(/^0+/, '');
  const expStart = i + 1;
  i = skipExponent(s, expStart);
  if (i !== n) return undefined;
  if (s.includes('_') && !underscoreOK(s)) return undefined;
  // Like Go, stop growing the exponent at 10000: beyond it the result is 0 or out of range anyway.
  let exponent = 0;
  let k = expStart;
  const expSign = s.charCodeAt(k) === MINUS ? -1 : 1;
  if (s.charCodeAt(k) === PLUS || s.charCodeAt(k) === MINUS) k++;
  for (; k < n; k++) {
    const c = s.charCodeAt(k);
    if (isDigit(c) && exponent < 10_000) exponent = exponent * 10 + (c - 48);
  }
  const value = scaleBinary(digits, expSign * exponent - 4 * fractionDigits);
  if (value === undefined) return undefined;
  return negative ? -value : value;
}

/**
 * The float64 nearest to `0x<digits> × 2^exponent` (ties to even), or `undefined` when it
 * overflows. Rounds once, at the precision the result has (53 bits, fewer when subnormal).
 */
function scaleBinary(digits: string, exponent: number): number | undefined {
  if (digits.length === 0) return 0;
  const bits = (digits.length - 1) * 4 + (32 - Math.clz32(parseInt(digits[0]!, 16)));
  const top = bits - 1 + exponent; // exponent of the leading bit
  if (top > 1023) return undefined;
  const keep = top >= -1022 ? 53 : 53 - (-1022 - top);
  let mantissa = BigInt(`0x${digits}`);
  let scale = exponent;
  const drop = bits - keep;
  if (drop > 0) {
    const shift = BigInt(drop);
    let kept = mantissa >> shift;
    const remainder = mantissa - (kept << shift);
    const half = 1n << (shift - 1n);
    if (remainder > half || (remainder === half && (kept & 1n) === 1n)) kept += 1n;
    mantissa = kept;
    scale += drop;
  }
  // Number(mantissa) is exact (at most 2^53) and every step below is a multiplication by a power
  // of two whose result is still representable, so no second rounding happens.
  let value = Number(mantissa);
  while (scale > 1023) {
    value *= 2 ** 1023;
    scale -= 1023;
  }
  while (scale < -1022) {
    value *= 2 ** -1022;
    scale += 1022;
  }
  value *= 2 ** scale;
  return Number.isFinite(value) ? value : undefined;
}

/**
 * Reads a timestamp: decimal digits only, at most 2^53 − 1 (milliseconds since the epoch).
 *
 * The text format calls the timestamp an int64, but Prometheus's own lexer accepts only
 * `[0-9]+` there: a sign, even `+`, fails the whole scrape. Such lines are therefore dropped
 * (`bad_timestamp`) rather than served.
 */
function parseTimestamp(s: string): number | undefined {
  for (let i = 0; i < s.length; i++) if (!isDigit(s.charCodeAt(i))) return undefined;
  const value = Number(s);
  return s.length > 0 && Number.isSafeInteger(value) ? value : undefined;
}

// ---------------------------------------------------------------------------------------------
// Families

/**
 * The sample names a family owns: `[name]`, plus `_bucket`, `_sum`, `_count` for a histogram and
 * `_sum`, `_count` for a summary. No two families of one exposition may share any of them.
 */
export function familySampleNames(name: string, type: MetricType): string[] {
  if (type === 'histogram') return [name, `${name}_bucket`, `${name}_sum`, `${name}_count`];
  if (type === 'summary') return [name, `${name}_sum`, `${name}_count`];
  return [name];
}

/**
 * A key that is equal for two label sets exactly when they name the same series: label order is
 * ignored and so are labels with empty values. `skip` leaves one label out (`le` or `quantile`,
 * to group a histogram's or summary's samples by their metric). The key is the label set as the
 * text format writes it, names in order: `a="1",b="x\\"y"`; escaping makes it unambiguous, and
 * lets the parser use the text of an already canonical label set as its key without building one.
 */
export function labelSetKey(labels: ReadonlyArray<readonly [string, string]>, skip?: string): string {
  // Hot path (every sample of every scrape): label names usually come sorted, so the key is built
  // by concatenation and only an unsorted list pays for an array and a sort.
  let key = '';
  let previous = '';
  for (let i = 0; i < labels.length; i++) {
    const pair = labels[i]!;
    const name = pair[0];
    if (i > 0 && name <= previous) return sortedLabelSetKey(labels, skip);
    previous = name;
    const value = pair[1];
    if (value === '' || name === skip) continue;
    key = key === '' ? `${name}="${escapeForKey(value)}"` : `${key},${name}="${escapeForKey(value)}"`;
  }
  return key;
}

function sortedLabelSetKey(labels: ReadonlyArray<readonly [string, string]>, skip: string | undefined): string {
  const pairs: Array<readonly [string, string]> = [];
  for (let i = 0; i < labels.length; i++) {
    const pair = labels[i]!;
    if (pair[1] !== '' && pair[0] !== skip) pairs.push(pair);
  }
  pairs.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  return pairs.map(([name, value]) => `${name}="${escapeForKey(value)}"`).join(',');
}

const KEY_SPECIALS_ALL = /[\\"\n]/g;

function escapeForKey(value: string): string {
  // A loop beats a regular expression call on the short strings label values are.
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i);
    if (c === BACKSLASH || c === QUOTE || c === 10) return value.replace(KEY_SPECIALS_ALL, (m) => (m === '\n' ? '\\n' : `\\${m}`));
  }
  return value;
}

function labelValue(labels: ReadonlyArray<readonly [string, string]>, name: string): string | undefined {
  for (let i = 0; i < labels.length; i++) if (labels[i]![0] === name) return labels[i]![1];
  return undefined;
}

/** Why `sample` cannot belong to family `name` of `type`, or undefined when it can. */
function misfit(name: string, type: MetricType, sample: Sample): InvalidReason | undefined {
  if (sample.name === name) {
    if (type === 'histogram') return 'family_mismatch';
    if (type === 'summary') return parseGoFloat(labelValue(sample.labels, 'quantile') ?? '') === undefined ? 'family_mismatch' : undefined;
    return undefined;
  }
  if ((type !== 'histogram' && type !== 'summary') || !sample.name.startsWith(name)) return 'family_mismatch';
  const suffix = sample.name.slice(name.length);
  if (suffix === '_sum' || suffix === '_count') {
    return labelValue(sample.labels, type === 'histogram' ? 'le' : 'quantile') === undefined ? undefined : 'family_mismatch';
  }
  if (suffix === '_bucket' && type === 'histogram') {
    return parseGoFloat(labelValue(sample.labels, 'le') ?? '') === undefined ? 'family_mismatch' : undefined;
  }
  return 'family_mismatch';
}

/** Help text as we keep it: no leading blanks and no trailing CR (neither survives a round trip), NUL-free. */
function normalizeHelp(help: string): string | undefined {
  let start = 0;
  let end = help.length;
  while (start < end && isBlank(help.charCodeAt(start))) start++;
  while (end > start && help.charCodeAt(end - 1) === CR) end--;
  return start === end ? undefined : help.slice(start, end);
}

/**
 * The name of the family that owns sample name `name`, given the families' types by name:
 * `name` itself when a family has that name, else the histogram (for `_bucket`, `_sum`,
 * `_count`) or summary (for `_sum`, `_count`) it is a suffix name of. Looking suffixes up rather
 * than storing every owned name keeps 100,000 histograms from costing 400,000 map entries.
 */
export function owningFamily(name: string, typeOf: (familyName: string) => MetricType | undefined): string | undefined {
  if (typeOf(name) !== undefined) return name;
  for (const suffix of ['_bucket', '_sum', '_count']) {
    if (!name.endsWith(suffix)) continue;
    const base = name.slice(0, -suffix.length);
    const type = typeOf(base);
    if (type === 'histogram' || (type === 'summary' && suffix !== '_bucket')) return base;
  }
  return undefined;
}

interface Entry {
  family: MetricFamily;
  typeSeen: boolean;
  helpSeen: boolean;
  /** {@link labelSetKey}s (prefixed by the sample name's suffix, if any) of the samples kept so far; made on the first sample. */
  series: Set<string> | undefined;
}

/**
 * Families under construction, with the rules that keep an exposition unambiguous: each sample
 * name belongs to exactly one family, metadata comes once and before samples, a series once.
 */
class FamilySet {
  readonly #byName = new Map<string, Entry>();
  readonly #entries: Entry[] = [];
  readonly #typeOf = (name: string): MetricType | undefined => this.#byName.get(name)?.family.type;

  families(): MetricFamily[] {
    return this.#entries.map((e) => e.family);
  }

  #owner(name: string): Entry | undefined {
    const owner = owningFamily(name, this.#typeOf);
    return owner === undefined ? undefined : this.#byName.get(owner);
  }

  #create(name: string, type: MetricType, typeSeen: boolean, help: string | undefined): Entry {
    const family: MetricFamily = help === undefined ? { name, type, samples: [] } : { name, type, help, samples: [] };
    const entry: Entry = { family, typeSeen, helpSeen: help !== undefined, series: undefined };
    this.#entries.push(entry);
    this.#byName.set(name, entry);
    return entry;
  }

  /** Whether every name a family `name` of `type` would own is free (or already `self`'s). */
  #free(name: string, type: MetricType, self: Entry | undefined): boolean {
    for (const owned of familySampleNames(name, type)) {
      const owner = this.#owner(owned);
      if (owner !== undefined && owner !== self) return false;
    }
    return true;
  }

  declareType(name: string, type: MetricType): InvalidReason | undefined {
    const owner = this.#owner(name);
    if (owner === undefined) {
      if (!this.#free(name, type, undefined)) return 'family_mismatch';
      this.#create(name, type, true, undefined);
      return undefined;
    }
    if (owner.family.name !== name) return 'family_mismatch';
    if (owner.typeSeen) return 'duplicate_metadata';
    if (owner.family.samples.length > 0) return 'late_metadata';
    if (!this.#free(name, type, owner)) return 'family_mismatch';
    owner.family.type = type;
    owner.typeSeen = true;
    this.#last = undefined;
    return undefined;
  }

  declareHelp(name: string, help: string): InvalidReason | undefined {
    const owner = this.#owner(name);
    if (owner === undefined) {
      this.#create(name, 'untyped', false, help);
      return undefined;
    }
    if (owner.family.name !== name) return 'family_mismatch';
    if (owner.helpSeen) return 'duplicate_metadata';
    if (owner.family.samples.length > 0) return 'late_metadata';
    owner.family.help = help;
    owner.helpSeen = true;
    return undefined;
  }

  /** The family of the previous {@link addSample}: consecutive lines mostly share a name, and comparing beats hashing. */
  #last: Entry | undefined;
  #lastName = '';

  /**
   * Adds a parsed sample to the family that owns its name, creating an untyped one if none does.
   * `labelsKey`, when given, is the sample's {@link labelSetKey}.
   */
  addSample(sample: Sample, labelsKey?: string): InvalidReason | undefined {
    let owner = this.#last;
    if (owner === undefined || sample.name !== this.#lastName) {
      owner = this.#owner(sample.name) ?? this.#create(sample.name, 'untyped', false, undefined);
      this.#last = owner;
      this.#lastName = sample.name;
    }
    return this.append(owner, sample, labelsKey);
  }

  /** A whole family at once (for {@link normalizeFamilies}): its name and owned names must be free. */
  openFamily(name: string, type: MetricType, help: string | undefined): Entry | InvalidReason {
    const owner = this.#owner(name);
    if (owner !== undefined) return owner.family.name === name ? 'duplicate_metadata' : 'family_mismatch';
    if (!this.#free(name, type, undefined)) return 'family_mismatch';
    return this.#create(name, type, true, help);
  }

  append(entry: Entry, sample: Sample, labelsKey = labelSetKey(sample.labels)): InvalidReason | undefined {
    const { family } = entry;
    const reason = misfit(family.name, family.type, sample);
    if (reason !== undefined) return reason;
    // Samples of one family differ in name only by suffix; a key cannot start with `{`.
    const key = sample.name.length === family.name.length ? labelsKey : `${sample.name.slice(family.name.length)}{${labelsKey}`;
    const series = (entry.series ??= new Set());
    const before = series.size;
    series.add(key);
    if (series.size === before) return 'duplicate_series';
    family.samples.push(sample);
    return undefined;
  }
}

// ---------------------------------------------------------------------------------------------
// Lines

/*
 * Per-line results that would otherwise need a result object per line. The parser is synchronous
 * and not re-entrant, so module state is safe; it is reset at the start of every parse.
 */
/** Just after the `}` of the last label set {@link parseLabels} read. */
let labelsEnd = 0;
/** Whether that label set was written exactly as {@link labelSetKey} renders it, so its text can serve as the key. */
let labelsCanonical = false;
/** The previous line's sample name and label names: reused when the next line repeats them, which spares a string per name. */
let previousName = '';
let previousLabelNames: string[] = [];
/** The series key of the last sample {@link parseSampleLine} returned, when it could take it from the text. */
let sampleLabelsKey: string | undefined;

function resetLineState(): void {
  labelsEnd = 0;
  labelsCanonical = false;
  previousName = '';
  previousLabelNames = [];
  sampleLabelsKey = undefined;
}

/** `text[start, end)`, or `candidate` when that is the same characters (no new string then). */
function sliceOrReuse(text: string, start: number, end: number, candidate: string | undefined): string {
  return candidate !== undefined && candidate.length === end - start && text.startsWith(candidate, start) ? candidate : text.slice(start, end);
}

/** The value of `text[start, end)` when it is 1 to 15 decimal digits (so exact), else undefined. */
function digitsValue(text: string, start: number, end: number): number | undefined {
  if (start === end) return undefined;
  let value = 0;
  for (let i = start; i < end; i++) {
    const d = text.charCodeAt(i) - 48;
    if (d < 0 || d > 9) return undefined;
    value = value * 10 + d;
  }
  return value;
}

/** Parses `name{labels} value [timestamp]` in `text[i, end)`, where `i` is the first non-blank character. */
function parseSampleLine(text: string, i: number, end: number): Sample | InvalidReason {
  const nameStart = i;
  if (!isMetricNameStart(text.charCodeAt(i))) return 'bad_metric_name';
  i++;
  while (i < end && isMetricNameChar(text.charCodeAt(i))) i++;
  const name = sliceOrReuse(text, nameStart, i, previousName);
  if (i < end && !isBlank(text.charCodeAt(i)) && text.charCodeAt(i) !== LBRACE) return 'bad_metric_name';
  previousName = name;
  i = skipBlanks(text, i, end);

  let labels: Array<[string, string]> = [];
  sampleLabelsKey = '';
  if (i < end && text.charCodeAt(i) === LBRACE) {
    const parsed = parseLabels(text, i + 1, end);
    if (typeof parsed === 'string') return parsed;
    labels = parsed;
    sampleLabelsKey = labelsCanonical ? text.slice(i + 1, labelsEnd - 1) : undefined;
    i = skipBlanks(text, labelsEnd, end);
  }

  if (i >= end) return 'bad_value';
  const valueStart = i;
  i = skipToken(text, i, end);
  // Counts are the usual values: read short digit runs without making a string.
  const value = i - valueStart <= 15 ? digitsValue(text, valueStart, i) ?? parseGoFloat(text.slice(valueStart, i)) : parseGoFloat(text.slice(valueStart, i));
  if (value === undefined) return 'bad_value';
  i = skipBlanks(text, i, end);
  if (i >= end) return { name, labels, value };

  const timestampStart = i;
  i = skipToken(text, i, end);
  const timestampMs = (i - timestampStart <= 15 ? digitsValue(text, timestampStart, i) : undefined) ?? parseTimestamp(text.slice(timestampStart, i));
  if (timestampMs === undefined) return 'bad_timestamp';
  if (skipBlanks(text, i, end) < end) return 'bad_syntax';
  return { name, labels, value, timestampMs };
}

/** The escapes of a label value, all checked valid before this runs. */
const LABEL_ESCAPES = /\\(.)/g;

function unescapeLabelChar(_match: string, escaped: string): string {
  return escaped === 'n' ? '\n' : escaped;
}

/**
 * Label pairs of the line being read. Reused from line to line and copied out at the end, because
 * an array grown by push keeps room for 17 elements: for 100,000 samples that is megabytes of
 * garbage the collector would copy around.
 */
const scratchLabels: Array<[string, string]> = [];

/** Parses the label pairs after `{` up to and including `}`; sets {@link labelsEnd} and {@link labelsCanonical}. */
function parseLabels(text: string, i: number, end: number): Array<[string, string]> | InvalidReason {
  const labels = scratchLabels;
  labels.length = 0;
  // A set only for long label lists, so hostile lines with thousands of labels stay linear.
  let names: Set<string> | undefined;
  let canonical = true;
  for (;;) {
    const before = i;
    i = skipBlanks(text, i, end);
    if (i >= end) return 'bad_syntax';
    let c = text.charCodeAt(i);
    if (c === RBRACE) {
      // `{}` or a trailing comma: `{a="b",}` is not how the key is written.
      labelsEnd = i + 1;
      labelsCanonical = canonical && i === before && labels.length === 0;
      return labels.slice();
    }
    if (i !== before) canonical = false;
    if (!isLabelNameStart(c)) return c === QUOTE || c === COMMA || c === EQUALS ? 'bad_syntax' : 'bad_label_name';
    const nameStart = i;
    i++;
    while (i < end && isLabelNameChar(text.charCodeAt(i))) i++;
    const name = sliceOrReuse(text, nameStart, i, previousLabelNames[labels.length]);
    const afterName = i;
    i = skipBlanks(text, i, end);
    if (i >= end) return 'bad_syntax';
    c = text.charCodeAt(i);
    if (c !== EQUALS) return i === afterName && c !== RBRACE && c !== COMMA ? 'bad_label_name' : 'bad_syntax';
    if (name.length > 1 && name.charCodeAt(0) === UNDERSCORE && name.charCodeAt(1) === UNDERSCORE) return 'bad_label_name';
    const equalsAt = i;
    i = skipBlanks(text, equalsAt + 1, end);
    if (i >= end || text.charCodeAt(i) !== QUOTE) return 'bad_syntax';
    if (equalsAt !== afterName || i !== equalsAt + 1) canonical = false;
    i++;

    // Find the closing quote and check the escapes first, then make the value with one slice
    // (and one replace if there were escapes), rather than a string per escape.
    const valueStart = i;
    let escapes = false;
    for (;;) {
      if (i >= end) return 'bad_syntax';
      c = text.charCodeAt(i);
      if (c === QUOTE) break;
      if (c === 0) return 'bad_syntax';
      if (c === BACKSLASH) {
        if (i + 1 >= end) return 'bad_syntax';
        const escaped = text.charCodeAt(i + 1);
        if (escaped !== BACKSLASH && escaped !== QUOTE && escaped !== 110) return 'bad_escape';
        escapes = true;
        i += 2;
        continue;
      }
      i++;
    }
    const value = escapes ? text.slice(valueStart, i).replace(LABEL_ESCAPES, unescapeLabelChar) : text.slice(valueStart, i);
    i++;
    // Keys leave out empty values and list names in order; the only escapes the text may hold are
    // the three the key uses too, so otherwise the text is the key.
    if (value === '' || (labels.length > 0 && name <= labels[labels.length - 1]![0])) canonical = false;

    if (labels.length >= 8) {
      names ??= new Set(labels.map(([n]) => n));
      if (names.has(name)) return 'duplicate_label';
      names.add(name);
    } else {
      for (let k = 0; k < labels.length; k++) if (labels[k]![0] === name) return 'duplicate_label';
    }
    labels.push([name, value]);
    if (labels.length <= previousLabelNames.length) previousLabelNames[labels.length - 1] = name;
    else previousLabelNames.push(name);

    const afterValue = i;
    i = skipBlanks(text, i, end);
    if (i >= end) return 'bad_syntax';
    if (i !== afterValue) canonical = false;
    c = text.charCodeAt(i);
    if (c === COMMA) {
      i++;
      // A comma followed by `}` is a trailing comma, caught above.
      continue;
    }
    if (c === RBRACE) {
      labelsEnd = i + 1;
      labelsCanonical = canonical;
      return labels.slice();
    }
    return 'bad_syntax';
  }
}

/** Unescapes HELP text (`\\` and `\n` only). */
function unescapeHelp(text: string, i: number, end: number): string | { reason: InvalidReason } {
  let help = '';
  let chunkStart = i;
  for (; i < end; i++) {
    const c = text.charCodeAt(i);
    if (c === 0) return { reason: 'bad_syntax' };
    if (c !== BACKSLASH) continue;
    const escaped = i + 1 < end ? text.charCodeAt(i + 1) : -1;
    if (escaped !== BACKSLASH && escaped !== 110) return { reason: 'bad_escape' };
    help += text.slice(chunkStart, i) + (escaped === BACKSLASH ? '\\' : '\n');
    i++;
    chunkStart = i + 1;
  }
  return help + text.slice(chunkStart, end);
}

/**
 * Handles a line starting with `#` (`i` is just after it). `# HELP` and `# TYPE` need a blank
 * after `#`, as in Prometheus's lexer; anything else, and a bare `# HELP`/`# TYPE` keyword, is a
 * comment. `# HELP name` with empty text is ignored like a comment (OpenMetrics: an empty HELP
 * is as if there were none).
 */
function parseCommentLine(text: string, i: number, end: number, set: FamilySet): InvalidReason | undefined {
  if (i < end && !isBlank(text.charCodeAt(i))) return undefined;
  i = skipBlanks(text, i, end);
  const keywordStart = i;
  i = skipToken(text, i, end);
  const keyword = text.slice(keywordStart, i);
  if (keyword !== 'HELP' && keyword !== 'TYPE') return undefined;
  i = skipBlanks(text, i, end);
  if (i >= end) return undefined;
  const nameStart = i;
  i = skipToken(text, i, end);
  const name = text.slice(nameStart, i);
  if (!isValidMetricName(name)) return 'bad_metric_name';
  i = skipBlanks(text, i, end);

  if (keyword === 'TYPE') {
    const typeStart = i;
    i = skipToken(text, i, end);
    // expfmt reads the type case-insensitively; we write it in lower case, which Prometheus needs.
    const type = TYPES_BY_NAME.get(text.slice(typeStart, i).toLowerCase());
    if (type === undefined || skipBlanks(text, i, end) < end) return 'bad_type';
    return set.declareType(name, type);
  }

  if (i >= end) return undefined;
  const raw = unescapeHelp(text, i, end);
  if (typeof raw !== 'string') return raw.reason;
  const help = normalizeHelp(raw);
  return help === undefined ? undefined : set.declareHelp(name, help);
}

function excerpt(text: string, start: number, end: number): string {
  let stop = Math.min(end, start + INVALID_TEXT_MAX_CHARS);
  // Do not cut a surrogate pair in half.
  if (stop < end && stop > start) {
    const last = text.charCodeAt(stop - 1);
    if (last >= 0xd800 && last <= 0xdbff) stop--;
  }
  return text.slice(start, stop);
}

/**
 * Parses Prometheus text format 0.0.4: the body of E7 (`GET /analytics/prometheus`,
 * `../shared/reference/platform-api.md`, "E7 notes"), or prom-client's `registry.metrics()`.
 *
 * Lines end in LF; a CR before the LF is dropped. Blank lines and comments are skipped; a
 * leading byte order mark is ignored. `# HELP` text has its `\\` and `\n` escapes undone and its
 * trailing CRs removed. Samples are grouped into families: a sample joins the family that owns
 * its name (a `# TYPE x histogram` makes `x` own `x_bucket`, `x_sum` and `x_count`), otherwise it
 * starts an untyped family of its own name; samples of one family that are interleaved with
 * others are gathered, and families keep the order of their first line.
 *
 * Never throws. Each line is parsed on its own; a bad line is left out and listed in `invalid`
 * with a {@link InvalidReason} (see types.ts), and never changes how other lines are read,
 * except that a dropped `# TYPE` leaves its samples untyped. Of a repeated series the first
 * sample is kept.
 *
 * Linear in the input: 100,000 sample lines (9 MB) take about 0.4 s on a 2-core VM.
 *
 * @param text the whole exposition.
 * @returns families (with samples in input order) and the dropped lines, in input order.
 */
export function parseExposition(text: string): ParseResult {
  const set = new FamilySet();
  const invalid: InvalidLine[] = [];
  resetLineState();
  const length = text.length;
  let start = length > 0 && text.charCodeAt(0) === 0xfeff ? 1 : 0;
  let line = 0;
  while (start <= length) {
    let newline = text.indexOf('\n', start);
    if (newline === -1) newline = length;
    line++;
    let end = newline;
    if (end > start && text.charCodeAt(end - 1) === CR) end--;

    const i = skipBlanks(text, start, end);
    let reason: InvalidReason | undefined;
    if (i < end) {
      if (text.charCodeAt(i) === HASH) {
        reason = parseCommentLine(text, i + 1, end, set);
      } else {
        const sample = parseSampleLine(text, i, end);
        reason = typeof sample === 'string' ? sample : set.addSample(sample, sampleLabelsKey);
      }
    }
    if (reason !== undefined) invalid.push({ line, reason, text: excerpt(text, start, end) });
    start = newline + 1;
  }
  return { families: set.families(), invalid };
}

// ---------------------------------------------------------------------------------------------
// Normalising a family list built elsewhere

/** Names {@link sampleProblem} found valid, so that one name on 100,000 samples is checked once. */
class NameCache {
  readonly #valid = new Set<string>();
  readonly #check: (name: string) => boolean;

  constructor(check: (name: string) => boolean) {
    this.#check = check;
  }

  ok(name: string): boolean {
    if (this.#valid.has(name)) return true;
    if (!this.#check(name)) return false;
    // Bounded, so hostile input cannot grow it without limit.
    if (this.#valid.size < 10_000) this.#valid.add(name);
    return true;
  }
}

function sampleProblem(sample: unknown, metricNames: NameCache, labelNames: NameCache): InvalidReason | undefined {
  if (typeof sample !== 'object' || sample === null) return 'bad_syntax';
  const { name, labels, value, timestampMs } = sample as Partial<Sample>;
  if (typeof name !== 'string' || !metricNames.ok(name)) return 'bad_metric_name';
  if (!Array.isArray(labels)) return 'bad_syntax';
  // A set only for long label lists: this runs for every sample of every scrape.
  const names = labels.length > 8 ? new Set<string>() : undefined;
  for (let i = 0; i < labels.length; i++) {
    const pair: unknown = labels[i];
    if (!Array.isArray(pair) || pair.length !== 2) return 'bad_syntax';
    const labelName: unknown = pair[0];
    const labelValue: unknown = pair[1];
    if (typeof labelName !== 'string' || !labelNames.ok(labelName)) return 'bad_label_name';
    if (typeof labelValue !== 'string' || labelValue.includes('\0')) return 'bad_syntax';
    if (names === undefined) {
      for (let j = 0; j < i; j++) if (labels[j]![0] === labelName) return 'duplicate_label';
    } else {
      if (names.has(labelName)) return 'duplicate_label';
      names.add(labelName);
    }
  }
  if (typeof value !== 'number') return 'bad_value';
  if (timestampMs !== undefined && !(Number.isSafeInteger(timestampMs) && timestampMs >= 0)) return 'bad_timestamp';
  return undefined;
}

/**
 * Applies the parser's rules to a family list that did not come straight from
 * {@link parseExposition} (a merge, a rename, a hand-built list), so that it serializes to a
 * valid exposition: names and labels valid, samples that fit their family, each series once,
 * no two families owning the same sample name. Both serializers call it; it is exported so
 * callers can count what they would lose.
 *
 * Families stay in order. A family whose name or owned names are taken by an earlier one is left
 * out whole; so is one with a bad name or type. Of the others, bad samples are left out. A help
 * text loses leading blanks and trailing CRs, and is dropped when it contains NUL or is empty.
 * Kept sample objects are reused, not copied. The input is not modified.
 *
 * @returns the clean families and what was left out, in input order. Never throws.
 */
export function normalizeFamilies(families: readonly MetricFamily[]): { families: MetricFamily[]; problems: FamilyProblem[] } {
  const set = new FamilySet();
  const problems: FamilyProblem[] = [];
  const metricNames = new NameCache(isValidMetricName);
  const labelNames = new NameCache(isValidLabelName);
  for (const family of families as readonly unknown[]) {
    const { name, type, help, samples } = (typeof family === 'object' && family !== null ? family : {}) as Partial<MetricFamily>;
    const familyName = String(name);
    if (typeof name !== 'string' || !isValidMetricName(name)) {
      problems.push({ family: familyName, reason: 'bad_metric_name' });
      continue;
    }
    if (typeof type !== 'string' || !TYPES_BY_NAME.has(type) || !Array.isArray(samples)) {
      problems.push({ family: familyName, reason: typeof type === 'string' && TYPES_BY_NAME.has(type) ? 'bad_syntax' : 'bad_type' });
      continue;
    }
    let cleanHelp: string | undefined;
    if (typeof help === 'string') {
      if (help.includes('\0')) problems.push({ family: familyName, reason: 'bad_syntax' });
      else cleanHelp = normalizeHelp(help);
    }
    const entry = set.openFamily(name, type, cleanHelp);
    if (typeof entry === 'string') {
      problems.push({ family: familyName, reason: entry });
      continue;
    }
    for (const sample of samples as unknown[]) {
      const reason = sampleProblem(sample, metricNames, labelNames) ?? set.append(entry, sample as Sample);
      if (reason !== undefined) {
        const sampleName = (sample as Partial<Sample> | null)?.name;
        problems.push({ family: familyName, sample: typeof sampleName === 'string' ? sampleName : String(sampleName), reason });
      }
    }
  }
  return { families: set.families(), problems };
}
