/**
 * The exporter's own metrics, on a dedicated prom-client Registry (never the global one), every
 * name prefixed `analytics_exporter_`, base units, `_total` only on counters, help text on all.
 *
 * The upstream and sync code report through observer interfaces (ClientObserver, SyncObserver);
 * this module turns those events into metrics, so neither depends on prom-client.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { MetricFamily } from '../exposition/index.js';
import type { ClientObserver } from '../upstream/analytics.js';
import type { SyncObserver, SyncResult } from '../sync/run/run.js';
import type { AuditResult } from '../sync/audit/source.js';
import { REVISION, VERSION } from '../version.js';
import { failureReason } from '../failures.js';
import { DEFAULT_SOURCE } from '../config.js';
import { AuditMetrics } from './audit.js';
import { authThrottledCounter, connectionsRefusedCounter } from './http.js';
import { recordFieldsNewCounter } from './record-fields.js';
import { reloadGauges } from './reload.js';
import { OMITTED_DEFAULT_METRICS, familyType, toFamily } from './own-part.js';

export const METRIC_PREFIX = 'analytics_exporter_';

/** Why a scheduled sync tick did not run (sync_skipped_total's `reason`; src/serve/cron.ts). */
/**
 * Why a scheduled tick did not run: `running`, the scheduler's previous run was still going;
 * `locked`, the run found the source's sync lock (or the schema's) held by another process.
 */
export type SkipReason = 'running' | 'locked';

const SKIP_REASONS: readonly SkipReason[] = ['running', 'locked'];

/** Buckets of upstream request durations, in seconds: 5 ms to 30 s. */
const REQUEST_BUCKETS_SECONDS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

export class ExporterMetrics {
  readonly registry = new Registry();

  readonly upstreamUp: Gauge;
  readonly upstreamScrapeDuration = new Gauge({
    name: `${METRIC_PREFIX}upstream_scrape_duration_seconds`,
    help: 'Duration of the last read of the platform E7 Prometheus text, in seconds.',
    labelNames: ['source'],
    registers: [this.registry],
  });
  readonly upstreamSamples = new Gauge({
    name: `${METRIC_PREFIX}upstream_samples`,
    help: 'Upstream samples served in this scrape.',
    labelNames: ['source'],
    registers: [this.registry],
  });
  readonly upstreamLastSuccess = new Gauge({
    name: `${METRIC_PREFIX}upstream_last_success_timestamp_seconds`,
    help: 'Unix time of the last successful read of the platform E7 Prometheus text.',
    labelNames: ['source'],
    registers: [this.registry],
  });
  readonly upstreamErrors = new Counter({
    name: `${METRIC_PREFIX}upstream_errors_total`,
    help:
      'Failed reads of the platform E7 Prometheus text, by reason (the same values as upstream_attempt_failures_total: timeout, network, ' +
      'http_<status>, content_type, content_encoding, invalid_body, response_too_large, token, other; limit: over UPSTREAM_SAMPLE_LIMIT, UPSTREAM_LABEL_LIMIT or UPSTREAM_LABEL_VALUE_LENGTH_LIMIT).',
    labelNames: ['source', 'reason'],
    registers: [this.registry],
  });
  readonly upstreamInvalidLines = new Counter({
    name: `${METRIC_PREFIX}upstream_invalid_lines_total`,
    help: 'Lines of the upstream Prometheus text dropped as invalid, by reason; they are never served.',
    labelNames: ['source', 'reason'],
    registers: [this.registry],
  });
  readonly upstreamDroppedFamilies = new Counter({
    name: `${METRIC_PREFIX}upstream_dropped_families_total`,
    help:
      "Upstream metric families of the source dropped because their names collide with the exporter's own, with those Prometheus " +
      "writes itself (up, scrape_*, ALERTS*), or with an earlier source's " +
      'family of another type or structure (the first source in configuration order keeps the name).',
    labelNames: ['source'],
    registers: [this.registry],
  });
  readonly upstreamRequestDuration = new Histogram({
    name: `${METRIC_PREFIX}upstream_request_duration_seconds`,
    help: 'Duration of HTTP requests to the platform analytics API, by endpoint (analytics = E6, prometheus = E7) and status code (error = no response).',
    labelNames: ['source', 'endpoint', 'code'],
    buckets: REQUEST_BUCKETS_SECONDS,
    registers: [this.registry],
  });
  readonly upstreamRetries = new Counter({
    name: `${METRIC_PREFIX}upstream_retries_total`,
    help: 'Upstream requests retried after a transient failure, by endpoint.',
    labelNames: ['source', 'endpoint'],
    registers: [this.registry],
  });
  readonly upstreamAttemptFailures = new Counter({
    name: `${METRIC_PREFIX}upstream_attempt_failures_total`,
    help:
      'Failed attempts of upstream requests, retried ones included, by endpoint (token = E0, analytics = E6, prometheus = E7) and reason ' +
      '(network, timeout, http_<status>, invalid_json, content_type, invalid_envelope, inconsistent_page, response_too_large, content_encoding, invalid_body, ' +
      'token, secret_file, other; limit for an E7 text over its limits).',
    labelNames: ['source', 'endpoint', 'reason'],
    registers: [this.registry],
  });
  readonly upstreamRateLimit = new Gauge({
    name: `${METRIC_PREFIX}upstream_rate_limit_requests_per_second`,
    help:
      'Current pace of the request budget of E6 and E7 (UPSTREAM_RATE_LIMIT), in requests per second: the configured rate, ' +
      'halved by a 429 and recovering gradually; 0 when no budget is set.',
    labelNames: ['source'],
    registers: [this.registry],
  });
  readonly upstreamRateLimitWait = new Counter({
    name: `${METRIC_PREFIX}upstream_rate_limit_wait_seconds_total`,
    help: 'Seconds E6 and E7 requests waited for the request budget (UPSTREAM_RATE_LIMIT) before being sent, summed over requests.',
    labelNames: ['source'],
    registers: [this.registry],
  });
  readonly tokenRequests = new Counter({
    name: `${METRIC_PREFIX}token_requests_total`,
    help: 'OAuth2 token requests sent to the identity host (E0), by outcome.',
    labelNames: ['source', 'outcome'],
    registers: [this.registry],
  });
  readonly syncRuns = new Counter({
    name: `${METRIC_PREFIX}sync_runs_total`,
    help: 'Sync runs finished (succeeded, failed or interrupted).',
    labelNames: ['source'] as const,
    registers: [this.registry],
  });
  readonly syncFailures = new Counter({
    name: `${METRIC_PREFIX}sync_failures_total`,
    help: 'Sync runs that failed.',
    labelNames: ['source'] as const,
    registers: [this.registry],
  });
  readonly syncErrors = new Counter({
    name: `${METRIC_PREFIX}sync_errors_total`,
    help:
      'Sync runs that failed, by the reason of the error that ended them (the failures of sync_failures_total, broken down): ' +
      'network, timeout, http_<status>, invalid_json, content_type, invalid_envelope, inconsistent_page, content_encoding, token, inconsistent_window, database, other.',
    labelNames: ['source', 'reason'] as const,
    registers: [this.registry],
  });
  readonly syncSkipped = new Counter({
    name: `${METRIC_PREFIX}sync_skipped_total`,
    help:
      "Scheduled sync ticks skipped, by reason: running (this process's previous run of the source was still going) or " +
      "locked (another process held the source's sync lock, or a rollup rebuild or RETENTION the schema's).",
    labelNames: ['source', 'reason'] as const,
    registers: [this.registry],
  });
  readonly syncLastSuccess = new Gauge({
    name: `${METRIC_PREFIX}sync_last_success_timestamp_seconds`,
    help: 'Unix time at which the last successful sync run finished.',
    labelNames: ['source'] as const,
    registers: [this.registry],
  });
  readonly syncRecords = new Counter({
    name: `${METRIC_PREFIX}sync_records_total`,
    help: 'Analytics records written to the database (re-loaded windows count again).',
    labelNames: ['source'] as const,
    registers: [this.registry],
  });
  readonly syncPages = new Counter({
    name: `${METRIC_PREFIX}sync_pages_total`,
    help: 'E6 pages loaded into the database.',
    labelNames: ['source'] as const,
    registers: [this.registry],
  });
  readonly syncWindows = new Counter({
    name: `${METRIC_PREFIX}sync_windows_total`,
    help: 'Windows committed to the database.',
    labelNames: ['source'] as const,
    registers: [this.registry],
  });
  readonly syncWindowsShrunk = new Counter({
    name: `${METRIC_PREFIX}sync_windows_shrunk_total`,
    help: 'Committed windows re-read without some of their stored records (retention or deletion upstream), by action: kept beside what E6 returns now (SYNC_SHRINK=keep) or replaced (fewer records than stored).',
    labelNames: ['source', 'action'] as const,
    registers: [this.registry],
  });
  readonly syncRecordsQuarantined = new Counter({
    name: `${METRIC_PREFIX}sync_records_quarantined_total`,
    help:
      'Analytics records of committed windows that PostgreSQL cannot store (jsonb: U+0000, an unpaired surrogate, nesting too deep; or refused by the database for a data reason, with its SQLSTATE), ' +
      'kept as sent in the table records_quarantine (payload_text; json_path and reason, or sqlstate and message) instead of records (re-loaded windows count again).',
    labelNames: ['source'] as const,
    registers: [this.registry],
  });
  readonly syncRecordsOutsideWindow = new Counter({
    name: `${METRIC_PREFIX}sync_records_outside_window_total`,
    help:
      'Analytics records stored in a window that E6 returned them for although their RECORD_TIME_FIELD lies outside it ' +
      '(E6 filters on another time, or the field lacks a zone); re-loaded windows count again.',
    labelNames: ['source'] as const,
    registers: [this.registry],
  });
  readonly upstreamEffectivePageSize = new Gauge({
    name: `${METRIC_PREFIX}upstream_effective_page_size`,
    help:
      'Records per E6 page the source really serves, once a page held fewer than SYNC_PAGE_SIZE asked and its totalRecords (an upstream that clamps the page size); ' +
      'absent while no page was short. Short pages are never taken as complete: the sync reads at this size.',
    labelNames: ['source'] as const,
    registers: [this.registry],
  });
  readonly syncUnstableInstants = new Counter({
    name: `${METRIC_PREFIX}sync_unstable_instants_total`,
    help:
      'Reads of an instant (a part of SYNC_MIN_SPLIT holding more than a page of records) whose two reads disagreed; ' +
      'such an instant is read again, and its window is parked after SYNC_WINDOW_ATTEMPTS.',
    labelNames: ['source'] as const,
    registers: [this.registry],
  });
  readonly syncWindowsParked = new Gauge({
    name: `${METRIC_PREFIX}sync_windows_parked`,
    help:
      'Windows of the source parked in the ledger (sync_windows.status parked, not expired): not loadable for a reason of their own ' +
      '(a response over UPSTREAM_MAX_BODY, E6 contradicting itself after SYNC_WINDOW_ATTEMPTS); the watermark passed them. Read from the ledger at each run end, at serve start and after a tick skipped as locked.',
    labelNames: ['source'] as const,
    registers: [this.registry],
  });
  readonly retentionPartitionsDropped = new Counter({
    name: `${METRIC_PREFIX}retention_partitions_dropped_total`,
    help: 'Partitions of the table records dropped by RETENTION (their whole range older than now minus RETENTION); their windows are marked expired in sync_windows.',
    registers: [this.registry],
  });
  readonly syncDuration = new Gauge({
    name: `${METRIC_PREFIX}sync_duration_seconds`,
    help: 'Duration of the last finished sync run, in seconds.',
    labelNames: ['source'] as const,
    registers: [this.registry],
  });
  readonly syncWatermark = new Gauge({
    name: `${METRIC_PREFIX}sync_watermark_timestamp_seconds`,
    help: 'Unix time up to which the analytics records are loaded without a gap (the sync watermark).',
    labelNames: ['source'] as const,
    registers: [this.registry],
  });
  readonly databaseUp = new Gauge({
    name: `${METRIC_PREFIX}database_up`,
    help: 'Whether the database answered the last time it was used or probed (1) or was unreachable (0); while 0, serve probes it with backoff.',
    registers: [this.registry],
  });
  readonly syncRunning = new Gauge({
    name: `${METRIC_PREFIX}sync_running`,
    help: 'Whether a sync run is in progress (1) or not (0).',
    labelNames: ['source'] as const,
    registers: [this.registry],
  });
  // Schema changes (issue 26 item 5, src/sync/run/field-contract.ts).
  readonly recordFieldsNew = recordFieldsNewCounter(this.registry, METRIC_PREFIX);
  // The audit inside serve (AUDIT_SCHEDULE, src/sync/audit/source.ts); a one-shot `verify` serves no metrics.
  readonly #audit = new AuditMetrics(this.registry, METRIC_PREFIX);
  // serve's own HTTP server: connection limits and password checks (src/metrics/http.ts).
  readonly httpConnectionsRefused = connectionsRefusedCounter(this.registry, METRIC_PREFIX);
  readonly authThrottled = authThrottledCounter(this.registry, METRIC_PREFIX);

  /**
   * @param options.cacheTtlMs METRICS_CACHE_TTL, stated in the HELP of `upstream_up`.
   * @param options.processMetrics whether to add prom-client's process_* and nodejs_* metrics (default true).
   */
  constructor(options: { processMetrics?: boolean; cacheTtlMs?: number } = {}) {
    const ttl = options.cacheTtlMs === undefined ? '' : `; a successful read is reused for ${options.cacheTtlMs / 1000}s (METRICS_CACHE_TTL)`;
    this.upstreamUp = new Gauge({
      name: `${METRIC_PREFIX}upstream_up`,
      help: `Whether the last read of the source's platform E7 Prometheus text succeeded (1) or not (0)${ttl}.`,
      labelNames: ['source'],
      registers: [this.registry],
    });
    new Gauge({
      name: `${METRIC_PREFIX}build_info`,
      help: 'Build information of the exporter; the value is always 1.',
      labelNames: ['version', 'revision', 'nodejs_version'],
      registers: [this.registry],
    }).set({ version: VERSION, revision: REVISION, nodejs_version: process.version }, 1);
    if (options.processMetrics ?? true) collectDefaultMetrics({ register: this.registry });
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

  /**
   * Observer for one source's analytics client: request durations, retries, token requests, the
   * request budget, each series labelled `source`.
   *
   * @param source the source's name (SourceConfig.name).
   */
  clientObserver(source: string): ClientObserver {
    return {
      onResponse: ({ endpoint, status, durationSeconds }) =>
        this.upstreamRequestDuration.observe({ source, endpoint, code: status === undefined ? 'error' : String(status) }, durationSeconds),
      onRetry: ({ endpoint }) => this.upstreamRetries.inc({ source, endpoint }),
      onTokenRequest: (outcome) => this.tokenRequests.inc({ source, outcome }),
      onAttemptFailed: ({ endpoint, reason }) => this.upstreamAttemptFailures.inc({ source, endpoint, reason }),
      onRateLimit: (ratePerSecond) => this.upstreamRateLimit.set({ source }, ratePerSecond),
      onRateLimitWait: (seconds) => this.upstreamRateLimitWait.inc({ source }, seconds),
    };
  }

  /**
   * Observer for the sync runs of one source: progress counters and the batch-job gauges, every
   * sync_* series labelled `source`. The first call for a source creates its series at 0 (so
   * increase() sees the first increment): call it once per source at start.
   */
  syncObserver(source: string = DEFAULT_SOURCE): SyncObserver {
    const s = { source };
    if (!this.#syncSources.has(source)) {
      this.#syncSources.add(source);
      // Every series a source has, at 0, as an unlabelled metric starts (sync_errors_total's
      // reasons appear with their first failure).
      for (const counter of [
        this.syncRuns,
        this.syncFailures,
        this.syncRecords,
        this.syncPages,
        this.syncWindows,
        this.syncRecordsQuarantined,
        this.syncUnstableInstants,
        this.syncRecordsOutsideWindow,
        this.recordFieldsNew,
      ])
        counter.inc(s, 0);
      for (const gauge of [this.syncRunning, this.syncLastSuccess, this.syncDuration, this.syncWatermark, this.syncWindowsParked]) gauge.set(s, 0);
      for (const action of ['kept', 'replaced'] as const) this.syncWindowsShrunk.inc({ source, action }, 0);
      for (const reason of SKIP_REASONS) this.syncSkipped.inc({ source, reason }, 0);
    }
    return {
      runStarted: () => this.syncRunning.set(s, 1),
      windowCommitted: (w) => {
        this.syncWindows.inc(s);
        this.syncPages.inc(s, w.pages);
        this.syncRecords.inc(s, w.records);
        this.syncRecordsOutsideWindow.inc(s, w.outside);
        if (w.watermark !== undefined) this.syncWatermark.set(s, w.watermark / 1000);
      },
      windowShrunk: (w) => this.syncWindowsShrunk.inc({ source, action: w.action }),
      recordsQuarantined: (e) => this.syncRecordsQuarantined.inc(s, e.records),
      fieldsChanged: (e) => this.recordFieldsNew.inc(s, e.changes.length),
      unstableInstant: () => this.syncUnstableInstants.inc(s),
      pageSizeClamped: (e) => this.upstreamEffectivePageSize.set(s, e.served),
      partitionsDropped: (e) => this.retentionPartitionsDropped.inc(e.partitions.length),
      runFinished: (result: SyncResult) => this.recordRun(source, result),
    };
  }

  /** Sources {@link syncObserver} created the series of. */
  readonly #syncSources = new Set<string>();

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
    this.#syncSources.delete(source);
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

  /** The audit series of `source` at 0, for a serve that audits it (AUDIT_SCHEDULE on), so increase() and the alert see them from the start. */
  auditScheduled(source: string): void {
    this.#audit.scheduled(source);
  }

  /** Records an audit of `source` that finished (src/sync/audit/source.ts). */
  recordAudit(source: string, result: AuditResult): void {
    this.#audit.record(source, result);
  }

  /** Sets the source's parked-windows gauge from the ledger: at start, before any run, and after a tick that found the source's lock held. */
  setParkedWindows(source: string, count: number): void {
    this.syncWindowsParked.set({ source }, count);
  }

  /** Sets the source's watermark gauge from the database at start, before any run. */
  setWatermark(source: string, ms: number | undefined): void {
    if (ms !== undefined) this.syncWatermark.set({ source }, ms / 1000);
  }

  /**
   * Counts a run that could not even be recorded (the database unreachable before or while the
   * run started), so `sync_failures_total` and the sync alerts see database outages too; `err`,
   * what stopped it, is counted under its reason ({@link failureReason}) as a recorded run's is,
   * so an outage has one label whenever it hits.
   */
  recordUnrecordedFailure(source: string, durationSeconds: number, err: unknown): void {
    const s = { source };
    this.syncRunning.set(s, 0);
    this.syncRuns.inc(s);
    this.syncFailures.inc(s);
    this.syncErrors.inc({ source, reason: failureReason(err) });
    this.syncDuration.set(s, durationSeconds);
  }

  private recordRun(source: string, result: SyncResult): void {
    const s = { source };
    this.syncRunning.set(s, 0);
    if (result.status === 'locked') return;
    if (result.parkedWindows !== undefined) this.syncWindowsParked.set(s, result.parkedWindows);
    this.syncRuns.inc(s);
    this.syncDuration.set(s, result.durationSeconds);
    if (result.status === 'succeeded') this.syncLastSuccess.set(s, Date.now() / 1000);
    else if (result.status === 'failed') {
      this.syncFailures.inc(s);
      this.syncErrors.inc({ source, reason: failureReason(result.error) });
    }
  }
}
