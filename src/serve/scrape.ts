/**
 * Reads every source's E7 Prometheus text on scrape, as Prometheus's "Writing exporters" guide
 * asks, protected three ways per source:
 * - concurrent scrapes share one upstream request (single flight);
 * - a successful read is reused for METRICS_CACHE_TTL;
 * - the read is bounded by the scrape's own deadline, so /metrics always answers in time, with
 *   `analytics_exporter_upstream_up{source} 0` and no upstream sample older than the TTL when it
 *   fails.
 * Sources are read concurrently, so a slow one never delays another. Each source's samples carry
 * `source="<name>"` and the source's labels; the sources' families are merged into one family per
 * name, and the merged bytes are kept until a source's read changes, so a cached scrape only
 * sends bytes. A source's read is kept as its serialised part and where each family lies in it,
 * never as sample objects: merging works on those bytes (see mergeParts).
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

/** Part of the scrape timeout kept for rendering and sending the response: 20%, at most 1 s. */
export function scrapeBudgetMs(scrapeTimeoutMs: number): number {
  return Math.max(1, scrapeTimeoutMs - Math.min(1000, scrapeTimeoutMs * 0.2));
}

/** Upper bound on a scrape timeout taken from the request header, in seconds. */
const MAX_SCRAPE_TIMEOUT_SECONDS = 300;

/**
 * Reads `X-Prometheus-Scrape-Timeout-Seconds` (Prometheus sends the job's scrape_timeout).
 *
 * @returns milliseconds, or `fallbackMs` when the header is absent or not a positive number.
 */
export function scrapeTimeoutFromHeader(value: string | string[] | undefined, fallbackMs: number): number {
  const text = Array.isArray(value) ? value[0] : value;
  const seconds = text === undefined ? NaN : Number(text);
  // A client sets this header: bound it, so a huge value cannot overflow a timer.
  return Number.isFinite(seconds) && seconds > 0 ? Math.min(seconds, MAX_SCRAPE_TIMEOUT_SECONDS) * 1000 : fallbackMs;
}

/**
 * The upstream's part of a `/metrics` body, serialised once per read in both formats, so that a
 * cached scrape only sends bytes. The OpenMetrics part has no `# EOF`: the body ends with it.
 */
export interface UpstreamPart {
  /** Prometheus text 0.0.4. */
  text: Buffer;
  /** OpenMetrics 1.0.0 without `# EOF`. */
  openMetrics: Buffer;
  samples: number;
}

/** The part of a scrape that has no upstream samples (a failed or timed-out read). */
const EMPTY_UPSTREAM_PART: UpstreamPart = Object.freeze({ text: Buffer.alloc(0), openMetrics: Buffer.alloc(0), samples: 0 });

/** One source's read, kept for METRICS_CACHE_TTL. */
interface Snapshot {
  /**
   * The source's families (prefixed, labelled, without the ones that collide with ours)
   * serialised in both formats, with where each family lies, for merging with other sources:
   * bytes rather than sample objects, which would take several times the memory.
   */
  part: IndexedPart;
  samples: number;
  /** Milliseconds since the epoch when the read finished. */
  fetchedAt: number;
}

/** One source to read: its name, its labels and its own client (token cache, request budget). */
export interface UpstreamSource {
  name: string;
  labels: Readonly<Record<string, string>>;
  client: AnalyticsClient;
  /** What one E7 text may hold (sample_limit, label_limit, label_value_length_limit); absent = no limit. */
  limits?: ExpositionLimits;
}

/** The setting of each limit, named in its log line. */
const LIMIT_SETTINGS: Readonly<Record<UpstreamLimitName, string>> = {
  sample_limit: 'UPSTREAM_SAMPLE_LIMIT',
  label_limit: 'UPSTREAM_LABEL_LIMIT',
  label_value_length_limit: 'UPSTREAM_LABEL_VALUE_LENGTH_LIMIT',
};

export interface E7ScraperOptions {
  /** At least one, names unique; /metrics serves them in this order. */
  sources: readonly UpstreamSource[];
  metrics: ExporterMetrics;
  /** E7 is read for [now − window, now]. */
  windowMs: number;
  cacheTtlMs: number;
  prefix: string | undefined;
  /** Our own families, to drop upstream families whose names collide with them; only names and types are read (samples may be empty). Called once per source read. */
  ownFamilies: () => Promise<MetricFamily[]>;
  log: Logger;
  now?: () => number;
}

/** One source's E7 reads: its cache, its single flight, its gauges. */
class SourceReader {
  readonly #o: E7ScraperOptions;
  readonly #source: UpstreamSource;
  readonly #target: TargetLabels;
  readonly #now: () => number;
  readonly #log: Logger;
  #cache: Snapshot | undefined;
  #inflight: Promise<Snapshot> | undefined;
  /** What `upstream_samples{source}` was last set to (0 by the constructor). */
  #samplesShown = 0;
  /** The limit (`name=value`) the last read broke, logged at warn once; undefined after a good read. */
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
    // The series exist before the first scrape, so alerts and increase() see the source from the start.
    options.metrics.scrape.up.set({ source: source.name }, 0);
    options.metrics.scrape.samples.set({ source: source.name }, 0);
    options.metrics.scrape.droppedFamilies.inc({ source: source.name }, 0);
  }

  /**
   * The cached read while younger than the TTL, its samples shown in `upstream_samples{source}`;
   * undefined when there is none. Synchronous, so that a scrape whose every source is cached
   * waits for nothing.
   */
  fresh(): Snapshot | undefined {
    const cached = this.#cache;
    if (cached === undefined || this.#now() - cached.fetchedAt >= this.#o.cacheTtlMs) return undefined;
    this.#showSamples(cached.samples);
    return cached;
  }

  /**
   * Sets `upstream_samples{source}` when it changes: every cached scrape of every source would
   * otherwise set it again, and make the own part's gauge look changed (src/metrics/own-part.ts).
   */
  #showSamples(samples: number): void {
    if (samples === this.#samplesShown) return;
    this.#samplesShown = samples;
    this.#o.metrics.scrape.samples.set({ source: this.#source.name }, samples);
  }

  /**
   * The read to serve in this scrape: the cached one while younger than the TTL, otherwise a new
   * one (shared with concurrent scrapes) if it finishes within `budgetMs`. Never throws.
   *
   * @returns undefined when the read failed or did not finish in time (`upstream_up` then 0).
   */
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
        // The shared read may still finish for a later scrape; this one cannot wait for it.
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

  /** HELP for upstream families that come without one (the platform sends none): what the value means. */
  #upstreamHelp(): string {
    return `Platform analytics metric (E7), a count over the last ${formatDuration(this.#o.windowMs)} (METRICS_WINDOW), as read from the upstream.`;
  }

  /**
   * The source's part: each family prefixed, given a help when it has none, dropped when it
   * collides with one of ours or one Prometheus writes itself (`up`, `scrape_*`, `ALERTS*`;
   * counted and logged), labelled, then written and let go one family
   * at a time, so that the parser's samples are the only ones made (renamed and labelled in place)
   * and are let go as soon as written. Empties `families`, and changes them on the way.
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
      // Judged by the served (prefixed) names: with UPSTREAM_METRIC_PREFIX, an upstream `up` is served as `<prefix>up` and no longer collides.
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
      // The parser's samples of this family are no longer needed: let them go before the next one's copies are made.
      (families as Array<MetricFamily | undefined>)[i] = undefined;
    }
    families.length = 0;
    // The parser's families, renamed, labelled, given a clean help and filtered, are still normalized.
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
    // Checked on the bytes as they arrive, so a body over a limit is abandoned before it is text or samples.
    const inspectBody = limits && (() => limitGuard(source, limits));
    try {
      const text = await client
        .fetchPrometheusText(
          { startDate: new Date(now - this.#o.windowMs), toDate: new Date(now) },
          { signal: budget, ...(inspectBody ? { inspectBody } : {}) },
        )
        .catch((err: unknown) => {
          // The scrape's budget ran out: for the scrape, that is the upstream timing out.
          if (err instanceof AbortedError && budget.aborted) {
            throw new UpstreamTimeoutError('prometheus', `E7 did not answer within the scrape's budget of ${budgetMs} ms`, { cause: err });
          }
          throw err;
        });
      // An upstream's HELP texts and label values are served as sent: a secret echoed into them
      // (the request's token) is masked first, in every form (src/redact.ts).
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

  /**
   * A broken limit at warn when it is news (the first read that breaks it, or another limit than
   * the last read broke), else at debug: an upstream that stays over its limit would otherwise log
   * a warning per read, every METRICS_CACHE_TTL or every scrape.
   */
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

/**
 * A new body inspector for one E7 response of `source`: throws {@link UpstreamLimitError} at the
 * first line over one of `limits` (Prometheus's sample_limit, label_limit,
 * label_value_length_limit), which abandons the body.
 */
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
  /** The reads the last merged part was made of (undefined: none served), and that part. */
  #merged: { from: ReadonlyArray<Snapshot | undefined>; part: UpstreamPart } | undefined;

  /** @throws InvalidArgumentError (`ERR_INVALID_ARGUMENT`) for a source label name that is invalid, `le`, `quantile` or `source`. */
  constructor(options: E7ScraperOptions) {
    this.#o = options;
    this.#readers = new Map(options.sources.map((source) => [source.name, new SourceReader(options, source)]));
  }

  /**
   * Takes up the sources of a reload of CONFIG_FILE: a source in `keep` keeps its reader (its
   * cache and its read in flight), every other source of `sources` gets a new one, and a source
   * left out is no longer read (a scrape already reading it still gets its samples). The next
   * scrape sees the new list; the one in progress finishes with the list it started with.
   *
   * @param sources every source from now on, in order, names unique.
   * @param keep names of sources whose client and labels are unchanged.
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

  /** The configured source names, in order. */
  get names(): string[] {
    return [...this.#readers.keys()];
  }

  /** Whether `name` is a configured source. */
  has(name: string): boolean {
    return this.#readers.has(name);
  }

  /**
   * The upstream part of a `/metrics` scrape: every source read concurrently (each from its cache
   * or a new read bounded by `budgetMs`), merged into one family per name in source order (see
   * mergeParts: a later source's family whose type conflicts with an earlier one's is dropped
   * and counted in `upstream_dropped_families_total{source}`). Never throws: a source that fails
   * or times out contributes no sample and has `upstream_up{source} 0`.
   *
   * @param budgetMs how long this scrape may wait, in milliseconds.
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

  /**
   * The upstream part of `/probe?source=NAME`: that source's samples only, labelled as in
   * /metrics. Never throws.
   *
   * @returns {@link EMPTY_UPSTREAM_PART} when the read fails or times out, or for a name that is
   *   not configured (nothing is read for it).
   */
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
