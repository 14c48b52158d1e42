/**
 * Combining the upstream's families (E7, "E7 notes") with
 * the exporter's own, so one `/metrics` serves both without two families claiming a name.
 */
import { InvalidArgumentError } from '../errors.js';
import { familySampleNames } from './family.js';
import { isValidMetricName } from './lexical.js';
import type { MetricFamily } from './types.js';

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
  const names = familySampleNames(family.name, family.type);
  for (const sample of family.samples) names.push(sample.name);
  if (family.type === 'counter' && family.name.endsWith('_total') && family.name.length > '_total'.length) {
    const base = family.name.slice(0, -'_total'.length);
    names.push(base, `${base}_created`);
  }
  if (family.type === 'histogram' || family.type === 'summary') names.push(`${family.name}_created`);
  return names;
}

/**
 * Puts our own families first and the upstream's after them, dropping every upstream family
 * that would collide with one of ours: one for which any name it reserves (see above: its name,
 * the names its type owns, its sample names, and the names OpenMetrics derives from it) equals a
 * name ours reserve (e.g. our histogram `x` reserves `x`, `x_bucket`, `x_sum`, `x_count`,
 * `x_created`; our counter `y_total` reserves `y_total`, `y`, `y_created`). A colliding family
 * is dropped whole, never merged, so a scrape never mixes our series with the upstream's under
 * one name; and since neither side can claim a name the other reserves, the two lists can be
 * serialised apart and their outputs concatenated. Collisions among upstream families, or among
 * ours, are left to the serializers' normalisation.
 *
 * @returns the combined list (same family objects) and the names of the dropped upstream
 *   families, in upstream order. Never throws.
 */
export function mergeFamilies(own: readonly MetricFamily[], upstream: readonly MetricFamily[]): { families: MetricFamily[]; dropped: string[] } {
  const ours = new Set<string>();
  for (const family of own) for (const name of reservedNames(family)) ours.add(name);
  const families = [...own];
  const dropped: string[] = [];
  for (const family of upstream) {
    if (reservedNames(family).some((name) => ours.has(name))) dropped.push(family.name);
    else families.push(family);
  }
  return { families, dropped };
}
