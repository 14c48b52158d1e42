/**
 * The exporter's own metrics on a dedicated prom-client Registry: every name prefixed
 * `analytics_exporter_`, base units, `_total` only on counters, help on all. One file per area
 * registers its metrics; the upstream and sync code report through observers (ClientObserver,
 * SyncObserver), so neither depends on prom-client. See docs/metrics.md.
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

/** The registry and its areas. */
export class ExporterMetrics {
  readonly registry = new Registry();
  readonly scrape: ScrapeMetrics;
  readonly client: ClientMetrics;
  readonly sync: SyncMetrics;
  readonly audit: AuditMetrics;
  readonly http: HttpMetrics;
  readonly process: ProcessMetrics;

  /**
   * @param options.cacheTtlMs METRICS_CACHE_TTL, stated in the HELP of `upstream_up`.
   * @param options.processMetrics prom-client's process_* and nodejs_* metrics (default true).
   */
  constructor(options: { processMetrics?: boolean; cacheTtlMs?: number } = {}) {
    this.scrape = new ScrapeMetrics(this.registry, METRIC_PREFIX, options.cacheTtlMs);
    this.client = new ClientMetrics(this.registry, METRIC_PREFIX);
    this.sync = new SyncMetrics(this.registry, METRIC_PREFIX);
    this.audit = new AuditMetrics(this.registry, METRIC_PREFIX);
    this.http = httpMetrics(this.registry, METRIC_PREFIX);
    this.process = processMetrics(this.registry, METRIC_PREFIX, options.processMetrics ?? true);
  }

  /** The own families as they are now, in registration order, from prom-client's objects (no text parsed back). */
  async families(): Promise<MetricFamily[]> {
    const metrics = await this.registry.getMetricsAsJSON();
    const families: MetricFamily[] = [];
    for (const metric of metrics) if (!OMITTED_DEFAULT_METRICS.has(metric.name)) families.push(toFamily(metric));
    return families;
  }

  /**
   * The own families with empty `samples`, no collect function run: enough to tell which upstream
   * families collide with ours, at a fraction of the cost (docs/design/scrape-path.md). Never throws.
   */
  familyShapes(): MetricFamily[] {
    const families: MetricFamily[] = [];
    for (const metric of this.registry.getMetricsAsArray()) {
      if (OMITTED_DEFAULT_METRICS.has(metric.name)) continue;
      families.push({ name: metric.name, type: familyType(metric.type), help: metric.help, samples: [] });
    }
    return families;
  }

  clientObserver(source: string): ClientObserver {
    return this.client.observer(source);
  }

  /** The source's series start at 0 on the first call. */
  syncObserver(source: string = DEFAULT_SOURCE): SyncObserver {
    return this.sync.observer(source);
  }

  /** The audit series of `source` at 0, for a serve that audits it. */
  auditScheduled(source: string): void {
    this.audit.scheduled(source);
  }

  recordAudit(source: string, result: AuditResult): void {
    this.audit.record(source, result);
  }

  setParkedWindows(source: string, count: number): void {
    this.sync.setParkedWindows(source, count);
  }

  setWatermark(source: string, ms: number | undefined): void {
    this.sync.setWatermark(source, ms);
  }

  recordUnrecordedFailure(source: string, durationSeconds: number, err: unknown): void {
    this.sync.recordUnrecordedFailure(source, durationSeconds, err);
  }

  /** WEB_CONFIG_FILE's reload gauges: only a server with one has them, so no alert sees a 0 for no file. */
  trackWebConfigReloads(): (ok: boolean) => void {
    return reloadGauges(this.registry, `${METRIC_PREFIX}web_config_`, 'WEB_CONFIG_FILE (and the files it names)', 'the previous configuration');
  }

  /** CONFIG_FILE's reload gauges. */
  trackConfigReloads(): (ok: boolean) => void {
    return reloadGauges(this.registry, `${METRIC_PREFIX}config_`, 'CONFIG_FILE (SIGHUP or POST /-/reload)', 'the previous sources');
  }

  /** Removes every series labelled `source="<source>"`, for a source a reload removed; added again, it starts afresh. */
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
        // A histogram's buckets and a summary's quantiles go with the labels the metric was given.
        const { le: _le, quantile: _quantile, ...given } = labels;
        labelled.remove(given);
      }
    }
  }
}
