/**
 * The family rules of an exposition, which the scanner (parse.ts), {@link normalizeFamilies}
 * (normalize.ts) and the serializers enforce alike: which sample names a family owns, when two
 * label sets name the same series, which samples fit a family, and {@link FamilySet}, the
 * families under construction.
 */
import { BACKSLASH, CR, QUOTE, isBlank } from './lexical.js';
import { parseGoFloat } from './number.js';
import type { InvalidReason, MetricFamily, MetricType, Sample } from './types.js';

/** The metric types by their name in `# TYPE`. */
export const TYPES_BY_NAME: ReadonlyMap<string, MetricType> = new Map<string, MetricType>([
  ['counter', 'counter'],
  ['gauge', 'gauge'],
  ['histogram', 'histogram'],
  ['summary', 'summary'],
  ['untyped', 'untyped'],
]);

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
export function normalizeHelp(help: string): string | undefined {
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

export interface Entry {
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
export class FamilySet {
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
