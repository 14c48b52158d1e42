/**
 * The family rules the scanner, {@link normalizeFamilies} and the serializers enforce alike: which
 * sample names a family owns, when two label sets are one series, which samples fit a family.
 */
import { BACKSLASH, CR, QUOTE, isBlank } from './lexical.js';
import { parseGoFloat } from './number.js';
import type { InvalidReason, MetricFamily, MetricType, Sample } from './types.js';

export const TYPES_BY_NAME: ReadonlyMap<string, MetricType> = new Map<string, MetricType>([
  ['counter', 'counter'],
  ['gauge', 'gauge'],
  ['histogram', 'histogram'],
  ['summary', 'summary'],
  ['untyped', 'untyped'],
]);

/** The sample names a family owns; no two families of one exposition may share one. */
export function familySampleNames(name: string, type: MetricType): string[] {
  if (type === 'histogram') return [name, `${name}_bucket`, `${name}_sum`, `${name}_count`];
  if (type === 'summary') return [name, `${name}_sum`, `${name}_count`];
  return [name];
}

/**
 * Equal for two label sets exactly when they are one series (order and empty values ignored): the
 * set as the text format writes it, names in order, `a="1",b="x\\"y"`. `skip` leaves out `le` or
 * `quantile`, to group a histogram's or summary's samples by point.
 */
export function labelSetKey(labels: ReadonlyArray<readonly [string, string]>, skip?: string): string {
  // Hot path: names usually come sorted, so only an unsorted list pays for an array and a sort.
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

/** No leading blanks, no trailing CR (neither survives a round trip); undefined when empty. */
export function normalizeHelp(help: string): string | undefined {
  let start = 0;
  let end = help.length;
  while (start < end && isBlank(help.charCodeAt(start))) start++;
  while (end > start && help.charCodeAt(end - 1) === CR) end--;
  return start === end ? undefined : help.slice(start, end);
}

/** The family owning sample name `name`, found by suffix (storing every owned name costs 4 entries per histogram). */
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
  /** Series keys kept so far, prefixed by the sample name's suffix. */
  series: Set<string> | undefined;
}

/** Families under construction: each sample name in one family, metadata once and first, a series once. */
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

  /** Consecutive lines mostly share a name: comparing beats hashing. */
  #last: Entry | undefined;
  #lastName = '';

  /** To the family owning its name, or a new untyped one. `labelsKey`: its {@link labelSetKey}, if known. */
  addSample(sample: Sample, labelsKey?: string): InvalidReason | undefined {
    let owner = this.#last;
    if (owner === undefined || sample.name !== this.#lastName) {
      owner = this.#owner(sample.name) ?? this.#create(sample.name, 'untyped', false, undefined);
      this.#last = owner;
      this.#lastName = sample.name;
    }
    return this.append(owner, sample, labelsKey);
  }

  /** A whole family at once, for {@link normalizeFamilies}. */
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
