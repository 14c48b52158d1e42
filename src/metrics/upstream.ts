/**
 * Reads the platform's E7 Prometheus text on scrape, as Prometheus's "Writing exporters" guide
 * asks, protected three ways:
 * - concurrent scrapes share one upstream request (single flight);
 * - a successful read is reused for METRICS_CACHE_TTL;
 * - the read is bounded by the scrape's own deadline, so /metrics always answers in time, with
 *   `analytics_exporter_upstream_up 0` and no upstream sample older than the TTL when it fails.
 */
import { AbortedError, UpstreamError, failureReason } from '../errors.js';
import type { Logger } from '../log.js';
import { mergeFamilies, parseExposition, prefixFamilies, serializeOpenMetricsBuffer, serializeTextBuffer, type MetricFamily } from '../exposition/index.js';
import type { AnalyticsClient } from '../upstream/analytics.js';
import type { ExporterMetrics } from './registry.js';
import { formatDuration } from '../time.js';

/** Part of the scrape timeout kept for rendering and sending the response: 20%, at most 1 s. */
export function scrapeBudgetMs(scrapeTimeoutMs: number): number {
  return Math.max(1, scrapeTimeoutMs - Math.min(1000, scrapeTimeoutMs * 0.2));
}

/** Upper bound on a scrape timeout taken from the request header, in seconds. */
export const MAX_SCRAPE_TIMEOUT_SECONDS = 300;

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
export const EMPTY_UPSTREAM_PART: UpstreamPart = Object.freeze({ text: Buffer.alloc(0), openMetrics: Buffer.alloc(0), samples: 0 });

interface Snapshot extends UpstreamPart {
  /** Milliseconds since the epoch when the read finished. */
  fetchedAt: number;
}

export interface UpstreamMetricsOptions {
  client: AnalyticsClient;
  metrics: ExporterMetrics;
  /** E7 is read for [now − window, now]. */
  windowMs: number;
  cacheTtlMs: number;
  prefix: string | undefined;
  /** Our own families, to drop upstream families whose names collide with them. */
  ownFamilies: () => Promise<MetricFamily[]>;
  log: Logger;
  now?: () => number;
}

export class UpstreamMetrics {
  readonly #o: UpstreamMetricsOptions;
  readonly #now: () => number;
  #cache: Snapshot | undefined;
  #inflight: Promise<Snapshot> | undefined;

  constructor(options: UpstreamMetricsOptions) {
    this.#o = options;
    this.#now = options.now ?? Date.now;
  }

  /**
   * The upstream part to serve in this scrape: the cached read while it is younger than the TTL,
   * otherwise a new read (shared with concurrent scrapes) if it finishes within `budgetMs`.
   * Never throws: a failure or a timeout yields {@link EMPTY_UPSTREAM_PART} and sets
   * `upstream_up` to 0.
   *
   * @param budgetMs how long this scrape may wait, in milliseconds.
   */
  async collect(budgetMs: number): Promise<UpstreamPart> {
    const { metrics } = this.#o;
    const cached = this.#cache;
    if (cached !== undefined && this.#now() - cached.fetchedAt < this.#o.cacheTtlMs) {
      metrics.upstreamSamples.set(cached.samples);
      return cached;
    }
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
        metrics.upstreamUp.set(0);
        metrics.upstreamErrors.inc({ reason: 'timeout' });
        metrics.upstreamSamples.set(0);
        return EMPTY_UPSTREAM_PART;
      }
      metrics.upstreamSamples.set(result.samples);
      return result;
    } catch {
      metrics.upstreamSamples.set(0);
      return EMPTY_UPSTREAM_PART;
    } finally {
      clearTimeout(timer);
    }
  }

  /** HELP for upstream families that come without one (the platform sends none): what the value means. */
  #upstreamHelp(): string {
    return `Platform analytics metric (E7), a count over the last ${formatDuration(this.#o.windowMs)} (METRICS_WINDOW), as read from the upstream.`;
  }

  async #read(budgetMs: number): Promise<Snapshot> {
    const { client, metrics, log } = this.#o;
    const started = performance.now();
    const now = this.#now();
    const budget = AbortSignal.timeout(budgetMs);
    try {
      const text = await client
        .fetchPrometheusText({ startDate: new Date(now - this.#o.windowMs), toDate: new Date(now) }, { signal: budget })
        .catch((err: unknown) => {
          // The scrape's budget ran out: for the scrape, that is the upstream timing out.
          if (err instanceof AbortedError && budget.aborted) {
            throw new UpstreamError('ERR_UPSTREAM_TIMEOUT', 'prometheus', `E7 did not answer within the scrape's budget of ${budgetMs} ms`, {
              cause: err,
              reason: 'timeout',
            });
          }
          throw err;
        });
      const parsed = parseExposition(text);
      for (const line of parsed.invalid) metrics.upstreamInvalidLines.inc({ reason: line.reason });
      if (parsed.invalid.length > 0) {
        log.warn({ invalidLines: parsed.invalid.length, first: parsed.invalid[0] }, 'dropped invalid lines of the upstream Prometheus text');
      }
      const renamed = (this.#o.prefix ? prefixFamilies(parsed.families, this.#o.prefix) : parsed.families).map((family) =>
        family.help === undefined ? { ...family, help: this.#upstreamHelp() } : family,
      );
      const { dropped } = mergeFamilies(await this.#o.ownFamilies(), renamed);
      const droppedNames = new Set(dropped);
      const upstream = renamed.filter((family) => !droppedNames.has(family.name));
      if (dropped.length > 0) {
        metrics.upstreamDroppedFamilies.inc(dropped.length);
        log.warn({ families: dropped }, "dropped upstream metric families whose names collide with the exporter's own");
      }
      // Serialised now, once for both formats; the families are not kept, so a cached read holds
      // two buffers rather than an object per sample. The parser's families, renamed, given a
      // clean help and filtered, are still normalized.
      const snapshot: Snapshot = {
        text: serializeTextBuffer(upstream, { normalized: true }),
        openMetrics: serializeOpenMetricsBuffer(upstream, { eof: false, normalized: true }),
        samples: upstream.reduce((n, f) => n + f.samples.length, 0),
        fetchedAt: this.#now(),
      };
      this.#cache = snapshot;
      metrics.upstreamUp.set(1);
      metrics.upstreamLastSuccess.set(snapshot.fetchedAt / 1000);
      return snapshot;
    } catch (err) {
      metrics.upstreamUp.set(0);
      const reason = failureReason(err);
      metrics.upstreamErrors.inc({ reason });
      log.warn({ reason, err }, 'reading the upstream Prometheus text failed');
      throw err;
    } finally {
      metrics.upstreamScrapeDuration.set((performance.now() - started) / 1000);
    }
  }
}
