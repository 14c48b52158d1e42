/**
 * One sample of `serve` during a soak: what Prometheus would scrape (/metrics, /readyz), and
 * what the kernel and PostgreSQL say about the process (resident set, open descriptors,
 * database connections). Linux only: /proc is read directly.
 */
import { readdirSync, readFileSync } from 'node:fs';
import type pg from 'pg';

/** Per-source figures of one sample, read from the series labelled `source` (NaN when absent or the scrape failed). */
export interface SourceSample {
  syncRuns: number;
  syncFailures: number;
  /** sync_watermark_timestamp_seconds, in seconds since the epoch. */
  watermarkSeconds: number;
  upstreamUp: number;
  /** sync_skipped_total{reason="locked"}: ticks this replica skipped because another process held the source's lock. */
  skippedLocked: number;
  /** audit_windows_repaired_total and audit_last_run_timestamp_seconds (NaN before the first audit). */
  auditRepaired: number;
  auditLastRunSeconds: number;
  /** database_lock_waits_total: statements of its runs that waited on a lock more than 10 s. */
  lockWaits: number;
}

/** Figures of one sample; times in seconds since the soak's serve started. */
export interface Sample {
  t: number;
  /** VmRSS of serve, in bytes. */
  rssBytes: number;
  /** Entries of /proc/<pid>/fd. */
  fds: number;
  /** Sum of nodejs_active_handles over handle types, from /metrics (NaN when the scrape failed). */
  handles: number;
  /** nodejs_heap_size_used_bytes from /metrics (NaN when the scrape failed). */
  heapUsedBytes: number;
  /** Connections of serve (application_name analytics-exporter) to the soak's database, and the roles they log in as (sorted, joined by +). */
  dbConnections: number;
  dbRoles: string;
  /** sync_runs_total, sync_failures_total and sync_skipped_total from /metrics, summed over sources (NaN when the scrape failed). */
  syncRuns: number;
  syncFailures: number;
  syncSkipped: number;
  /** The HTTP status of /metrics (0 when the request failed), and its duration in milliseconds. */
  scrapeStatus: number;
  scrapeMs: number;
  /** HTTP status of /readyz (0 when the request failed). */
  readyStatus: number;
  /** retention_partitions_dropped_total (NaN when the scrape failed). */
  partitionsDropped: number;
  /** Whether the partition retention is to drop still exists (1) or not (0), asked of PostgreSQL. */
  partitionPresent: number;
  /** nodejs_eventloop_lag_max_seconds of serve (NaN when the scrape failed). */
  loopLagMaxSeconds: number;
  /** config_last_reload_success_timestamp_seconds (NaN when the scrape failed). */
  configReloadSeconds: number;
  /** By source name. */
  sources: Record<string, SourceSample>;
}

/** Scrape timeout we send in X-Prometheus-Scrape-Timeout-Seconds, as Prometheus does, in seconds. */
export const SCRAPE_TIMEOUT_SECONDS = 4;
/** The harness gives up on a scrape after this long, in milliseconds. */
const SCRAPE_ABORT_MS = 10_000;

/** Resident set size of a process from /proc/<pid>/status, in bytes; NaN when the process is gone. */
export function rssBytes(pid: number): number {
  try {
    const match = /^VmRSS:\s+(\d+)\s+kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return match ? Number(match[1]) * 1024 : Number.NaN;
  } catch {
    return Number.NaN;
  }
}

/** Open file descriptors of a process (entries of /proc/<pid>/fd); NaN when the process is gone. */
export function openFds(pid: number): number {
  try {
    return readdirSync(`/proc/${pid}/fd`).length;
  } catch {
    return Number.NaN;
  }
}

/**
 * Per metric name in a Prometheus text: the value of its sample without labels, or else the
 * sum of its labelled samples. (`nodejs_active_handles` is served by `type` only: serve leaves
 * out prom-client's `nodejs_active_handles_total`, and the sum over types is the same number.)
 * Comments and unparsable lines are skipped.
 */
export function valuesByName(text: string): Map<string, number> {
  const unlabelled = new Map<string, number>();
  const sums = new Map<string, number>();
  for (const line of text.split('\n')) {
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})?\s+(\S+)/.exec(line);
    if (!match) continue;
    const value = Number(match[3]);
    if (match[2] === undefined) unlabelled.set(match[1]!, value);
    else sums.set(match[1]!, (sums.get(match[1]!) ?? 0) + value);
  }
  for (const [name, value] of unlabelled) sums.set(name, value);
  return sums;
}

/**
 * Per metric name in a Prometheus text, per value of its `source` label: the sum of its samples
 * (over their other labels). Samples without `source` are left out.
 */
export function valuesBySource(text: string): Map<string, Map<string, number>> {
  const out = new Map<string, Map<string, number>>();
  for (const line of text.split('\n')) {
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)\{(.*)\}\s+(\S+)/.exec(line);
    if (!match) continue;
    const source = /(?:^|,)source="([^"]*)"/.exec(match[2]!);
    if (!source) continue;
    let bySource = out.get(match[1]!);
    if (bySource === undefined) out.set(match[1]!, (bySource = new Map<string, number>()));
    bySource.set(source[1]!, (bySource.get(source[1]!) ?? 0) + Number(match[3]));
  }
  return out;
}

/** Per value of `source`: the value of `name`'s sample whose label `label` is `value` (as sync_skipped_total{reason="locked"}). */
function bySourceWhere(text: string, name: string, label: string, value: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`)) continue;
    const match = /^[^{]+\{(.*)\}\s+(\S+)/.exec(line);
    if (!match || !match[1]!.includes(`${label}="${value}"`)) continue;
    const source = /(?:^|,)source="([^"]*)"/.exec(match[1]!);
    if (source) out.set(source[1]!, (out.get(source[1]!) ?? 0) + Number(match[2]));
  }
  return out;
}

/** Connections serve holds to database `dbName`, counted by PostgreSQL, and the roles they use; the harness's own connection excluded. */
export async function serveConnections(admin: pg.Client, dbName: string): Promise<{ n: number; roles: string }> {
  const { rows } = await admin.query<{ n: string; roles: string | null }>(
    `select count(*) as n, string_agg(distinct usename::text, '+' order by usename::text) as roles
       from pg_stat_activity where datname = $1 and application_name = 'analytics-exporter' and pid <> pg_backend_pid()`,
    [dbName],
  );
  return { n: Number(rows[0]!.n), roles: rows[0]!.roles ?? '' };
}

async function get(url: string, headers: Record<string, string> = {}): Promise<{ status: number; text: string; ms: number }> {
  const started = performance.now();
  try {
    const response = await fetch(url, { headers, signal: AbortSignal.timeout(SCRAPE_ABORT_MS) });
    const text = await response.text();
    return { status: response.status, text, ms: performance.now() - started };
  } catch {
    return { status: 0, text: '', ms: performance.now() - started };
  }
}

/** What a sample reads besides serve itself: its database, its sources, and whether the partition retention drops is still there. */
export interface SampleTarget {
  pid: number;
  baseUrl: string;
  admin: pg.Client;
  dbName: string;
  sources: readonly string[];
  /** Asks PostgreSQL whether the partition still exists. */
  partitionPresent: () => Promise<boolean>;
  /** The Authorization header of the scrapes (WEB_CONFIG_FILE basic auth), if any. */
  authorization?: string;
}

/**
 * Takes one sample of the `serve` of `target`.
 *
 * @param t seconds since serve started, stored in the sample.
 * @throws pg errors when the harness's own database connection fails.
 */
export async function takeSample(t: number, target: SampleTarget): Promise<Sample> {
  const { pid, baseUrl, admin, dbName } = target;
  const auth: Record<string, string> = target.authorization === undefined ? {} : { authorization: target.authorization };
  const scrape = await get(`${baseUrl}/metrics`, { 'x-prometheus-scrape-timeout-seconds': String(SCRAPE_TIMEOUT_SECONDS), ...auth });
  const ready = await get(`${baseUrl}/readyz`, auth);
  const values = scrape.status === 200 ? valuesByName(scrape.text) : new Map<string, number>();
  const metric = (name: string) => values.get(name) ?? Number.NaN;
  const perSource = scrape.status === 200 ? valuesBySource(scrape.text) : new Map<string, Map<string, number>>();
  const ofSource = (name: string, source: string) => perSource.get(name)?.get(source) ?? Number.NaN;
  const locked = bySourceWhere(scrape.status === 200 ? scrape.text : '', 'analytics_exporter_sync_skipped_total', 'reason', 'locked');
  const sources: Record<string, SourceSample> = {};
  for (const source of target.sources) {
    sources[source] = {
      syncRuns: ofSource('analytics_exporter_sync_runs_total', source),
      syncFailures: ofSource('analytics_exporter_sync_failures_total', source),
      watermarkSeconds: ofSource('analytics_exporter_sync_watermark_timestamp_seconds', source),
      upstreamUp: ofSource('analytics_exporter_upstream_up', source),
      skippedLocked: locked.get(source) ?? (scrape.status === 200 && perSource.get('analytics_exporter_sync_runs_total')?.has(source) ? 0 : Number.NaN),
      auditRepaired: ofSource('analytics_exporter_audit_windows_repaired_total', source),
      auditLastRunSeconds: ofSource('analytics_exporter_audit_last_run_timestamp_seconds', source),
      lockWaits: ofSource('analytics_exporter_database_lock_waits_total', source),
    };
  }
  return {
    t,
    rssBytes: rssBytes(pid),
    fds: openFds(pid),
    handles: metric('nodejs_active_handles'),
    heapUsedBytes: metric('nodejs_heap_size_used_bytes'),
    ...(await serveConnections(admin, dbName).then((c) => ({ dbConnections: c.n, dbRoles: c.roles }))),
    syncRuns: metric('analytics_exporter_sync_runs_total'),
    syncFailures: metric('analytics_exporter_sync_failures_total'),
    syncSkipped: metric('analytics_exporter_sync_skipped_total'),
    scrapeStatus: scrape.status,
    scrapeMs: scrape.ms,
    readyStatus: ready.status,
    partitionsDropped: metric('analytics_exporter_retention_partitions_dropped_total'),
    partitionPresent: (await target.partitionPresent()) ? 1 : 0,
    loopLagMaxSeconds: metric('nodejs_eventloop_lag_max_seconds'),
    configReloadSeconds: metric('analytics_exporter_config_last_reload_success_timestamp_seconds'),
    sources,
  };
}
