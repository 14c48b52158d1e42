/**
 * The exporter's own part of `/metrics`, serialised family by family, each family's bytes kept
 * until its values change; metrics with a `collect` function are read at most once per
 * {@link COLLECTED_MAX_AGE_MS}. The bytes are those the serialisers write for the whole list. See
 * docs/design/scrape-path.md, The own part.
 */
import type { Metric, MetricObjectWithValues, MetricValueWithName, Registry } from 'prom-client';
import {
  normalizeFamilies,
  openMetricsClaims,
  serializeOpenMetricsBuffer,
  serializeOpenMetricsFamily,
  serializeTextBuffer,
  type MetricFamily,
  type MetricType,
  type Sample,
} from '../exposition/index.js';

/** prom-client's gauges named `_total` (a counter's suffix), left out: `sum(nodejs_active_handles)` gives each. */
export const OMITTED_DEFAULT_METRICS: ReadonlySet<string> = new Set([
  'nodejs_active_handles_total',
  'nodejs_active_requests_total',
  'nodejs_active_resources_total',
]);

/** How long a read of a metric with a `collect` function is reused. */
export const COLLECTED_MAX_AGE_MS = 1000;

const FAMILY_TYPES: ReadonlySet<string> = new Set<MetricType>(['counter', 'gauge', 'histogram', 'summary', 'untyped']);

type MetricData = MetricObjectWithValues<MetricValueWithName<string>>;

/** A prom-client metric's type as an exposition family's. */
export function familyType(type: unknown): MetricType {
  const name = String(type);
  return FAMILY_TYPES.has(name) ? (name as MetricType) : 'untyped';
}

/** One prom-client metric as an exposition family. */
export function toFamily(metric: MetricData): MetricFamily {
  const samples: Sample[] = metric.values.map((value) => {
    const labels: Array<[string, string]> = [];
    for (const [name, labelValue] of Object.entries(value.labels)) if (labelValue !== undefined) labels.push([name, String(labelValue)]);
    const sample: Sample = { name: value.metricName ?? metric.name, labels, value: value.value };
    return sample;
  });
  return { name: metric.name, type: familyType(metric.type), help: metric.help, samples };
}

/** A metric's values and labels, flattened: equal fingerprints give the same family. */
function fingerprint(metric: MetricData): unknown[] {
  const out: unknown[] = [metric.type, metric.help, metric.values.length];
  for (const value of metric.values) {
    out.push(value.metricName, value.value);
    const labels = value.labels as Record<string, unknown>;
    for (const name in labels) out.push(name, labels[name]);
    // Ends the value's labels: no label name is a symbol.
    out.push(END);
  }
  return out;
}

const END = Symbol('end of labels');

/** Whether `metric` reads as `previous`, without building its fingerprint. */
function unchanged(previous: readonly unknown[], metric: MetricData): boolean {
  if (previous[0] !== metric.type || previous[1] !== metric.help || previous[2] !== metric.values.length) return false;
  let at = 3;
  for (const value of metric.values) {
    if (previous[at++] !== value.metricName || !Object.is(previous[at++], value.value)) return false;
    const labels = value.labels as Record<string, unknown>;
    for (const name in labels) {
      if (previous[at++] !== name || !Object.is(previous[at++], labels[name])) return false;
    }
    if (previous[at++] !== END) return false;
  }
  return at === previous.length;
}

/**
 * A counter's, gauge's or histogram's series from prom-client's untyped `hashMap`, flattened:
 * equal states mean equal values, without a call of `get()`. Undefined for any other metric.
 */
function seriesState(metric: Metric): unknown[] | undefined {
  const { type, collect, hashMap } = metric as unknown as { type?: unknown; collect?: unknown; hashMap?: unknown };
  if ((type !== 'counter' && type !== 'gauge' && type !== 'histogram') || collect !== undefined) return undefined;
  if (typeof hashMap !== 'object' || hashMap === null) return undefined;
  const state: unknown[] = [];
  for (const key in hashMap) {
    const series = (hashMap as Record<string, { value?: unknown; count?: unknown; sum?: unknown }>)[key]!;
    state.push(series, series.value, series.count, series.sum);
  }
  return state;
}

/** Whether `metric`'s {@link seriesState} is now `state`, compared in place. */
function stateMatches(state: readonly unknown[] | undefined, metric: Metric): boolean {
  if (state === undefined) return false;
  const map = (metric as unknown as { hashMap?: unknown }).hashMap;
  if (typeof map !== 'object' || map === null) return false;
  let i = 0;
  for (const key in map) {
    const series = (map as Record<string, { value?: unknown; count?: unknown; sum?: unknown }>)[key]!;
    if (state[i] !== series || !Object.is(state[i + 1], series.value) || !Object.is(state[i + 2], series.count) || !Object.is(state[i + 3], series.sum)) {
      return false;
    }
    i += 4;
  }
  return i === state.length;
}

/** One family as last read, and its bytes in each format once written. */
interface Entry {
  readonly fingerprint: readonly unknown[];
  readonly family: MetricFamily;
  /** The latest {@link seriesState} that reads as this family. */
  state?: unknown[] | undefined;
  /** Normalised, on first use. */
  clean?: MetricFamily | undefined;
  text?: Buffer;
  /** With what it asked of the exposition's claims. */
  openMetrics?: { bytes: Buffer; claimed?: { names: string[]; taken: boolean } };
}

/** The own families of one collection, in registration order. */
export interface OwnSnapshot {
  readonly families: readonly MetricFamily[];
  readonly entries: readonly Entry[];
  /** No two families claim one name. */
  readonly apart: boolean;
  readonly types: ReadonlyMap<string, MetricType>;
}

/** Collects and serialises a registry's metrics; the family objects are shared between collections: never change them. */
export class OwnExposition {
  readonly #registry: Registry;
  readonly #now: () => number;
  #entries = new Map<string, Entry>();
  /** When each metric with a `collect` function was last read. */
  readonly #collectedAt = new Map<string, number>();
  #last: OwnSnapshot | undefined;
  #shape: { key: string; apart: boolean; types: ReadonlyMap<string, MetricType> } = { key: '', apart: true, types: new Map() };

  /** @param now milliseconds. */
  constructor(registry: Registry, now: () => number = () => performance.now()) {
    this.#registry = registry;
    this.#now = now;
  }

  /** Reads the registry, each unchanged family's entry reused; the same snapshot when nothing changed. @throws what prom-client throws. */
  async collect(): Promise<OwnSnapshot> {
    const now = this.#now();
    const names: string[] = [];
    const reads: Array<Entry | MetricData | undefined> = [];
    const states: Array<unknown[] | undefined> = [];
    const gets: Array<Promise<MetricData>> = [];
    const at: number[] = [];
    // Typed as plain objects; they are the metrics themselves.
    for (const metric of this.#registry.getMetricsAsArray() as unknown as Metric[]) {
      const name = (metric as unknown as MetricData).name;
      if (OMITTED_DEFAULT_METRICS.has(name)) continue;
      const kept = this.#entries.get(name);
      let state: unknown[] | undefined;
      let read: Entry | undefined;
      if (typeof (metric as { collect?: unknown }).collect === 'function') {
        const collectedAt = this.#collectedAt.get(name);
        if (collectedAt !== undefined && now - collectedAt < COLLECTED_MAX_AGE_MS) read = kept;
        else this.#collectedAt.set(name, now);
      } else if (kept !== undefined && stateMatches(kept.state, metric)) {
        read = kept;
      } else {
        // Before get(), which reads the series in this same turn.
        state = seriesState(metric);
      }
      if (read === undefined) {
        at.push(reads.length);
        gets.push(metric.get());
      }
      names.push(name);
      reads.push(read);
      states.push(state);
    }
    if (gets.length > 0) (await Promise.all(gets)).forEach((data, i) => (reads[at[i]!] = data));
    const settled = reads as Array<Entry | MetricData>;
    const last = this.#last;
    let same = last !== undefined && last.entries.length === settled.length;
    const entries = settled.map((read, i): Entry => {
      let entry: Entry;
      if ('fingerprint' in read) entry = read;
      else {
        const cached = this.#entries.get(names[i]!);
        entry = cached !== undefined && unchanged(cached.fingerprint, read) ? cached : { fingerprint: fingerprint(read), family: toFamily(read) };
      }
      if (states[i] !== undefined) entry.state = states[i];
      same &&= entry === last!.entries[i];
      return entry;
    });
    if (same) return last!;
    this.#entries = new Map(entries.map((entry, i) => [names[i]!, entry]));
    const families = entries.map((entry) => entry.family);
    const key = families.map((family) => `${family.name} ${family.type}`).join('\n');
    if (key !== this.#shape.key) {
      // Apart when normalising the list without samples keeps every family.
      const shapes = families.map(({ name, type }) => ({ name, type, samples: [] }));
      const apart = normalizeFamilies(shapes).families.length === shapes.length && new Set(families.map((family) => family.name)).size === families.length;
      this.#shape = { key, apart, types: new Map(families.map((family) => [family.name, family.type])) };
    }
    return (this.#last = { families, entries, apart: this.#shape.apart, types: this.#shape.types });
  }

  /** As serializeTextBuffer writes the families. Never throws. */
  text(snapshot: OwnSnapshot): Buffer {
    if (!snapshot.apart) return serializeTextBuffer(snapshot.families);
    return Buffer.concat(
      snapshot.entries.map((entry) => {
        if (entry.text !== undefined) return entry.text;
        const clean = cleanFamily(entry);
        return (entry.text = clean === undefined ? Buffer.alloc(0) : serializeTextBuffer([clean], { normalized: true }));
      }),
    );
  }

  /** Without `# EOF`, as serializeOpenMetricsBuffer writes the families. Never throws. */
  openMetrics(snapshot: OwnSnapshot): Buffer {
    if (!snapshot.apart) return serializeOpenMetricsBuffer(snapshot.families, { eof: false });
    const claim = openMetricsClaims(snapshot.types);
    return Buffer.concat(
      snapshot.entries.map((entry) => {
        const kept = entry.openMetrics;
        if (kept !== undefined) {
          // The same answer as last time means the same bytes.
          if (kept.claimed === undefined) return kept.bytes;
          const taken = claim(kept.claimed.names);
          if (taken === kept.claimed.taken) return kept.bytes;
          return (entry.openMetrics = writeOpenMetrics(entry, () => taken)).bytes;
        }
        return (entry.openMetrics = writeOpenMetrics(entry, claim)).bytes;
      }),
    );
  }
}

function cleanFamily(entry: Entry): MetricFamily | undefined {
  if (!('clean' in entry)) entry.clean = normalizeFamilies([entry.family]).families[0];
  return entry.clean;
}

function writeOpenMetrics(entry: Entry, claim: (names: string[]) => boolean): NonNullable<Entry['openMetrics']> {
  const clean = cleanFamily(entry);
  return clean === undefined ? { bytes: Buffer.alloc(0) } : serializeOpenMetricsFamily(clean, claim);
}
