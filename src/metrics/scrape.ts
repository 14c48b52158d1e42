/** The metrics of serve's E7 reads, per source; E7Scraper sets them. */
import { Counter, Gauge, type Registry } from 'prom-client';

export class ScrapeMetrics {
  readonly up: Gauge<'source'>;
  readonly duration: Gauge<'source'>;
  readonly samples: Gauge<'source'>;
  readonly lastSuccess: Gauge<'source'>;
  readonly errors: Counter<'source' | 'reason'>;
  readonly invalidLines: Counter<'source' | 'reason'>;
  readonly droppedFamilies: Counter<'source'>;

  /** @param cacheTtlMs METRICS_CACHE_TTL, stated in the HELP of `upstream_up` when given. */
  constructor(registry: Registry, prefix: string, cacheTtlMs: number | undefined) {
    const ttl = cacheTtlMs === undefined ? '' : `; a successful read is reused for ${cacheTtlMs / 1000}s (METRICS_CACHE_TTL)`;
    this.up = new Gauge({
      name: `${prefix}upstream_up`,
      help: `Whether the last read of the source's platform E7 Prometheus text succeeded (1) or not (0)${ttl}.`,
      labelNames: ['source'] as const,
      registers: [registry],
    });
    this.duration = new Gauge({
      name: `${prefix}upstream_scrape_duration_seconds`,
      help: 'Duration of the last read of the platform E7 Prometheus text, in seconds.',
      labelNames: ['source'] as const,
      registers: [registry],
    });
    this.samples = new Gauge({
      name: `${prefix}upstream_samples`,
      help: 'Upstream samples served in this scrape.',
      labelNames: ['source'] as const,
      registers: [registry],
    });
    this.lastSuccess = new Gauge({
      name: `${prefix}upstream_last_success_timestamp_seconds`,
      help: 'Unix time of the last successful read of the platform E7 Prometheus text.',
      labelNames: ['source'] as const,
      registers: [registry],
    });
    this.errors = new Counter({
      name: `${prefix}upstream_errors_total`,
      help:
        'Failed reads of the platform E7 Prometheus text, by reason (the same values as upstream_attempt_failures_total: timeout, network, ' +
        'http_<status>, content_type, content_encoding, invalid_body, response_too_large, token, other; limit: over UPSTREAM_SAMPLE_LIMIT, UPSTREAM_LABEL_LIMIT or UPSTREAM_LABEL_VALUE_LENGTH_LIMIT).',
      labelNames: ['source', 'reason'] as const,
      registers: [registry],
    });
    this.invalidLines = new Counter({
      name: `${prefix}upstream_invalid_lines_total`,
      help: 'Lines of the upstream Prometheus text dropped as invalid, by reason; they are never served.',
      labelNames: ['source', 'reason'] as const,
      registers: [registry],
    });
    this.droppedFamilies = new Counter({
      name: `${prefix}upstream_dropped_families_total`,
      help:
        "Upstream metric families of the source dropped because their names collide with the exporter's own, with those Prometheus " +
        "writes itself (up, scrape_*, ALERTS*), or with an earlier source's " +
        'family of another type or structure (the first source in configuration order keeps the name).',
      labelNames: ['source'] as const,
      registers: [registry],
    });
  }
}
