/**
 * The exporter's own metrics, on a dedicated prom-client Registry (never the global one), every
 * name prefixed `analytics_exporter_`, base units, `_total` only on counters, help text on all.
 * One file per area creates its metrics on the registry: the E7 scrape (scrape.ts), upstream
 * requests (client.ts), sync runs (sync.ts), the audit (audit.ts), serve's HTTP server (http.ts),
 * the process (process.ts); the reload gauges (reload.ts) only where a server reloads a file.
 *
 * The upstream and sync code report through observer interfaces (ClientObserver, SyncObserver);
 * the areas turn those events into metrics, so neither depends on prom-client.
 */
import { Registry } from 'prom-client';
import type { MetricFamily } from '../exposition/index.js';
import type { ClientObserver } from '../upstream/analytics.js';
import type { SyncObserver } from '../sync/run/run.js';
import type { AuditResult } from '../sync/audit/source.js';
import { DEFAULT_SOURCE } from '../config.js';
import { AuditMetrics } from './audit.js';
import { ClientMetrics } from './client.js';
import { httpMetrics, type HttpMetrics } from './http.js';
import { processMetrics, type ProcessMetrics } from './process.js';
import { reloadGauges } from './reload.js';
import { ScrapeMetrics } from './scrape.js';
import { SyncMetrics } from './sync.js';
import { OMITTED_DEFAULT_METRICS, familyType, toFamily } from './own-part.js';

const METRIC_PREFIX = 'analytics_exporter_';

/** The registry and its areas; the events the rest of the code reports go to the area that counts them. */
export class ExporterMetrics {
  readonly registry = new Registry();
  /** serve's E7 reads, per source (upstream_up, upstream_samples, …). */
  readonly scrape: ScrapeMetrics;
  /** Upstream requests, per source (upstream_request_duration_seconds, token_requests_total, …). */
  readonly client: ClientMetrics;
  /** Sync runs, per source (sync_*, …). */
  readonly sync: SyncMetrics;
  /** The audit inside serve (AUDIT_SCHEDULE, src/sync/audit/source.ts); a one-shot `verify` serves no metrics. */
  readonly audit: AuditMetrics;
  /** serve's own HTTP server: connection limits and password checks. */
  readonly http: HttpMetrics;
  /** build_info, database_up, the default process metrics. */
  readonly process: ProcessMetrics;

  /**
   * @param options.cacheTtlMs METRICS_CACHE_TTL, stated in the HELP of `upstream_up`.
   * @param options.processMetrics whether to add prom-client's process_* and nodejs_* metrics (default true).
   */
  constructor(options: { processMetrics?: boolean; cacheTtlMs?: number } = {}) {
    this.scrape = new ScrapeMetrics(this.registry, METRIC_PREFIX, options.cacheTtlMs);
    this.client = new ClientMetrics(this.registry, METRIC_PREFIX);
    this.sync = new SyncMetrics(this.registry, METRIC_PREFIX);
    this.audit = new AuditMetrics(this.registry, METRIC_PREFIX);
    this.http = httpMetrics(this.registry, METRIC_PREFIX);
    this.process = processMetrics(this.registry, METRIC_PREFIX, options.processMetrics ?? true);
  }

  /**
   * The exporter's own metric families as they are now, in registration order, straight from
   * prom-client's objects (`getMetricsAsJSON`, which runs the collect functions of the default
   * metrics): no text is rendered and parsed back. The serializers normalise them like any family.
   *
   * @returns new family objects; never throws for a well-formed registry.
   */
  async families(): Promise<MetricFamily[]> {
    const metrics = await this.registry.getMetricsAsJSON();
    const families: MetricFamily[] = [];
    for (const metric of metrics) if (!OMITTED_DEFAULT_METRICS.has(metric.name)) families.push(toFamily(metric));
    return families;
  }

  /**
   * The exporter's own metric families without their samples: names, types and help, in the order
   * of {@link families}, read from the registry without running any collect function. Enough to
   * tell which upstream families collide with ours (a family's sample names follow from its name
   * and type), at a fraction of the cost: every source's E7 read asks, and collecting the default
   * metrics (event-loop histogram percentiles, /proc reads) for each made a cold scrape of 16
   * sources spend most of its CPU there.
   *
   * @returns new family objects with empty `samples`; never throws.
   */
  familyShapes(): MetricFamily[] {
    const families: MetricFamily[] = [];
    for (const metric of this.registry.getMetricsAsArray()) {
      if (OMITTED_DEFAULT_METRICS.has(metric.name)) continue;
      families.push({ name: metric.name, type: familyType(metric.type), help: metric.help, samples: [] });
    }
    return families;
  }

  /** Observer for one source's analytics client ({@link ClientMetrics.observer}). */
  clientObserver(source: string): ClientObserver {
    return this.client.observer(source);
  }

  /** Observer for the sync runs of one source, its series created at 0 on the first call ({@link SyncMetrics.observer}). */
  syncObserver(source: string = DEFAULT_SOURCE): SyncObserver {
    return this.sync.observer(source);
  }

  /** The audit series of `source` at 0, for a serve that audits it (AUDIT_SCHEDULE on), so increase() and the alert see them from the start. */
  auditScheduled(source: string): void {
    this.audit.scheduled(source);
  }

  /** Records an audit of `source` that finished (src/sync/audit/source.ts). */
  recordAudit(source: string, result: AuditResult): void {
    this.audit.record(source, result);
  }

  /** See {@link SyncMetrics.setParkedWindows}. */
  setParkedWindows(source: string, count: number): void {
    this.sync.setParkedWindows(source, count);
  }

  /** See {@link SyncMetrics.setWatermark}. */
  setWatermark(source: string, ms: number | undefined): void {
    this.sync.setWatermark(source, ms);
  }

  /** See {@link SyncMetrics.recordUnrecordedFailure}. */
  recordUnrecordedFailure(source: string, durationSeconds: number, err: unknown): void {
    this.sync.recordUnrecordedFailure(source, durationSeconds, err);
  }

  /**
   * Adds the gauges of WEB_CONFIG_FILE's reloads (only a server with one has them, so that no
   * alert sees a 0 for a file that does not exist); see {@link reloadGauges}.
   */
  trackWebConfigReloads(): (ok: boolean) => void {
    return reloadGauges(this.registry, `${METRIC_PREFIX}web_config_`, 'WEB_CONFIG_FILE (and the files it names)', 'the previous configuration');
  }

  /** The CONFIG_FILE reload gauges of `serve` (SIGHUP, `POST /-/reload`); see {@link reloadGauges}. */
  trackConfigReloads(): (ok: boolean) => void {
    return reloadGauges(this.registry, `${METRIC_PREFIX}config_`, 'CONFIG_FILE (SIGHUP or POST /-/reload)', 'the previous sources');
  }

  /**
   * Removes every series labelled `source="<source>"`, of every metric of the registry, for a
   * source a reload removed: its last values would otherwise be served (and alerted on) for ever.
   * A source added again later starts its series afresh ({@link syncObserver}).
   */
  async forgetSource(source: string): Promise<void> {
    this.sync.forget(source);
    for (const metric of this.registry.getMetricsAsArray()) {
      const labelled = metric as unknown as {
        labelNames?: readonly string[];
        get(): Promise<{ values: Array<{ labels: Record<string, string | number> }> }>;
        remove(labels: Record<string, string | number>): void;
      };
      if (!labelled.labelNames?.includes('source')) continue;
      const { values } = await labelled.get();
      for (const { labels } of values) {
        if (labels.source !== source) continue;
        // A histogram's buckets and a summary's quantiles are one series set with the labels the metric was given.
        const { le: _le, quantile: _quantile, ...given } = labels;
        labelled.remove(given);
      }
    }
  }
}
