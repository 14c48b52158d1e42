/**
 * Combining the upstream's families (E7) with the exporter's own and with each other, so one
 * `/metrics` serves all without two families claiming a name. Ours win, the earlier source wins;
 * a loser is dropped whole. Design: docs/design/exposition-merge.md ("Merging").
 */
import { InvalidArgumentError } from '../errors.js';
import { familySampleNames } from './family.js';
import { isValidMetricName } from './lexical.js';
import type { MetricFamily, MetricType } from './types.js';

/**
 * Renames families and samples to `prefix + name`; the input is not modified.
 * @throws InvalidArgumentError (`ERR_INVALID_ARGUMENT`) for a prefix not `[a-zA-Z_:][a-zA-Z0-9_:]*`.
 * @internal the product renames in place ({@link relabelInPlace}); the tests hold it to this.
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

function reservedNames(family: MetricFamily): string[] {
  return reservedNamesOf(
    family.name,
    family.type,
    family.samples.map((sample) => sample.name),
  );
}

/** The names a family reserves in either format: its own, its type's, its samples', OpenMetrics' derived ones. */
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

/** Whether Prometheus writes this name itself (`up`, `scrape_*`, `ALERTS*`; case matters). Never throws. */
function isPrometheusReservedName(name: string): boolean {
  return name === 'up' || name.startsWith('scrape_') || name.startsWith('ALERTS');
}

/** Whether an upstream family reserving `names` must be dropped: ours or Prometheus's take one. Never throws. */
export function collidesWithReserved(names: readonly string[], ours: ReadonlySet<string>): boolean {
  return names.some((name) => ours.has(name) || isPrometheusReservedName(name));
}

/**
 * Ours first, then the upstream families {@link collidesWithReserved} lets through (so the two lists
 * serialise apart); returns the same objects and the dropped names. Never throws.
 * @internal the product applies the rule with {@link reservedNameSet}; the tests hold it to this.
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

/** Every name `families` reserve ({@link reservedNamesOf}). Never throws. */
export function reservedNameSet(families: readonly MetricFamily[]): Set<string> {
  const names = new Set<string>();
  for (const family of families) for (const name of reservedNames(family)) names.add(name);
  return names;
}

/**
 * Adds `targetLabels` (distinct valid names, not `le`/`quantile`) first to every sample, as Prometheus
 * with `honor_labels: false`: `x{source="web"}` becomes `x{source="prod",exported_source="web"}`. Never throws.
 * @internal the product labels in place ({@link relabelInPlace}); the tests hold it to this.
 */
export function addTargetLabels(families: readonly MetricFamily[], targetLabels: ReadonlyArray<readonly [string, string]>): readonly MetricFamily[] {
  if (targetLabels.length === 0) return families;
  const rename = targetLabeller(targetLabels);
  return families.map((family) => ({ ...family, samples: family.samples.map((sample) => ({ ...sample, labels: rename(sample.labels) })) }));
}

/** {@link prefixFamilies} and {@link addTargetLabels} in place, on a family the caller owns; throws as the former. */
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

function targetLabeller(targetLabels: ReadonlyArray<readonly [string, string]>): (labels: ReadonlyArray<[string, string]>) => Array<[string, string]> {
  const targetNames = new Set(targetLabels.map(([name]) => name));
  // Pairs are never mutated once made, so samples share them: copies would cost tens of MiB.
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

export interface SourceFamilies {
  source: string;
  families: readonly MetricFamily[];
}

/**
 * One family per name from sources' families (labelled apart): samples in source order, the first help; a
 * later family whose type differs or whose reserved name is kept elsewhere is dropped whole. Never throws.
 * @internal the product merges serialised parts (mergeParts, part.ts); the tests hold it to this.
 */
export function mergeSources(parts: readonly SourceFamilies[]): { families: MetricFamily[]; dropped: Array<{ source: string; family: string }> } {
  const byName = new Map<string, MetricFamily>();
  /** Reserved name → kept family. */
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
