/** Renders the results as Markdown: the tables `npm run bench` prints and writes to BENCHMARKS.md. */
import { DASHBOARD_TARGET_MS, dashboardsVerdict, renderDashboards, type DashboardsResult } from '../suites/dashboards.js';
import type { ProfiledRun, EtlResult, CpuSplit } from '../suites/etl.js';
import type { SizeResult } from '../suites/growth.js';
import type { LargeScrapeResult } from '../suites/large-scrape.js';
import type { MetricsResult } from '../suites/metrics.js';
import type { PacedResult } from '../suites/paced.js';
import type { RequestsResult } from '../suites/requests.js';
import { auditMet, renderAudit, type AuditBenchResult } from '../suites/audit.js';
import { hostileVerdict, renderHostile, type HostileResult } from '../suites/hostile.js';
import { embeddedVerdict, renderEmbedded, type EmbeddedResult } from '../suites/embedded.js';
import type { SlowResult } from '../suites/slow.js';
import { memoryPerSource, type ScrapeLoad, type SourcesResult } from '../suites/sources.js';
import { renderWire, wireVerdict, type WireResult } from '../suites/wire.js';
import { cpuVerdicts, embeddedScaleVerdict, renderCpu } from './cpu-rows.js';
import { footprintVerdict, renderFootprint } from './footprint.js';
import type { Machine } from './machine.js';
import { fixed, int, median, mib, range, verdict } from './stats.js';

/** The numbers the issue sets. */
export const TARGETS = {
  /** ETL records/s with rollups and catalogue ÷ without (ROLLUP_DIMENSIONS=off, FIELD_CATALOGUE=off), at least (issue 40). */
  derivedRatio: 0.95,
  /** Peak RSS of sync, at most. */
  peakRssBytes: 256 * 2 ** 20,
  /** Peak RSS of the larger run ÷ the smaller (100,000 records), at most. */
  rssGrowth: 1.1,
  /** Seconds for 200 pages at 100 ms latency with the default concurrency, at most (scaled by pages in quick mode). */
  slowSecondsPer200Pages: 8,
  /** Per-record time and memory of a larger size ÷ the next smaller, at most (1 = linear; 10% for noise). */
  growthSlack: 1.1,
  /** E6 requests ÷ the minimum Σ max(1, ceil(records in a window ÷ pageSize)), at most. */
  requestsRatio: 1.3,
  /** /metrics scrapes/s at 50 concurrent ÷ a bare node:http server sending the same bytes, at least. */
  metricsRateRatio: 0.7,
  /** /metrics p99 at 50 concurrent ÷ the bare server's p99 in the same round, at most. */
  metricsP99Ratio: 1.5,
  /** A cached scrape with 100,000 upstream series ÷ `promtool check metrics` on the same text, at most. */
  cachedScrapeRatio: 0.2,
  /** Peak RSS of serve with 100,000 upstream series, at most. */
  servePeakRssBytes: 200 * 2 ** 20,
  /** serve's resident set per source beyond the first, (RSS(N) − RSS(1)) ÷ (N − 1), at most. */
  memoryPerSourceBytes: 10 * 2 ** 20,
  /** Scrape p99 with the most sources ÷ with one, at most, unless within {@link TARGETS.p99SlackMs} (autocannon counts whole ms). */
  p99FlatRatio: 1.5,
  p99SlackMs: 2,
};

/** `value` rounded to `digits` decimals, for bench/results.json. */
function round(value: number, digits: number): number {
  return Number(value.toFixed(digits));
}

/**
 * Our side of the comparison with a general-purpose loader (issue 27 item 4), in the shape the
 * issue measured dlt in: wall, records/s, peak RSS, database size. dlt is not on the registries
 * this machine reaches, so its figures are quoted from the issue, not measured here.
 */
function renderPeer(etl: EtlResult): string[] {
  const rss = median(etl.rounds.map((r) => r.sync.peakRssBytes));
  const bareRss = median(etl.rounds.map((r) => r.bare.peakRssBytes));
  const size = (f: { total: number } | undefined) => (f === undefined ? '–' : `${(f.total / 1e6).toFixed(0)} MB`);
  return [
    `### Beside a general-purpose loader: ${int(etl.rows)} records, ${etl.spec.days} days`,
    '',
    'Our side measured by this run (median of its rounds; database size of round 1: every table, index and TOAST of the schema). ' +
      "dlt's rows are quoted from issue 27 (measured by its author on this machine, same simulator and PostgreSQL 15, three alternating rounds); dlt is not on the registries this machine reaches, so the bench cannot run it.",
    '',
    '| Loader | wall (s) | records/s | peak RSS | database |',
    '|---|---:|---:|---:|---:|',
    `| \`sync\`, defaults (every derived table on) | ${etl.median.syncSeconds.toFixed(2)} | ${int(etl.median.syncRate)} | ${mib(rss)} | ${size(etl.footprint?.withDerived)} |`,
    `| \`sync\`, ROLLUP_DIMENSIONS=off, FIELD_CATALOGUE=off | ${etl.median.bareSeconds.toFixed(2)} | ${int(etl.median.bareRate)} | ${mib(bareRss)} | ${size(etl.footprint?.bare)} |`,
    '| dlt `rest_api`, defaults (quoted; 1,000,000 records) | 55.1 | 18,149 | – | – |',
    '| dlt, tuned as its documentation suggests (quoted; 1,000,000 records) | 33.4 | 29,940 | – | – |',
    '| dlt, eight string columns in a hand-written Arrow schema, CSV loading, unknown fields and nested values dropped (quoted; 1,000,000 records) | 9.07 | 110,254 | – | 198 MB |',
    '',
  ];
}

/** Whether a p99 with more sources is flat against the one with one source (see {@link TARGETS.p99FlatRatio}). */
export function p99Flat(oneMs: number, manyMs: number): boolean {
  return manyMs <= oneMs * TARGETS.p99FlatRatio || manyMs - oneMs <= TARGETS.p99SlackMs;
}

export interface Report {
  quick: boolean;
  machine: Machine;
  startedAt: Date;
  totalSeconds: number;
  command: string;
  /** 1-minute load averages at the start and at the end, and the share of CPU time stolen by the hypervisor, to show what else ran. */
  load: { start: number; end: number; steal: number | undefined };
  etl?: EtlResult;
  sizes?: SizeResult[];
  /** The size compared with the largest for the memory target. */
  memoryBaseRecords: number;
  /** The memory base and the largest size again, with NODE_OPTIONS. */
  /** The same sizes with V8's own heap sizing (`nodeArgs` turn off the CLI's setting, src/heap.ts), for comparison. */
  tuned?: { nodeArgs: string[]; sizes: SizeResult[] };
  slow?: SlowResult;
  metrics?: MetricsResult;
  largeScrape?: LargeScrapeResult;
  requests?: RequestsResult;
  audit?: AuditBenchResult;
  paced?: PacedResult;
  dashboards?: DashboardsResult;
  sources?: SourcesResult;
  hostile?: HostileResult;
  wire?: WireResult;
  embedded?: EmbeddedResult;
  profile?: ProfiledRun;
  findings?: string;
  /** Key figures of the code before the performance changes (bench/before.json), shown beside this run's. */
  before?: { label: string; figures: KeyFigures };
}

/** The figures compared before and after a change: name → value. */
export type KeyFigures = Record<string, number>;

/** Units and direction of the key figures, in the order they are shown. */
/** `better` is undefined for the limits, which measure the machine rather than our code. */
const KEY_FIGURES: { name: string; unit: string; digits: number; better?: 'higher' | 'lower' }[] = [
  { name: 'ETL records/s', unit: '/s', digits: 0, better: 'higher' },
  { name: 'ETL ÷ smaller limit', unit: '', digits: 2, better: 'higher' },
  { name: 'psql \\copy records/s', unit: '/s', digits: 0 },
  { name: 'fetch-only records/s', unit: '/s', digits: 0 },
  { name: 'peak RSS, memory base', unit: ' MiB', digits: 1, better: 'lower' },
  { name: 'peak RSS, ETL size', unit: ' MiB', digits: 1, better: 'lower' },
  { name: 'slow upstream, default concurrency, s', unit: ' s', digits: 2, better: 'lower' },
  { name: 'slow upstream, sequential, s', unit: ' s', digits: 2, better: 'lower' },
];

/** The figures of this run that {@link KEY_FIGURES} names. */
export function keyFigures(report: Report): KeyFigures {
  const out: KeyFigures = {};
  if (report.etl) {
    out['ETL records/s'] = report.etl.median.syncRate;
    out['ETL ÷ smaller limit'] = report.etl.median.ratio;
    out['psql \\copy records/s'] = report.etl.median.copyRate;
    out['fetch-only records/s'] = report.etl.median.fetchRate;
  }
  const base = report.sizes?.find((s) => s.records === report.memoryBaseRecords);
  const largest = report.sizes?.[report.sizes.length - 1];
  if (base) out['peak RSS, memory base'] = base.medianPeakRssBytes / 2 ** 20;
  if (largest) out['peak RSS, ETL size'] = largest.medianPeakRssBytes / 2 ** 20;
  if (report.slow) {
    out['slow upstream, default concurrency, s'] = report.slow.concurrent.medianSeconds;
    out['slow upstream, sequential, s'] = report.slow.sequential.medianSeconds;
  }
  return out;
}

/** A before/after table of the key figures both have. */
function comparison(before: KeyFigures, after: KeyFigures): string[] {
  const rows = KEY_FIGURES.filter((f) => before[f.name] !== undefined && after[f.name] !== undefined).map((f) => {
    const b = before[f.name]!;
    const a = after[f.name]!;
    const fmt = (v: number) => (f.digits === 0 ? int(v) : v.toFixed(f.digits)) + f.unit;
    const change = a / b;
    const better = f.better === 'higher' ? change > 1 : change < 1;
    const judged = f.better !== undefined && Math.abs(change - 1) >= 0.05;
    return `| ${f.name} | ${fmt(b)} | ${fmt(a)} | ×${change.toFixed(2)}${judged ? (better ? ' (better)' : ' (worse)') : ''} |`;
  });
  return ['| Figure | before | this run | change |', '|---|---:|---:|---|', ...rows];
}

/**
 * One target as bench/results.json holds it: `figure` in `unit`, judged against `target` (the
 * comparison is the target's own: at least for ratios of speed, at most for costs).
 */
export interface TargetResult {
  /** Stable name, e.g. `etl_vs_copy`. */
  id: string;
  figure: number;
  unit: string;
  /** null: reported as information, no target (met is null too). */
  target: number | null;
  met: boolean | null;
}

export interface Verdict {
  name: string;
  /** Always true for information ({@link Verdict.info}). */
  met: boolean;
  /** Reported without a target. */
  info?: boolean;
  detail: string;
  /** The row's figures for bench/results.json. */
  results?: TargetResult[];
}

/** Every target result of `report`'s verdicts, for bench/results.json. */
export function targetResults(report: Report): TargetResult[] {
  return verdicts(report).flatMap((v) => v.results ?? []);
}

function cpu(split: CpuSplit): string {
  return [split.self, split.simulator, split.postgres].map((v) => fixed(v, 1)).join(' / ');
}

export function slowTargetSeconds(pages: number): number {
  return (TARGETS.slowSecondsPer200Pages * pages) / 200;
}

/** Every target of the issue that the results allow judging. */
export function verdicts(report: Report): Verdict[] {
  const out: Verdict[] = [];
  const { etl, sizes, slow, metrics } = report;
  if (etl) {
    const smaller = Math.min(etl.median.copyRate, etl.median.fetchRate);
    // Information since issue 40: on two cores it mostly measures how the simulator and PostgreSQL share them.
    out.push({
      name: '1. ETL throughput (information)',
      met: true,
      info: true,
      detail: `${int(etl.median.syncRate)} records/s = ${etl.median.ratio.toFixed(3)} × the smaller limit (${int(smaller)}/s, ${etl.median.copyRate <= etl.median.fetchRate ? 'psql \\copy' : 'fetch-only'}); no target`,
      results: [{ id: 'etl_vs_copy', figure: round(etl.median.ratio, 3), unit: 'ratio', target: null, met: null }],
    });
    out.push(...cpuVerdicts(etl));
    out.push({
      name: '9. ETL with rollups and catalogue',
      met: etl.median.derivedRatio >= TARGETS.derivedRatio,
      detail: `${int(etl.median.syncRate)} records/s with, ${int(etl.median.bareRate)} without (ROLLUP_DIMENSIONS=off, FIELD_CATALOGUE=off): ×${etl.median.derivedRatio.toFixed(3)}; target ≥ ${TARGETS.derivedRatio}`,
      results: [
        {
          id: 'derived_with_vs_without',
          figure: round(etl.median.derivedRatio, 3),
          unit: 'ratio',
          target: TARGETS.derivedRatio,
          met: etl.median.derivedRatio >= TARGETS.derivedRatio,
        },
      ],
    });
    if (etl.footprint) out.push(footprintVerdict(etl.footprint.withDerived, etl.footprint.bare));
  }
  if (sizes && sizes.length >= 2) {
    const base = sizes.find((s) => s.records === report.memoryBaseRecords);
    const largest = sizes[sizes.length - 1]!;
    if (base && base !== largest) {
      const growth = largest.medianPeakRssBytes / base.medianPeakRssBytes;
      const peak = Math.max(base.medianPeakRssBytes, largest.medianPeakRssBytes);
      out.push({
        name: '2. Memory',
        met: peak <= TARGETS.peakRssBytes && growth <= TARGETS.rssGrowth,
        detail: `peak RSS ${mib(base.medianPeakRssBytes)} for ${int(base.records)}, ${mib(largest.medianPeakRssBytes)} for ${int(largest.records)} (×${growth.toFixed(3)}); target ≤ 256 MiB and ≤ ×${TARGETS.rssGrowth}`,
      });
    }
    let linear = true;
    const steps: string[] = [];
    for (let i = 1; i < sizes.length; i++) {
      const a = sizes[i - 1]!;
      const b = sizes[i]!;
      const time = b.microsPerRecord / a.microsPerRecord;
      const memory = b.medianPeakRssBytes / b.records / (a.medianPeakRssBytes / a.records);
      linear &&= time <= TARGETS.growthSlack && memory <= TARGETS.growthSlack;
      steps.push(`${int(a.records)}→${int(b.records)}: time/record ×${time.toFixed(2)}, memory/record ×${memory.toFixed(2)}`);
    }
    out.push({ name: '4. Growth', met: linear, detail: `${steps.join('; ')}; target ≤ ×${TARGETS.growthSlack} each (linear or better)` });
  }
  if (slow) {
    const target = slowTargetSeconds(slow.concurrent.pages);
    out.push({
      name: '3. Slow upstream',
      met: slow.concurrent.medianSeconds <= target,
      detail: `${slow.concurrent.pages} pages at ${slow.spec.latencyMs} ms in ${slow.concurrent.medianSeconds.toFixed(2)} s (sequential ${slow.sequential.medianSeconds.toFixed(2)} s); target ≤ ${target.toFixed(1)} s`,
    });
  }
  if (metrics) {
    const worst = Math.max(...metrics.rounds.map((r) => r.upstreamRequests - r.allowedUpstreamRequests));
    const failures = metrics.rounds.reduce((n, r) => n + r.serve.failures + r.bare.failures, 0);
    const ratio = median(metrics.rounds.map((r) => r.serve.scrapesPerSecond / r.bare.scrapesPerSecond));
    // Within each round, as the rate: the bare server's p99 is the machine's noise at that moment.
    const p99Ratios = metrics.rounds.map((r) => r.serve.p99Ms / r.bare.p99Ms);
    const p99Ratio = median(p99Ratios);
    const p99Met = p99Ratio <= TARGETS.metricsP99Ratio;
    out.push({
      name: '5. /metrics under load',
      met: worst <= 0 && failures === 0 && ratio >= TARGETS.metricsRateRatio && p99Met,
      detail:
        `${int(metrics.spec.scrapes)} scrapes caused ${metrics.rounds.map((r) => r.upstreamRequests).join(', ')} E7 request(s) per round (allowed ${metrics.rounds.map((r) => r.allowedUpstreamRequests).join(', ')}); ${failures} failed scrapes; ` +
        `${ratio.toFixed(2)} × the bare server's scrapes/s (median of rounds), target ≥ ${TARGETS.metricsRateRatio}; ` +
        `p99 ${p99Ratio.toFixed(2)} × the bare server's in the same round (median of ${p99Ratios.map((r) => r.toFixed(2)).join(', ')}), target ≤ ${TARGETS.metricsP99Ratio}`,
      results: [{ id: 'metrics_p99_vs_bare', figure: round(p99Ratio, 2), unit: 'ratio', target: TARGETS.metricsP99Ratio, met: p99Met }],
    });
  }
  const large = report.largeScrape;
  if (large) {
    const ratio = large.cachedTextSeconds / large.promtoolSeconds;
    out.push({
      name: '7. A large upstream',
      met: ratio <= TARGETS.cachedScrapeRatio && large.servePeakRssBytes <= TARGETS.servePeakRssBytes,
      detail:
        `${int(large.spec.series)} series: a cached scrape ${fixed(large.cachedTextSeconds * 1000, 1)} ms = ${ratio.toFixed(3)} × promtool's ${fixed(large.promtoolSeconds * 1000, 0)} ms (target ≤ ${TARGETS.cachedScrapeRatio}); ` +
        `serve peak RSS ${mib(large.servePeakRssBytes)} (target ≤ ${mib(TARGETS.servePeakRssBytes)})`,
    });
  }
  if (report.requests) {
    const rows = report.requests.rows;
    out.push({
      name: '6. Requests per window',
      met: rows.every((r) => r.ratio <= TARGETS.requestsRatio),
      detail: `${rows.map((r) => `${r.ratio.toFixed(2)}× the minimum (${int(r.requests)} of ${int(r.minimum)})`).join('; ')}; target ≤ ${TARGETS.requestsRatio}× each`,
    });
  }
  if (report.dashboards) {
    const v = dashboardsVerdict(report.dashboards);
    out.push({ name: `9. Dashboard queries ≤ ${DASHBOARD_TARGET_MS} ms, flat`, met: v.met, detail: v.detail });
  }
  if (report.sources) out.push(sourcesVerdict(report.sources));
  if (report.audit) {
    const rows = report.audit.rows;
    out.push({
      name: '11. The audit',
      met: auditMet(report.audit),
      detail: `${rows.map((r) => `k=${r.drifted}: ${r.requests} of ${r.budget}`).join('; ')} E6 requests (budget 20 with no drift, 1 + 2·k·⌈log2 n⌉ with k)`,
    });
  }
  if (report.hostile) out.push({ name: '12. Hostile clients', ...hostileVerdict(report.hostile) });
  if (report.wire) out.push(wireVerdict(report.wire));
  if (report.embedded) out.push(embeddedVerdict(report.embedded), embeddedScaleVerdict(report.embedded, etl));
  return out.sort((a, b) => a.name.localeCompare(b.name));
}

/** 10.: memory per extra source after warm-up (at the most sources), and warm /metrics and /probe p99 flat from the fewest sources to the most. */
export function sourcesVerdict(result: SourcesResult): Verdict {
  const perSource = memoryPerSource(result, (row) => row.rssWarmBytes);
  // Judged at the most sources: the RSS of one serve moves by several MiB with the moment of its
  // last GC, which divided by N − 1 weighs least there.
  const judged = perSource[perSource.length - 1]!;
  const one = result.rows[0]!;
  const most = result.rows[result.rows.length - 1]!;
  const memoryMet = judged.bytes <= TARGETS.memoryPerSourceBytes;
  const metricsFlat = p99Flat(one.warm.p99Ms, most.warm.p99Ms);
  const probeFlat = p99Flat(one.probe.p99Ms, most.probe.p99Ms);
  return {
    name: '10. Several sources',
    met: memoryMet && metricsFlat && probeFlat,
    detail:
      `serve RSS after warm-up ${result.rows.map((r) => `${mib(r.rssWarmBytes)} with ${r.sources}`).join(', ')}: ${perSource.map((p) => `${mib(p.bytes)} per extra source at ${p.sources}`).join(', ')} (target ≤ ${mib(TARGETS.memoryPerSourceBytes)} at ${judged.sources}); ` +
      `p99 ${one.sources} → ${most.sources} sources at ${result.spec.connections} connections, cached: /metrics ${one.warm.p99Ms} → ${most.warm.p99Ms} ms (×${(most.warm.p99Ms / one.warm.p99Ms).toFixed(2)}), ` +
      `/probe ${one.probe.p99Ms} → ${most.probe.p99Ms} ms (×${(most.probe.p99Ms / one.probe.p99Ms).toFixed(2)}); target flat: ≤ ×${TARGETS.p99FlatRatio} or within ${TARGETS.p99SlackMs} ms`,
    results: [
      // The ratio is the figure; a p99 within the slack of the one-source p99 meets the target at any ratio.
      { id: 'sources_p99_ratio', figure: round(most.warm.p99Ms / one.warm.p99Ms, 2), unit: 'ratio', target: TARGETS.p99FlatRatio, met: metricsFlat },
      { id: 'sources_memory_per_source', figure: judged.bytes, unit: 'bytes', target: TARGETS.memoryPerSourceBytes, met: memoryMet },
    ],
  };
}

function scrapeCells(load: ScrapeLoad): string {
  return `${load.p50Ms} / ${load.p99Ms} | ${load.meanMs.toFixed(2)} | ${(load.cpuSecondsPerScrape * 1000).toFixed(2)}`;
}

/** Section 10's tables. */
export function renderSources(result: SourcesResult): string[] {
  const { spec } = result;
  const perWarm = memoryPerSource(result, (row) => row.rssWarmBytes);
  const perAfter = memoryPerSource(result, (row) => row.rssAfterBytes);
  const perPeak = memoryPerSource(result, (row) => row.peakRssBytes);
  const perHeap = memoryPerSource(result, (row) => row.heapUsedBytes);
  const loads = result.rows.flatMap((row) => row.rounds.map((r) => r.load));
  return [
    '## 10. Several sources: 1, 4 and 16',
    '',
    `\`serve\` with CONFIG_FILE listing ${spec.counts.join(', ')} sources, each its own simulator in the bench process (own seed, client id and secret file, the default ${result.seriesPerSource} E7 series: 7 event types × 12 customers) and one label; SYNC_SCHEDULE off, migrations applied beforehand, so the figures are about serving. ` +
      `${spec.rounds} rounds, the counts interleaved within each. Per count and round, a fresh warm \`serve\` (METRICS_CACHE_TTL 1h): ${spec.warmupScrapes} sequential /metrics and /probe scrapes, its VmRSS; then ${int(spec.scrapes)} /metrics and ${int(spec.scrapes)} /probe?source=s01 scrapes at ${spec.connections} connections (autocannon, as in section 5), VmRSS and VmHWM after them. ` +
      `Then a fresh cold \`serve\` (METRICS_CACHE_TTL 0): ${int(spec.coldScrapes)} sequential /metrics scrapes, each reading every source's E7, merging and serialising. CPU is serve's user + system time from /proc/<pid>/stat around each load ÷ scrapes. Medians of the rounds; 1-minute load average at the rounds' starts ${Math.min(...loads).toFixed(2)}–${Math.max(...loads).toFixed(2)}.`,
    '',
    '| Sources | upstream samples per scrape | /metrics bytes | /probe bytes | RSS after warm-up | V8 heap used after warm-up | RSS after scrapes | peak RSS (VmHWM) | load avg per round |',
    '|---:|---:|---:|---:|---:|---:|---:|---:|---|',
    ...result.rows.map((row) => {
      const r0 = row.rounds[0]!;
      return `| ${row.sources} | ${int(r0.upstreamSamples)} (${row.sources} × ${result.seriesPerSource}) | ${int(r0.metricsBytes)} | ${int(r0.probeBytes)} | ${mib(row.rssWarmBytes)} | ${mib(row.heapUsedBytes)} | ${mib(row.rssAfterBytes)} | ${mib(row.peakRssBytes)} | ${row.rounds.map((r) => r.load.toFixed(2)).join(', ')} |`;
    }),
    '',
    `Memory per extra source, (RSS(N) − RSS(1)) ÷ (N − 1): after warm-up ${perWarm.map((p) => `**${mib(p.bytes)}** at ${p.sources}`).join(', ')}; after the scrapes ${perAfter.map((p) => `${mib(p.bytes)} at ${p.sources}`).join(', ')}; peak ${perPeak.map((p) => `${mib(p.bytes)} at ${p.sources}`).join(', ')}; V8 heap used (nodejs_heap_size_used_bytes, garbage included) ${perHeap.map((p) => `${mib(p.bytes)} at ${p.sources}`).join(', ')} (target ≤ ${mib(TARGETS.memoryPerSourceBytes)}).`,
    '',
    '| Sources | /metrics cached p50 / p99 ms | mean ms | CPU ms per scrape | /probe cached p50 / p99 ms | mean ms | CPU ms per probe | bare server, same /metrics bytes, p50 / p99 ms | /metrics cold p50 / p99 ms | mean ms | CPU ms per scrape | E7 requests (cold) |',
    '|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
    ...result.rows.map(
      (row) =>
        `| ${row.sources} | ${scrapeCells(row.warm)} | ${scrapeCells(row.probe)} | ${row.bare.p50Ms} / ${row.bare.p99Ms} | ${scrapeCells(row.cold)} | ${int(row.cold.upstreamRequests)} (${int(spec.coldScrapes)} × ${row.sources}) |`,
    ),
    '',
    `Per round, /metrics cached p99 ms: ${result.rows.map((row) => `${row.sources}: ${row.rounds.map((r) => r.warm.p99Ms).join(', ')}`).join('; ')}; /probe p99 ms: ${result.rows.map((row) => `${row.sources}: ${row.rounds.map((r) => r.probe.p99Ms).join(', ')}`).join('; ')}; bare server p99 ms: ${result.rows.map((row) => `${row.sources}: ${row.rounds.map((r) => r.bare.p99Ms).join(', ')}`).join('; ')}. ` +
      "autocannon counts latency in whole milliseconds and ends a run on its one-second tick, so the mean (not whole) stands in for throughput: at a fixed concurrency, scrapes/s ≈ connections ÷ mean. The bare server's p99 shows the machine's own noise (other processes on the two cores) at that moment.",
    '',
  ];
}

export function renderMarkdown(report: Report): string {
  const lines: string[] = [];
  const push = (...more: string[]) => lines.push(...more);
  const m = report.machine;
  push(
    '# Benchmarks',
    '',
    `Generated by \`${report.command}\` (bench/run.ts) on ${report.startedAt.toISOString()}; the run took ${Math.round(report.totalSeconds)} s. Mode: **${report.quick ? 'quick' : 'full'}**${report.quick ? ' (smaller sizes and fewer runs than the issue asks; the committed file is a full run)' : ''}.`,
    '',
    '| Machine | |',
    '|---|---|',
    `| CPU | ${m.cpu} |`,
    `| Cores | ${m.cores} |`,
    `| Memory | ${m.memory} |`,
    `| OS | ${m.os} |`,
    `| Node.js | ${m.node} |`,
    `| PostgreSQL | ${m.postgres} |`,
    `| psql | ${m.psql} |`,
    `| Load average (1 min) at start / end | ${report.load.start.toFixed(2)} / ${report.load.end.toFixed(2)} (the bench itself keeps about 1.5 cores busy) |`,
    `| CPU time stolen by the hypervisor during the run | ${report.load.steal === undefined ? 'n/a' : `${(report.load.steal * 100).toFixed(1)}%`} (time the VM's cores waited for the host: other guests' load) |`,
    '',
    'Every figure is the median of the runs named beside it; a ratio is taken within each round (the ETL and both limits measured back to back) and its median reported. ' +
      '`sync` and `serve` run as child processes of the built CLI (`node dist/cli.js …`), the simulator as another (`node dist/cli.js simulate`; in the /metrics benchmark it runs in the bench process, whose request counters are read), ' +
      'PostgreSQL is a throwaway cluster on loopback (test/helpers/postgres.ts: fsync, synchronous_commit and full_page_writes off). ' +
      "All of them share the machine's cores: a sync's figure includes the simulator generating pages and PostgreSQL storing them on the same two cores.",
    '',
    '## Targets',
    '',
    '| Target | Result | |',
    '|---|---|---|',
    ...verdicts(report).map((v) => `| ${v.name} | ${v.detail} | ${v.info === true ? 'information' : verdict(v.met)} |`),
    '',
  );

  const { etl } = report;
  if (etl) {
    const r0 = etl.rounds[0]!;
    push(
      `## 1. ETL throughput: ${int(etl.rows)} records`,
      '',
      `Simulator at zero latency, ${etl.spec.days} one-day windows (SYNC_WINDOW=1d), ${int(r0.pages)} pages of up to 1000 records, default SYNC_CONCURRENCY; ${etl.rounds.length} rounds, each into a fresh database.`,
      '',
      '| Measurement | records/s (median) | seconds (median) | range of seconds | CPU seconds: own / simulator / PostgreSQL (round 1) |',
      '|---|---:|---:|---:|---|',
      `| ETL: \`sync\` end to end (process start to exit) | **${int(etl.median.syncRate)}** | ${etl.median.syncSeconds.toFixed(2)} | ${range(
        etl.rounds.map((r) => r.sync.wallSeconds),
        2,
      )} | ${cpu(r0.syncCpu)} |`,
      `| Store's limit: \`psql \\copy\` of the same rows into an identical \`records\` table | ${int(etl.median.copyRate)} | ${etl.median.copySeconds.toFixed(2)} | ${range(
        etl.rounds.map((r) => r.copySeconds),
        2,
      )} | – / – / ${fixed(r0.copyCpu.postgres, 1)} |`,
      `| Upstream's limit: fetch only (same client, window reader and windows; pages discarded) | ${int(etl.median.fetchRate)} | ${etl.median.fetchSeconds.toFixed(2)} | ${range(
        etl.rounds.map((r) => r.fetchSeconds),
        2,
      )} | ${cpu(r0.fetchCpu)} |`,
      `| ETL without rollups and catalogue: \`sync\` with ROLLUP_DIMENSIONS=off, FIELD_CATALOGUE=off | ${int(etl.median.bareRate)} | ${etl.median.bareSeconds.toFixed(2)} | ${range(
        etl.rounds.map((r) => r.bare.wallSeconds),
        2,
      )} | ${cpu(r0.bareCpu)} |`,
      '',
      `ETL with ÷ without rollups and catalogue (records_hourly, records_hourly_distinct, record_fields, records_typed), per round: ${etl.rounds.map((r) => r.derivedRatio.toFixed(2)).join(', ')}; ` +
        `median **${etl.median.derivedRatio.toFixed(3)}** (target ≥ ${TARGETS.derivedRatio}).`,
      '',
      `ETL ÷ the smaller limit, per round: ${etl.rounds.map((r) => r.ratio.toFixed(2)).join(', ')}; median **${etl.median.ratio.toFixed(3)}** (information, no target: on two cores it mostly measures how the simulator and PostgreSQL share them). ` +
        `The sync's own summary line, which times the run without process start, configuration and migrations, says ${int(median(etl.rounds.map((r) => Number(r.sync.summary?.recordsPerSecond ?? 0))))} records/s (median); the ratio uses the end-to-end figure.`,
      '',
    );
    push(...renderCpu(etl));
    if (etl.footprint) push(...renderFootprint(etl.footprint.withDerived, etl.footprint.bare));
    push(...renderPeer(etl));
  }

  const { sizes } = report;
  if (sizes) {
    push(
      '## 2. Memory and 4. Growth',
      '',
      "Peak RSS is the kernel's high-water mark of the `sync` process (VmHWM in /proc/<pid>/status, read at exit by a preloaded module, bench/lib/exit-stats.mjs). Same days and windows for every size, zero latency, each run into a fresh database." +
        (etl ? ` The ${int(etl.rows)} row is the ETL benchmark's sync runs.` : ''),
      '',
      '| Records | runs | seconds (median) | range | µs per record | peak RSS (median) | range of peak RSS |',
      '|---:|---:|---:|---:|---:|---:|---:|',
      ...sizes.map(
        (s) =>
          `| ${int(s.records)} | ${s.runs.length} | ${s.medianSeconds.toFixed(2)} | ${range(
            s.runs.map((r) => r.wallSeconds),
            2,
          )} | ${s.microsPerRecord.toFixed(2)} | ${mib(s.medianPeakRssBytes)} | ${range(
            s.runs.map((r) => r.peakRssBytes / 2 ** 20),
            1,
          )} MiB |`,
      ),
      '',
    );
  }

  const { tuned } = report;
  if (tuned) {
    const [base, largest] = tuned.sizes;
    push(
      `For comparison, V8's own heap sizing (\`node ${tuned.nodeArgs.join(' ')} dist/cli.js sync\`: an operator's heap flag turns off the CLI's heap-growing setting, src/heap.ts):`,
      '',
      '| Records | runs | seconds (median) | peak RSS (median) | range of peak RSS |',
      '|---:|---:|---:|---:|---:|',
      ...tuned.sizes.map(
        (s) =>
          `| ${int(s.records)} | ${s.runs.length} | ${s.medianSeconds.toFixed(2)} | ${mib(s.medianPeakRssBytes)} | ${range(
            s.runs.map((r) => r.peakRssBytes / 2 ** 20),
            1,
          )} MiB |`,
      ),
      '',
      ...(base && largest
        ? [`Peak RSS of the larger run ÷ the smaller with V8's own sizing: ×${(largest.medianPeakRssBytes / base.medianPeakRssBytes).toFixed(3)}.`, '']
        : []),
    );
  }

  const { slow } = report;
  if (slow) {
    push(
      `## 3. Slow upstream: ${slow.spec.latencyMs} ms per request`,
      '',
      `${int(slow.spec.records)} records in ${slow.spec.days} one-day windows (${slow.concurrent.pages} pages of 1000); the simulator waits ${slow.spec.latencyMs} ms before answering every request, the token request included. Wall time of the \`sync\` process.`,
      '',
      '| Concurrency | runs | seconds (median) | range | records/s | target |',
      '|---|---:|---:|---:|---:|---|',
      ...[slow.concurrent, slow.sequential].map(
        (v) =>
          `| ${v.label} | ${v.runs.length} | ${v.medianSeconds.toFixed(2)} | ${range(
            v.runs.map((r) => r.wallSeconds),
            2,
          )} | ${int(slow.spec.records / v.medianSeconds)} | ${v === slow.concurrent ? `≤ ${slowTargetSeconds(v.pages).toFixed(1)} s` : '(reference)'} |`,
      ),
      '',
      `Speed-up of the default concurrency over sequential paging: ×${(slow.sequential.medianSeconds / slow.concurrent.medianSeconds).toFixed(2)}.`,
      '',
    );
  }

  const { metrics } = report;
  if (metrics) {
    const s = metrics.median.serve;
    const b = metrics.median.bare;
    push(
      '## 5. /metrics under load',
      '',
      `${int(metrics.spec.scrapes)} scrapes, ${metrics.spec.connections} connections at once (autocannon, keep-alive), ${metrics.rounds.length} rounds; each round starts a fresh \`serve\` (empty cache, METRICS_CACHE_TTL ${metrics.cacheTtlMs / 1000}s, SYNC_SCHEDULE=off), scrapes it once (its first scrape waits for the token and the E7 read: ${metrics.rounds.map((r) => `${r.coldMs.toFixed(0)} ms`).join(', ')} per round, not in the load's latencies), puts the load on it, and then a bare \`node:http\` server answering the ${int(metrics.median.bodyBytes)} bytes that \`serve\` answered in that round. autocannon measures latency in whole milliseconds.`,
      '',
      '| Server | p50 ms | p99 ms | scrapes/s | E7 requests caused | failed scrapes |',
      '|---|---:|---:|---:|---:|---:|',
      `| \`serve\` /metrics | ${s.p50Ms} | ${s.p99Ms} | ${int(s.scrapesPerSecond)} | ${metrics.rounds.map((r) => r.upstreamRequests).join(', ')} (allowed ${metrics.rounds.map((r) => r.allowedUpstreamRequests).join(', ')}) | ${s.failures} |`,
      `| bare \`node:http\`, same bytes | ${b.p50Ms} | ${b.p99Ms} | ${int(b.scrapesPerSecond)} | – | ${b.failures} |`,
      '',
      `\`serve\` answers at ${(s.scrapesPerSecond / b.scrapesPerSecond).toFixed(2)} × the bare server's rate. Per round (serve / bare scrapes/s): ${metrics.rounds.map((r) => `${int(r.serve.scrapesPerSecond)} / ${int(r.bare.scrapesPerSecond)}`).join(', ')}; (serve / bare p99 ms): ${metrics.rounds.map((r) => `${r.serve.p99Ms} / ${r.bare.p99Ms}`).join(', ')}; token requests (E0): ${metrics.rounds.map((r) => r.tokenRequests).join(', ')}.`,
      '',
    );
  }

  const large = report.largeScrape;
  if (large) {
    push(
      '## 7. A large upstream: 100,000 series',
      '',
      `E7 answers ${int(large.spec.series)} series (${fixed(large.upstreamBytes / 1e6, 1)} MB of text, no HELP or TYPE, as the platform sends it) from a small server in the bench process; \`serve\` runs with METRICS_CACHE_TTL 1h, so every scrape after the first is served from the cache. ${large.spec.rounds} rounds, each with a fresh \`serve\`: one cold scrape, then ${large.spec.scrapes} cached scrapes per format, sequential, timed from request to last byte (\`fetch\` in the bench process). \`promtool check metrics\` reads the same text from stdin, ${large.spec.promtoolRuns} runs. Peak RSS is each \`serve\`'s VmHWM after its scrapes; the largest of the rounds is judged.`,
      '',
      '| Figure | value |',
      '|---|---:|',
      `| first scrape (E7 read, parse, serialise, send; median) | ${fixed(large.firstScrapeSeconds * 1000, 0)} ms |`,
      `| cached scrape, text 0.0.4 (median; range) | ${fixed(large.cachedTextSeconds * 1000, 1)} ms (${fixed(large.cachedTextRange[0] * 1000, 1)}–${fixed(large.cachedTextRange[1] * 1000, 1)}) |`,
      `| cached scrape, OpenMetrics (median) | ${fixed(large.cachedOpenMetricsSeconds * 1000, 1)} ms |`,
      `| \`promtool check metrics\` (median; range) | ${fixed(large.promtoolSeconds * 1000, 0)} ms (${fixed(large.promtoolRange[0] * 1000, 0)}–${fixed(large.promtoolRange[1] * 1000, 0)}) |`,
      `| cached scrape ÷ promtool | **${(large.cachedTextSeconds / large.promtoolSeconds).toFixed(3)}** (target ≤ ${TARGETS.cachedScrapeRatio}) |`,
      `| body size | ${int(large.bodyBytes)} bytes |`,
      `| \`serve\` peak RSS, largest of the rounds | **${mib(large.servePeakRssBytes)}** (target ≤ ${mib(TARGETS.servePeakRssBytes)}); per round ${large.servePeakRssRounds.map((b) => (b / 2 ** 20).toFixed(1)).join(', ')} MiB |`,
      '',
    );
  }

  const { requests } = report;
  if (requests) {
    push(
      '## 6. Requests per window',
      '',
      'The sync takes every record from a slice that E6 answers completely in one page (pageNumber 1, `totalRecords` ≤ pageSize), so that no record depends on the order E6 returns records in; a window that does not fit is split by time (src/sync/read/slices.ts). ' +
        'The minimum is Σ over windows of max(1, ceil(records in the window ÷ pageSize)): what exact offset paging of the same windows needs, and the least any reader of one page per request needs. ' +
        "Each set is read through the sync's own window reader (bench/lib/reader.ts: the sync's configuration, pages discarded) from a fresh start, with nothing learned from a ledger; the simulator runs in the bench process and its own count of E6 requests must equal the reader's.",
      '',
      '| Data set | windows | records | minimum | requests | ÷ minimum | first window | splits | instants | seconds |',
      '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
      ...requests.rows.map(
        (r) =>
          `| ${r.set.name} | ${int(r.windows)} | ${int(r.records)} | ${int(r.minimum)} | ${int(r.requests)} | **${r.ratio.toFixed(3)}** | ${int(r.firstWindow)} | ${int(r.splits)} | ${int(r.instants)} | ${r.seconds.toFixed(2)} |`,
      ),
      '',
      '"first window": its requests; it has nothing to plan from (no earlier window, no ledger), so it is asked whole and split from the oversized answer. Later windows are planned from the counts and the spread of the windows read before.',
      '',
    );
  }

  const { paced } = report;
  if (paced) {
    const { spec } = paced;
    push(
      "## 8. Paced backfill under the simulator's rate limit",
      '',
      `\`sync\` of ${int(spec.records)} records in ${spec.days} one-day windows (pageSize ${spec.pageSize}, SYNC_CONCURRENCY 4) against a simulator that lets ${spec.limit.perSecond} E6/E7 requests a second through (burst ${spec.limit.burst}) and answers 429 with \`Retry-After\` beyond it; its bucket starts full for each run. ` +
        'With a request budget under the limit (UPSTREAM_RATE_LIMIT, UPSTREAM_RATE_BURST), and without one. Wall time of the `sync` process; 429s counted by the simulator.',
      '',
      '| Variant | wall s (median) | runs | E6 requests | answered 429 | records/s |',
      '|---|---:|---:|---:|---:|---:|',
      ...paced.variants.map(
        (v) =>
          `| ${v.label} | **${v.medianSeconds.toFixed(2)}** (${v.runs.map((r) => r.run.wallSeconds.toFixed(2)).join(', ')}) | ${v.runs.length} | ${int(v.requests)} | ${int(v.tooManyRequests)} | ${int(spec.records / v.medianSeconds)} |`,
      ),
      '',
    );
  }

  if (report.dashboards) push(...renderDashboards(report.dashboards));
  if (report.sources) push(...renderSources(report.sources));
  if (report.audit) push(...renderAudit(report.audit));
  if (report.hostile) push(...renderHostile(report.hostile));
  if (report.wire) push(...renderWire(report.wire));
  if (report.embedded) push(...renderEmbedded(report.embedded));

  const { profile } = report;
  if (profile) {
    const p = profile.profile;
    push(
      '## CPU profile of one ETL run',
      '',
      `\`node --cpu-prof\` of one more \`sync\` of the ETL size (${profile.run.wallSeconds.toFixed(2)} s under the profiler): ${Math.round(p.totalMs)} ms sampled, of which ${Math.round(p.idleMs)} ms idle (waiting for PostgreSQL and the upstream) and ${Math.round(p.gcMs)} ms garbage collection. Self time of the busiest functions:`,
      '',
      '| Function | self ms | share |',
      '|---|---:|---:|',
      ...p.top.map((f) => `| \`${f.name.replaceAll('|', '\\|')}\` | ${Math.round(f.selfMs)} | ${(f.share * 100).toFixed(1)}% |`),
      '',
    );
  }

  if (report.before) {
    push(`## Before and after the performance changes`, '', `${report.before.label}`, '', ...comparison(report.before.figures, keyFigures(report)), '');
  }
  if (report.findings) push(report.findings.trim(), '');
  return `${lines.join('\n')}\n`;
}
