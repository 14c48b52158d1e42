/** The parser's rules over a family list built elsewhere, so that it serializes to a valid exposition. */
import { FamilySet, TYPES_BY_NAME, normalizeHelp } from './family.js';
import { isValidLabelName, isValidMetricName } from './lexical.js';
import type { FamilyProblem, InvalidReason, MetricFamily, Sample } from './types.js';

/** Names found valid, so one name on 100,000 samples is checked once. */
class NameCache {
  readonly #valid = new Set<string>();
  readonly #check: (name: string) => boolean;

  constructor(check: (name: string) => boolean) {
    this.#check = check;
  }

  ok(name: string): boolean {
    if (this.#valid.has(name)) return true;
    if (!this.#check(name)) return false;
    if (this.#valid.size < 10_000) this.#valid.add(name);
    return true;
  }
}

function sampleProblem(sample: unknown, metricNames: NameCache, labelNames: NameCache): InvalidReason | undefined {
  if (typeof sample !== 'object' || sample === null) return 'bad_syntax';
  const { name, labels, value, timestampMs } = sample as Partial<Sample>;
  if (typeof name !== 'string' || !metricNames.ok(name)) return 'bad_metric_name';
  if (!Array.isArray(labels)) return 'bad_syntax';
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
 * The parser's rules over a list not from {@link parseExposition}: a family with a bad or taken name is left out
 * whole, a bad sample alone; samples reused, input unmodified. Returns what was left out too. Never throws.
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
