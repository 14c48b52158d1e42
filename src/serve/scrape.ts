/**
 * Reads every source's E7 text on scrape, concurrently: per source a single flight, a cache of
 * METRICS_CACHE_TTL and the scrape's own deadline, so /metrics answers in time with
 * `upstream_up{source} 0` for a source that failed. Reads are kept as serialised bytes, labelled
 * `source` and the source's labels, and merged into one family per name; the merge is kept until
 * a read changes. See docs/design/scrape-path.md.
 */
import { AbortedError, InvalidArgumentError, UpstreamLimitError, UpstreamTimeoutError, redactSecrets, type UpstreamLimitName } from '../errors.js';
import { failureReason } from '../failures.js';
import type { Logger } from '../log.js';
import {
  ExpositionLimitScanner,
  PartWriter,
  describeLimit,
  collidesWithReserved,
  isValidLabelName,
  mergeParts,
  parseExposition,
  relabelInPlace,
  reservedNameSet,
  reservedNamesOf,
  targetLabels,
  type ExpositionLimits,
  type IndexedPart,
  type TargetLabels,
  type MetricFamily,
  type MetricType,
} from '../exposition/index.js';
import type { AnalyticsClient } from '../upstream/analytics.js';
import type { ExporterMetrics } from '../metrics/registry.js';
import { formatDuration } from '../time.js';

/** The scrape timeout less what is kept for the answer: 20%, at most 1 s. */
export function scrapeBudgetMs(scrapeTimeoutMs: number): number {
  return Math.max(1, scrapeTimeoutMs - Math.min(1000, scrapeTimeoutMs * 0.2));
}

/** Upper bound on a scrape timeout taken from the request header, in seconds. */
const MAX_SCRAPE_TIMEOUT_SECONDS = 300;

/** `X-Prometheus-Scrape-Timeout-Seconds` in milliseconds, bounded; `fallbackMs` when absent or not positive. */
export function scrapeTimeoutFromHeader(value: string | string[] | undefined, fallbackMs: number): number {
  const text = Array.isArray(value) ? value[0] : value;
  const seconds = text === undefined ? NaN : Number(text);
  // A client sets it: bounded, so a huge value cannot overflow a timer.
  return Number.isFinite(seconds) && seconds > 0 ? Math.min(seconds, MAX_SCRAPE_TIMEOUT_SECONDS) * 1000 : fallbackMs;
}

/** The upstream's part of a `/metrics` body, in both formats. */
export interface UpstreamPart {
  text: Buffer;
  /** Without `# EOF`: the body ends with it. */
  openMetrics: Buffer;
  samples: number;
}

/** A failed or timed-out read's part. */
const EMPTY_UPSTREAM_PART: UpstreamPart = Object.freeze({ text: Buffer.alloc(0), openMetrics: Buffer.alloc(0), samples: 0 });

/** One source's read, kept for METRICS_CACHE_TTL. */
interface Snapshot {
  /** Prefixed, labelled, without the families that collide with ours. */
  part: IndexedPart;
  samples: number;
  /** Epoch milliseconds. */
  fetchedAt: number;
}

/** One source to read, with its own client. */
export interface UpstreamSource {
  name: string;
  labels: Readonly<Record<string, string>>;
  client: AnalyticsClient;
  /** Absent: no limit. */
  limits?: ExpositionLimits;
}

const LIMIT_SETTINGS: Readonly<Record<UpstreamLimitName, string>> = {
  sample_limit: 'UPSTREAM_SAMPLE_LIMIT',
  label_limit: 'UPSTREAM_LABEL_LIMIT',
  label_value_length_limit: 'UPSTREAM_LABEL_VALUE_LENGTH_LIMIT',
};

export interface E7ScraperOptions {
  /** At least one, names unique, in serving order. */
  sources: readonly UpstreamSource[];
  metrics: ExporterMetrics;
  /** E7 is read for [now − window, now]. */
  windowMs: number;
  cacheTtlMs: number;
  prefix: string | undefined;
  /** Our families, whose names upstream families must not take; names and types are enough. */
  ownFamilies: () => Promise<MetricFamily[]>;
  log: Logger;
  now?: () => number;
}

/** One source's E7 reads: cache, single flight, gauges. */
class SourceReader {
  readonly #o: E7ScraperOptions;
  readonly #source: UpstreamSource;
  readonly #target: TargetLabels;
  readonly #now: () => number;
  readonly #log: Logger;
  #cache: Snapshot | undefined;
  #inflight: Promise<Snapshot> | undefined;
  #samplesShown = 0;
  /** `name=value` of the limit the last read broke. */
  #limitBroken: string | undefined;

  /** @throws InvalidArgumentError (`ERR_INVALID_ARGUMENT`) for a label name that is invalid, `le`, `quantile` or `source`. */
  constructor(options: E7ScraperOptions, source: UpstreamSource) {
    this.#o = options;
    this.#source = source;
    for (const name of Object.keys(source.labels)) {
      // `le` and `quantile` belong to histograms and summaries, `source` to us.
      if (!isValidLabelName(name) || name === 'le' || name === 'quantile' || name === 'source') {
        throw new InvalidArgumentError(`source ${source.name}: label name ${JSON.stringify(name)} cannot be added to upstream samples`);
      }
    }
    this.#target = targetLabels([['source', source.name], ...Object.entries(source.labels)]);
    this.#now = options.now ?? Date.now;
    this.#log = options.log.child({ source: source.name });
    // The series exist before the first scrape, so alerts and increase() see the source.
    options.metrics.scrape.up.set({ source: source.name }, 0);
    options.metrics.scrape.samples.set({ source: source.name }, 0);
    options.metrics.scrape.droppedFamilies.inc({ source: source.name }, 0);
  }

  /** The cached read while younger than the TTL. Synchronous: a fully cached scrape waits for nothing. */
  fresh(): Snapshot | undefined {
    const cached = this.#cache;
    if (cached === undefined || this.#now() - cached.fetchedAt >= this.#o.cacheTtlMs) return undefined;
    this.#showSamples(cached.samples);
    return cached;
  }

  /** Only when it changes: setting it again would make the own part's gauge look changed. */
  #showSamples(samples: number): void {
    if (samples === this.#samplesShown) return;
    this.#samplesShown = samples;
    this.#o.metrics.scrape.samples.set({ source: this.#source.name }, samples);
  }

  /** The cached read, or the shared new one if it ends within `budgetMs`; undefined otherwise. Never throws. */
  async collect(budgetMs: number): Promise<Snapshot | undefined> {
    const { metrics } = this.#o;
    const source = this.#source.name;
    const cached = this.fresh();
    if (cached !== undefined) return cached;
    this.#inflight ??= this.#read(budgetMs).finally(() => {
      this.#inflight = undefined;
    });
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), budgetMs);
    });
    try {
      const result = await Promise.race([this.#inflight, deadline]);
      if (result === 'timeout') {
        // The shared read goes on for a later scrape.
        metrics.scrape.up.set({ source }, 0);
        metrics.scrape.errors.inc({ source, reason: 'timeout' });
        this.#showSamples(0);
        return undefined;
      }
      this.#showSamples(result.samples);
      return result;
    } catch {
      this.#showSamples(0);
      return undefined;
    } finally {
      clearTimeout(timer);
    }
  }

  /** HELP for upstream families without one (the platform sends none). */
  #upstreamHelp(): string {
    return `Platform analytics metric (E7), a count over the last ${formatDuration(this.#o.windowMs)} (METRICS_WINDOW), as read from the upstream.`;
  }

  /**
   * The source's part: each family prefixed, given a HELP, dropped on a collision, labelled, then
   * written and let go one at a time, the parser's samples changed in place. Empties `families`.
   */
  #serialize(families: MetricFamily[], own: readonly MetricFamily[]): IndexedPart {
    const { metrics, prefix } = this.#o;
    const source = this.#source.name;
    const ours = reservedNameSet(own);
    const help = this.#upstreamHelp();
    const types = new Map<string, MetricType>();
    const kept: number[] = [];
    const dropped: string[] = [];
    families.forEach((family, i) => {
      const name = prefix ? prefix + family.name : family.name;
      const sampleNames = new Set(family.samples.map((sample) => (prefix ? prefix + sample.name : sample.name)));
      // Judged by the served names: with a prefix, an upstream `up` no longer collides.
      if (collidesWithReserved(reservedNamesOf(name, family.type, sampleNames), ours)) {
        dropped.push(name);
      } else {
        kept.push(i);
        types.set(name, family.type);
      }
    });
    if (dropped.length > 0) {
      metrics.scrape.droppedFamilies.inc({ source }, dropped.length);
      this.#log.warn(
        { families: dropped },
        "dropped upstream metric families whose names collide with the exporter's own or with those Prometheus writes itself (up, scrape_*, ALERTS*)",
      );
    }
    const writer = new PartWriter(types);
    for (const i of kept) {
      const family = relabelInPlace(families[i]!, prefix || undefined, []);
      family.help ??= help;
      writer.add(family, this.#target);
      // Let the parser's samples go before the next family's are labelled.
      (families as Array<MetricFamily | undefined>)[i] = undefined;
    }
    families.length = 0;
    // Renamed, labelled, given a clean help and filtered, the parser's families are still normalized.
    return writer.finish();
  }

  async #read(budgetMs: number): Promise<Snapshot> {
    const { metrics } = this.#o;
    const { client, name: source } = this.#source;
    const log = this.#log;
    const started = performance.now();
    const now = this.#now();
    const budget = AbortSignal.timeout(budgetMs);
    const limits = this.#source.limits;
    // On the bytes as they arrive: a body over a limit is abandoned before it is text.
    const inspectBody = limits && (() => limitGuard(source, limits));
    try {
      const text = await client
        .fetchPrometheusText(
          { startDate: new Date(now - this.#o.windowMs), toDate: new Date(now) },
          { signal: budget, ...(inspectBody ? { inspectBody } : {}) },
        )
        .catch((err: unknown) => {
          if (err instanceof AbortedError && budget.aborted) {
            throw new UpstreamTimeoutError('prometheus', `E7 did not answer within the scrape's budget of ${budgetMs} ms`, { cause: err });
          }
          throw err;
        });
      // HELP texts and label values are served as sent: a token echoed into them is masked first.
      const parsed = parseExposition(redactSecrets(text));
      for (const line of parsed.invalid) metrics.scrape.invalidLines.inc({ source, reason: line.reason });
      if (parsed.invalid.length > 0) {
        log.warn({ invalidLines: parsed.invalid.length, first: parsed.invalid[0] }, 'dropped invalid lines of the upstream Prometheus text');
      }
      const part = this.#serialize(parsed.families, await this.#o.ownFamilies());
      const snapshot: Snapshot = { part, samples: part.samples, fetchedAt: this.#now() };
      this.#cache = snapshot;
      this.#limitBroken = undefined;
      metrics.scrape.up.set({ source }, 1);
      metrics.scrape.lastSuccess.set({ source }, snapshot.fetchedAt / 1000);
      return snapshot;
    } catch (err) {
      metrics.scrape.up.set({ source }, 0);
      const reason = failureReason(err);
      metrics.scrape.errors.inc({ source, reason });
      if (err instanceof UpstreamLimitError) this.#logLimit(err);
      else log.warn({ reason, err }, 'reading the upstream Prometheus text failed');
      throw err;
    } finally {
      metrics.scrape.duration.set({ source }, (performance.now() - started) / 1000);
    }
  }

  /** At warn when it is news (the first read to break it, or another limit), else at debug. */
  #logLimit(err: UpstreamLimitError): void {
    const key = `${err.limit}=${err.value}`;
    const fields = { reason: 'limit', limit: err.limit, value: err.value, setting: LIMIT_SETTINGS[err.limit] };
    if (this.#limitBroken === key) {
      this.#log.debug(fields, err.message);
      return;
    }
    this.#limitBroken = key;
    this.#log.warn(fields, `${err.message} (logged again at warn after a good read or for another limit)`);
  }
}

/** A body inspector for one E7 response: throws {@link UpstreamLimitError} at the first line over a limit. */
function limitGuard(source: string, limits: ExpositionLimits): (chunk: Uint8Array) => void {
  const scanner = new ExpositionLimitScanner(limits);
  return (chunk) => {
    const breach = scanner.write(chunk);
    if (breach === undefined) return;
    throw new UpstreamLimitError(
      breach.limit,
      breach.value,
      `E7 text of source ${source} is over its ${describeLimit(breach)} (${LIMIT_SETTINGS[breach.limit]}) at line ${breach.line}: ` +
        'read abandoned, the source serves no samples (upstream_up 0)',
    );
  };
}

/** Every source's E7 samples, for /metrics (all of them, merged) and /probe (one). */
export class E7Scraper {
  readonly #o: E7ScraperOptions;
  #readers: ReadonlyMap<string, SourceReader>;
  /** The last merged part and the reads it was made of. */
  #merged: { from: ReadonlyArray<Snapshot | undefined>; part: UpstreamPart } | undefined;

  /** @throws InvalidArgumentError (`ERR_INVALID_ARGUMENT`) for a source label name that is invalid, `le`, `quantile` or `source`. */
  constructor(options: E7ScraperOptions) {
    this.#o = options;
    this.#readers = new Map(options.sources.map((source) => [source.name, new SourceReader(options, source)]));
  }

  /**
   * Takes up a reload's sources for the next scrape: a source in `keep` (unchanged) keeps its
   * reader, cache and read in flight; the others get new ones.
   *
   * @throws InvalidArgumentError as the constructor, before anything changes.
   */
  setSources(sources: readonly UpstreamSource[], keep: ReadonlySet<string>): void {
    const readers = new Map<string, SourceReader>();
    for (const source of sources) {
      const kept = keep.has(source.name) ? this.#readers.get(source.name) : undefined;
      readers.set(source.name, kept ?? new SourceReader(this.#o, source));
    }
    this.#readers = readers;
    this.#merged = undefined;
  }

  get names(): string[] {
    return [...this.#readers.keys()];
  }

  has(name: string): boolean {
    return this.#readers.has(name);
  }

  /**
   * The upstream part of `/metrics`: every source from its cache or a read bounded by `budgetMs`,
   * merged in source order. Never throws: a source that fails contributes nothing.
   */
  async collect(budgetMs: number): Promise<UpstreamPart> {
    const readers = [...this.#readers.values()];
    let reads: Array<Snapshot | undefined> = readers.map((reader) => reader.fresh());
    if (reads.includes(undefined)) reads = await Promise.all(readers.map((reader) => reader.collect(budgetMs)));
    const merged = this.#merged;
    if (merged !== undefined && merged.from.length === reads.length && merged.from.every((read, i) => read === reads[i])) return merged.part;
    const part = this.#merge(reads);
    this.#merged = { from: reads, part };
    return part;
  }

  /** The upstream part of `/probe?source=NAME`; empty when the read fails or the name is not configured. Never throws. */
  async collectSource(name: string, budgetMs: number): Promise<UpstreamPart> {
    const read = await this.#readers.get(name)?.collect(budgetMs);
    return read === undefined ? EMPTY_UPSTREAM_PART : read.part;
  }

  #merge(reads: ReadonlyArray<Snapshot | undefined>): UpstreamPart {
    const names = this.names;
    const parts = reads.flatMap((read, i) => (read === undefined ? [] : [{ source: names[i]!, read }]));
    if (parts.length === 0) return EMPTY_UPSTREAM_PART;
    if (parts.length === 1) return parts[0]!.read.part;
    const { part, dropped } = mergeParts(parts.map(({ source, read }) => ({ source, part: read.part })));
    for (const { source } of dropped) this.#o.metrics.scrape.droppedFamilies.inc({ source });
    if (dropped.length > 0) {
      this.#o.log.warn(
        { dropped },
        "dropped upstream metric families that conflict with an earlier source's family of the same name (another type or structure)",
      );
    }
    return part;
  }
}
