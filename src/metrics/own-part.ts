/**
 * The exporter's own part of `/metrics`, serialised family by family: each family's bytes are
 * kept until its values change, so a scrape re-serialises only what changed since the last one
 * (the process metrics, mostly) rather than every series of every source. With 16 sources the
 * own part has about 780 series, nearly all per-source counters and histograms that stay put
 * between scrapes; serialising them all on every scrape was half of a cached scrape's CPU.
 *
 * Metrics that compute their values when read (a `collect` function: prom-client's process and
 * Node.js metrics, which read /proc, the event-loop delay histogram and V8's heap) are read at most
 * once per {@link COLLECTED_MAX_AGE_MS}: under a burst of scrapes they were the larger half of what
 * remained, and a scraper polls every few seconds at most, so it never sees a value older than
 * the previous scrape's.
 *
 * The bytes are those the serializers write for the whole list at once (src/exposition/text.ts,
 * openmetrics.ts): families normalise apart whenever no two of them claim one name, which is
 * checked once per list of names and types; otherwise (never for prom-client's metrics, whose
 * names it validates) the whole list is serialised as before.
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

/**
 * prom-client's three gauges named `_total` (a suffix promtool's lint reserves for counters). Each
 * is the sum of the per-type gauge of the name without it (`nodejs_active_handles{type}`), which is
 * served, so they are left out rather than renamed onto that family: `sum(nodejs_active_handles)`.
 */
export const OMITTED_DEFAULT_METRICS: ReadonlySet<string> = new Set([
  'nodejs_active_handles_total',
  'nodejs_active_requests_total',
  'nodejs_active_resources_total',
]);

/** How long a read of a metric with a `collect` function is reused, in milliseconds. */
export const COLLECTED_MAX_AGE_MS = 1000;

const FAMILY_TYPES: ReadonlySet<string> = new Set<MetricType>(['counter', 'gauge', 'histogram', 'summary', 'untyped']);

type MetricData = MetricObjectWithValues<MetricValueWithName<string>>;

/** A prom-client metric's type as an exposition family's. */
export function familyType(type: unknown): MetricType {
  const name = String(type);
  return FAMILY_TYPES.has(name) ? (name as MetricType) : 'untyped';
}

/** One prom-client metric as an exposition family: samples named by `metricName` (histogram and summary parts), label values as text. */
export function toFamily(metric: MetricData): MetricFamily {
  const samples: Sample[] = metric.values.map((value) => {
    const labels: Array<[string, string]> = [];
    for (const [name, labelValue] of Object.entries(value.labels)) if (labelValue !== undefined) labels.push([name, String(labelValue)]);
    const sample: Sample = { name: value.metricName ?? metric.name, labels, value: value.value };
    return sample;
  });
  return { name: metric.name, type: familyType(metric.type), help: metric.help, samples };
}

/**
 * What a metric's family is made of, flattened: per value its sample name, value and label pairs
 * as prom-client holds them. Two reads with equal fingerprints give the same family.
 */
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

/** Whether `metric` reads as `previous` (a {@link fingerprint}), without building the new fingerprint. */
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
 * Where a counter, gauge or histogram without a `collect` function keeps its series: prom-client's
 * `hashMap` (not part of its typed API), one object per series whose `value` (counter, gauge) or
 * `count` and `sum` (histogram: every observation adds to both) change with it. The series
 * objects and those numbers, flattened: equal states mean equal values, with no call of `get()`,
 * which for a histogram builds an object per bucket (208 for 16 sources' request durations).
 * Undefined when the metric keeps its values some other way (a summary, whose quantiles also move
 * with time, or another version of prom-client): then it is read with `get()`.
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

/** Whether `metric`'s {@link seriesState} is now `state`, compared in place (no state is built). */
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
  /** A {@link seriesState} that reads as this family (the latest seen). */
  state?: unknown[] | undefined;
  /** The family as the serializers keep it (see normalizeFamilies), made on first use. */
  clean?: MetricFamily | undefined;
  text?: Buffer;
  /** Its OpenMetrics, and what it asked of the exposition's claims (see serializeOpenMetricsFamily). */
  openMetrics?: { bytes: Buffer; claimed?: { names: string[]; taken: boolean } };
}

/** The own families of one collection, in registration order. */
export interface OwnSnapshot {
  readonly families: readonly MetricFamily[];
  readonly entries: readonly Entry[];
  /** Whether the families may be serialised apart (no two claim one name). */
  readonly apart: boolean;
  /** Every family's type by name, for OpenMetrics' claims. */
  readonly types: ReadonlyMap<string, MetricType>;
}

/**
 * Collects a registry's metrics and serialises them, keeping each family's bytes until its
 * values change. The family objects it returns are shared between collections: never change them.
 */
export class OwnExposition {
  readonly #registry: Registry;
  readonly #now: () => number;
  #entries = new Map<string, Entry>();
  /** When each metric with a `collect` function was last read (performance.now() milliseconds). */
  readonly #collectedAt = new Map<string, number>();
  #last: OwnSnapshot | undefined;
  /** The names and types the last collection had, and what follows from them. */
  #shape: { key: string; apart: boolean; types: ReadonlyMap<string, MetricType> } = { key: '', apart: true, types: new Map() };

  /** @param now the clock of {@link COLLECTED_MAX_AGE_MS}, in milliseconds (tests pass their own). */
  constructor(registry: Registry, now: () => number = () => performance.now()) {
    this.#registry = registry;
    this.#now = now;
  }

  /**
   * Reads every metric of the registry now, but those with a `collect` function read less than
   * {@link COLLECTED_MAX_AGE_MS} ago (such as the process metrics), reusing the entry of each
   * family whose values did not change since the last collection.
   *
   * @throws what prom-client's collection throws.
   */
  async collect(): Promise<OwnSnapshot> {
    const now = this.#now();
    const names: string[] = [];
    const reads: Array<Entry | MetricData | undefined> = [];
    const states: Array<unknown[] | undefined> = [];
    /** Metrics read with get(), by their place in `reads`. */
    const gets: Array<Promise<MetricData>> = [];
    const at: number[] = [];
    // getMetricsAsArray is typed as returning plain objects; it returns the metrics themselves.
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
        // Taken before get(), which reads the series in this same turn (there is no collect function to await).
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
    // Nothing changed: the last snapshot again, whose bytes its callers may have kept.
    if (same) return last!;
    this.#entries = new Map(entries.map((entry, i) => [names[i]!, entry]));
    const families = entries.map((entry) => entry.family);
    const key = families.map((family) => `${family.name} ${family.type}`).join('\n');
    if (key !== this.#shape.key) {
      // Families normalise apart when each one's name and owned names are free of the others': then
      // normalising the list keeps every family, as it does for the families without their samples.
      const shapes = families.map(({ name, type }) => ({ name, type, samples: [] }));
      const apart = normalizeFamilies(shapes).families.length === shapes.length && new Set(families.map((family) => family.name)).size === families.length;
      this.#shape = { key, apart, types: new Map(families.map((family) => [family.name, family.type])) };
    }
    return (this.#last = { families, entries, apart: this.#shape.apart, types: this.#shape.types });
  }

  /** The snapshot in Prometheus text 0.0.4, as serializeTextBuffer writes its families. Never throws. */
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

  /** The snapshot in OpenMetrics 1.0.0 without `# EOF`, as serializeOpenMetricsBuffer writes its families. Never throws. */
  openMetrics(snapshot: OwnSnapshot): Buffer {
    if (!snapshot.apart) return serializeOpenMetricsBuffer(snapshot.families, { eof: false });
    const claim = openMetricsClaims(snapshot.types);
    return Buffer.concat(
      snapshot.entries.map((entry) => {
        const kept = entry.openMetrics;
        if (kept !== undefined) {
          // A family asks the claims at most once, for the same names while its values stay; the
          // same answer as last time means the same bytes.
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
