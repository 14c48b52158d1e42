/**
 * Combining the upstream's families (E7, "E7 notes") with
 * the exporter's own, so one `/metrics` serves both without two families claiming a name.
 */
import { InvalidArgumentError } from '../errors.js';
import { familySampleNames } from './family.js';
import { isValidMetricName } from './lexical.js';
import type { MetricFamily, MetricType } from './types.js';

/**
 * Renames families and their samples to `prefix + name` (labels, values and help unchanged), so
 * upstream metrics sit in the exporter's namespace: `prefixFamilies(f, 'analytics_')` turns
 * `userlogin_event_count` into `analytics_userlogin_event_count`. The prefix includes its own
 * separator. Histogram and summary structure survives because every owned name gets the same
 * prefix. The input is not modified.
 *
 * @param prefix must match `[a-zA-Z_:][a-zA-Z0-9_:]*` (so the result is a valid name).
 * @returns new family and sample objects.
 * @throws InvalidArgumentError (`ERR_INVALID_ARGUMENT`) when `prefix` is empty or not a valid
 *   metric-name start.
 */
export function prefixFamilies(families: readonly MetricFamily[], prefix: string): MetricFamily[] {
  if (typeof prefix !== 'string' || !isValidMetricName(prefix)) {
    throw new InvalidArgumentError(`metric name prefix ${JSON.stringify(prefix)} does not match [a-zA-Z_:][a-zA-Z0-9_:]*`);
  }
  return families.map((family) => ({
    ...family,
    name: prefix + family.name,
    samples: family.samples.map((sample) => ({ ...sample, name: prefix + sample.name })),
  }));
}

/**
 * Every name a family of ours reserves in either output format: its own name, the names its
 * type owns (`x_bucket`, `x_sum`, `x_count` of histogram `x`), its sample names, and the names
 * OpenMetrics derives (`y` and `y_created` of counter `y_total`; `x_created` of histogram or
 * summary `x`).
 */
function reservedNames(family: MetricFamily): string[] {
  return reservedNamesOf(
    family.name,
    family.type,
    family.samples.map((sample) => sample.name),
  );
}

/**
 * The names a family reserves (see {@link mergeFamilies}), from its name, its type and the names
 * of its samples (repeats allowed), for a caller that keeps those instead of the samples.
 */
export function reservedNamesOf(name: string, type: MetricType, sampleNames: Iterable<string>): string[] {
  const names = familySampleNames(name, type);
  for (const sampleName of sampleNames) names.push(sampleName);
  if (type === 'counter' && name.endsWith('_total') && name.length > '_total'.length) {
    const base = name.slice(0, -'_total'.length);
    names.push(base, `${base}_created`);
  }
  if (type === 'histogram' || type === 'summary') names.push(`${name}_created`);
  return names;
}

/**
 * Whether Prometheus writes series of this name itself, so that an upstream's sample of it
 * would pass for Prometheus's own once scraped: `up` and `scrape_*` (the scrape loop's series per
 * target) and `ALERTS*` (`ALERTS`, `ALERTS_FOR_STATE`: the rule evaluator's). An upstream `up 0`
 * served as `up{source="default"} 0` reads as a failed target and trips `up == 0` alerts. Case
 * matters, as in every metric name: `alerts_event_count` is not reserved. Never throws.
 */
export function isPrometheusReservedName(name: string): boolean {
  return name === 'up' || name.startsWith('scrape_') || name.startsWith('ALERTS');
}

/**
 * Whether an upstream family that reserves `names` (see {@link reservedNamesOf}) must be dropped:
 * one of them is reserved by our families (`ours`, from {@link reservedNameSet}) or by Prometheus
 * ({@link isPrometheusReservedName}). Never throws.
 */
export function collidesWithReserved(names: readonly string[], ours: ReadonlySet<string>): boolean {
  return names.some((name) => ours.has(name) || isPrometheusReservedName(name));
}

/**
 * Puts our own families first and the upstream's after them, dropping every upstream family
 * that would collide with one of ours: one for which any name it reserves (see above: its name,
 * the names its type owns, its sample names, and the names OpenMetrics derives from it) equals a
 * name ours reserve (e.g. our histogram `x` reserves `x`, `x_bucket`, `x_sum`, `x_count`,
 * `x_created`; our counter `y_total` reserves `y_total`, `y`, `y_created`), or is one Prometheus
 * writes itself ({@link isPrometheusReservedName}: `up`, `scrape_*`, `ALERTS*`). A colliding family
 * is dropped whole, never merged, so a scrape never mixes our series with the upstream's under
 * one name; and since neither side can claim a name the other reserves, the two lists can be
 * serialised apart and their outputs concatenated. Collisions among upstream families, or among
 * ours, are left to the serializers' normalisation.
 *
 * @returns the combined list (same family objects) and the names of the dropped upstream
 *   families, in upstream order. Never throws.
 */
export function mergeFamilies(own: readonly MetricFamily[], upstream: readonly MetricFamily[]): { families: MetricFamily[]; dropped: string[] } {
  const ours = reservedNameSet(own);
  const families = [...own];
  const dropped: string[] = [];
  for (const family of upstream) {
    if (collidesWithReserved(reservedNames(family), ours)) dropped.push(family.name);
    else families.push(family);
  }
  return { families, dropped };
}

/**
 * Every name `families` reserve (see {@link mergeFamilies}): an upstream family is dropped when
 * {@link reservedNamesOf} it has one of them. Never throws.
 */
export function reservedNameSet(families: readonly MetricFamily[]): Set<string> {
  const names = new Set<string>();
  for (const family of families) for (const name of reservedNames(family)) names.add(name);
  return names;
}

/**
 * Adds a target's labels to every sample, first, the way Prometheus attaches target labels with
 * `honor_labels: false`: a sample label that has the name of a target label is kept as
 * `exported_<name>` (prefixed again while that name is taken too). `addTargetLabels(f,
 * [['source', 'prod']])` turns `x{source="web"} 1` into `x{source="prod",exported_source="web"} 1`.
 * The input is not modified; with no target labels it is returned as is.
 *
 * @param targetLabels label pairs with valid, distinct names (not `le` or `quantile`, which
 *   histograms and summaries own).
 * @returns new family and sample objects (the same list when `targetLabels` is empty). Never throws.
 */
export function addTargetLabels(families: readonly MetricFamily[], targetLabels: ReadonlyArray<readonly [string, string]>): readonly MetricFamily[] {
  if (targetLabels.length === 0) return families;
  const rename = targetLabeller(targetLabels);
  return families.map((family) => ({ ...family, samples: family.samples.map((sample) => ({ ...sample, labels: rename(sample.labels) })) }));
}

/**
 * {@link addTargetLabels} and {@link prefixFamilies} of one family that its caller owns (a
 * parser's result), done in place: no second sample object per sample, which at 100,000 samples
 * is several MB more for the collector. Same rules and validity as those two.
 *
 * @param prefix as in prefixFamilies, or undefined for none.
 * @returns `family`, renamed and labelled.
 * @throws InvalidArgumentError (`ERR_INVALID_ARGUMENT`) when `prefix` is not a valid metric-name start.
 */
export function relabelInPlace(family: MetricFamily, prefix: string | undefined, targetLabels: ReadonlyArray<readonly [string, string]>): MetricFamily {
  if (prefix !== undefined) {
    if (typeof prefix !== 'string' || !isValidMetricName(prefix)) {
      throw new InvalidArgumentError(`metric name prefix ${JSON.stringify(prefix)} does not match [a-zA-Z_:][a-zA-Z0-9_:]*`);
    }
    family.name = prefix + family.name;
  }
  const rename = targetLabels.length === 0 ? undefined : targetLabeller(targetLabels);
  for (const sample of family.samples) {
    if (prefix !== undefined) sample.name = prefix + sample.name;
    if (rename !== undefined) sample.labels = rename(sample.labels);
  }
  return family;
}

/** A sample's labels with the target's first and its own clashing ones renamed `exported_<name>` (see addTargetLabels). */
function targetLabeller(targetLabels: ReadonlyArray<readonly [string, string]>): (labels: ReadonlyArray<[string, string]>) => Array<[string, string]> {
  const targetNames = new Set(targetLabels.map(([name]) => name));
  // Label pairs are never mutated once made (serializers sort arrays, not pairs), so every sample
  // shares the target pairs and keeps its own pairs that need no renaming: at 100,000 upstream
  // samples a copy of every pair would hold tens of MiB more for as long as the read is cached.
  const target = targetLabels.map(([name, value]): [string, string] => [name, value]);
  return (labels) => {
    const out = [...target];
    for (const pair of labels) {
      const name = pair[0];
      let exported = name;
      while (targetNames.has(exported) || (exported !== name && labels.some(([other]) => other === exported))) exported = `exported_${exported}`;
      out.push(exported === name ? pair : [exported, pair[1]]);
    }
    return out;
  };
}

/** One source's families, for {@link mergeSources}. */
export interface SourceFamilies {
  source: string;
  families: readonly MetricFamily[];
}

/**
 * Joins several sources' families (each already labelled apart, e.g. by `source`) into one list
 * with one family per name, so one exposition carries one `# HELP`/`# TYPE` per family: samples
 * of a family that several sources send are appended in source order; the help text is the
 * first source's. A conflict is resolved as {@link mergeFamilies} resolves one with our own
 * families, the earlier claimant keeping the name: a later source's family is dropped whole
 * when its type differs from the kept family of that name, or when a name it reserves is
 * reserved by a kept family of another name (untyped `x_bucket` after histogram `x`).
 *
 * @returns the merged families (new family objects, the same sample objects), in order of first
 *   appearance, and the dropped families by source, in input order. Never throws.
 */
export function mergeSources(parts: readonly SourceFamilies[]): { families: MetricFamily[]; dropped: Array<{ source: string; family: string }> } {
  const byName = new Map<string, MetricFamily>();
  /** Reserved name → the kept family that reserves it. */
  const owner = new Map<string, string>();
  const dropped: Array<{ source: string; family: string }> = [];
  for (const { source, families } of parts) {
    for (const family of families) {
      const kept = byName.get(family.name);
      if (kept !== undefined) {
        if (kept.type === family.type) kept.samples.push(...family.samples);
        else dropped.push({ source, family: family.name });
        continue;
      }
      const names = reservedNames(family);
      if (names.some((name) => (owner.get(name) ?? family.name) !== family.name)) {
        dropped.push({ source, family: family.name });
        continue;
      }
      for (const name of names) owner.set(name, family.name);
      byName.set(family.name, { ...family, samples: [...family.samples] });
    }
  }
  return { families: [...byName.values()], dropped };
}
