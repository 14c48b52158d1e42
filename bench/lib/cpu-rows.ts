/**
 * 13. CPU per million records and 17. E6 requests ÷ pages needed, from the ETL's rounds: the sync
 * process, PostgreSQL (every process of the cluster, bench/lib/cpu.ts), the simulator, fetch-only
 * and the bare floor (bench/lib/bare-client.mjs), each the median of the interleaved rounds with
 * its range. Also the embedded rows of issue 40 item 5, set against the ETL's sync.
 */
import type { EmbeddedResult } from '../suites/embedded.js';
import type { CpuSplit, EtlResult, EtlRound } from '../suites/etl.js';
import type { Verdict } from './report.js';
import { fixed, int, median, mib } from './stats.js';

/** Issue 40's targets: CPU seconds per 1,000,000 records at most, and ratios. */
export const CPU_TARGETS = {
  sync: 3.0,
  postgres: 4.0,
  /** Sync + PostgreSQL. */
  total: 7.0,
  fetchOnly: 2.2,
  /** E6 requests of the sync ÷ the pages the data needs, at most. */
  requestsVsPages: 1.1,
  /** Peak RSS of a 1,000,000-record sync into PGlite, MiB, at most. */
  embeddedPeakRssMiB: 400,
  /** Records/s into PGlite ÷ records/s into PostgreSQL (the ETL's sync), at least. */
  embeddedVsPostgresSpeed: 0.5,
};

interface Row {
  id: string;
  label: string;
  /** The round's CPU seconds, or undefined when it could not be read. */
  pick: (r: EtlRound) => number | undefined;
  target?: number;
}

const sum = (...values: (number | undefined)[]) => (values.some((v) => v === undefined) ? undefined : values.reduce<number>((a, b) => a + b!, 0));

const ROWS: Row[] = [
  { id: 'sync_cpu_s_per_million', label: '`sync` process (every derived table on)', pick: (r) => r.syncCpu.self, target: CPU_TARGETS.sync },
  {
    id: 'postgres_cpu_s_per_million',
    label: 'PostgreSQL during that sync (every process of the cluster)',
    pick: (r) => r.syncCpu.postgres,
    target: CPU_TARGETS.postgres,
  },
  { id: 'total_cpu_s_per_million', label: 'sync + PostgreSQL', pick: (r) => sum(r.syncCpu.self, r.syncCpu.postgres), target: CPU_TARGETS.total },
  { id: 'simulator_cpu_s_per_million', label: 'simulator during that sync', pick: (r) => r.syncCpu.simulator },
  {
    id: 'fetch_only_cpu_s_per_million',
    label: 'fetch-only (our client and window reader, pages discarded)',
    pick: (r) => r.fetchCpu.self,
    target: CPU_TARGETS.fetchOnly,
  },
  { id: 'bare_floor_cpu_s_per_million', label: 'bare floor (undici + JSON.parse of the same pages, 4 at a time)', pick: (r) => r.floorCpu.self },
];

interface Spread {
  median: number;
  min: number;
  max: number;
  rounds: number[];
}

function spread(values: number[]): Spread | undefined {
  if (values.length === 0) return undefined;
  return { median: median(values), min: Math.min(...values), max: Math.max(...values), rounds: values };
}

/** A row's figures per 1,000,000 records over the rounds whose reading was defined. */
function perMillion(etl: EtlResult, pick: (r: EtlRound) => number | undefined): Spread | undefined {
  return spread(
    etl.rounds.flatMap((r) => {
      const v = pick(r);
      return v === undefined ? [] : [(v / etl.rows) * 1e6];
    }),
  );
}

function requestsVsPages(etl: EtlResult): Spread | undefined {
  return spread(etl.rounds.filter((r) => r.pagesNeeded > 0).map((r) => r.syncRequests / r.pagesNeeded));
}

const describe = (s: Spread, digits: number) => `${s.median.toFixed(digits)} (${s.min.toFixed(digits)}–${s.max.toFixed(digits)})`;

/** 13a–d and 17: one verdict per targeted row, each with its bench/results.json row. */
export function cpuVerdicts(etl: EtlResult): Verdict[] {
  const out: Verdict[] = [];
  const loads = etl.rounds.map((r) => r.load.toFixed(2)).join(', ');
  ROWS.filter((row) => row.target !== undefined).forEach((row, i) => {
    const s = perMillion(etl, row.pick);
    if (s === undefined) return;
    const met = s.median <= row.target!;
    out.push({
      name: `13${'abcd'[i]}. CPU per million: ${row.label.replaceAll('`', '')}`,
      met,
      detail: `${describe(s, 2)} CPU s per 1,000,000 records, median (range) of ${s.rounds.length} rounds (load ${loads}); target ≤ ${row.target}`,
      results: [{ id: row.id, figure: Number(s.median.toFixed(2)), unit: 'CPU seconds', target: row.target!, met }],
    });
  });
  const ratio = requestsVsPages(etl);
  if (ratio !== undefined) {
    const r0 = etl.rounds[0]!;
    const met = ratio.median <= CPU_TARGETS.requestsVsPages;
    out.push({
      name: '17. E6 requests ÷ pages needed',
      met,
      detail: `${describe(ratio, 3)}: ${int(r0.syncRequests)} E6 requests of the sync (the simulator's count) for ${int(r0.pagesNeeded)} pages (Σ max(1, ⌈records in a window ÷ 1000⌉)) in round 1; target ≤ ${CPU_TARGETS.requestsVsPages}`,
      results: [{ id: 'requests_vs_pages', figure: Number(ratio.median.toFixed(3)), unit: 'ratio', target: CPU_TARGETS.requestsVsPages, met }],
    });
  }
  return out;
}

/** 18. The embedded default at scale: peak RSS, and its speed against the ETL's sync into PostgreSQL (when the ETL ran). */
export function embeddedScaleVerdict(embedded: EmbeddedResult, etl: EtlResult | undefined): Verdict {
  const s = embedded.scale;
  const rssMiB = s.run.peakRssBytes / 2 ** 20;
  const rssMet = rssMiB <= CPU_TARGETS.embeddedPeakRssMiB;
  const results: NonNullable<Verdict['results']> = [
    { id: 'embedded_peak_rss_mib', figure: Number(rssMiB.toFixed(1)), unit: 'MiB', target: CPU_TARGETS.embeddedPeakRssMiB, met: rssMet },
  ];
  let speed = 'no ETL in this run to compare with';
  let speedMet = true;
  if (etl !== undefined && etl.rows === s.records) {
    const ratio = s.records / s.run.wallSeconds / etl.median.syncRate;
    speedMet = ratio >= CPU_TARGETS.embeddedVsPostgresSpeed;
    speed = `${int(s.records / s.run.wallSeconds)} records/s into PGlite ÷ ${int(etl.median.syncRate)} into PostgreSQL (the ETL's median) = ×${ratio.toFixed(3)} (target ≥ ${CPU_TARGETS.embeddedVsPostgresSpeed})`;
    results.push({
      id: 'embedded_vs_postgres_speed',
      figure: Number(ratio.toFixed(3)),
      unit: 'ratio',
      target: CPU_TARGETS.embeddedVsPostgresSpeed,
      met: speedMet,
    });
  }
  return {
    name: '18. Embedded default at scale',
    met: rssMet && speedMet,
    detail: `${int(s.records)} records into PGlite: peak RSS ${mib(s.run.peakRssBytes)} (target ≤ ${CPU_TARGETS.embeddedPeakRssMiB} MiB); ${speed}`,
    results,
  };
}

function cells(split: (r: EtlRound) => CpuSplit, etl: EtlResult): string {
  return etl.rounds.map((r) => fixed(split(r).simulator === undefined ? undefined : (split(r).simulator! / etl.rows) * 1e6, 2)).join(', ');
}

/** The CPU section of BENCHMARKS.md. */
export function renderCpu(etl: EtlResult): string[] {
  const lines = [
    `### CPU per ${int(1e6)} records`,
    '',
    `CPU seconds (user + system) scaled to 1,000,000 records from the ${int(etl.rows)}-record rounds above; within each round the measurements run back to back (\\copy, fetch-only, bare floor, sync, sync without derived tables), so the rounds interleave them. ` +
      "The sync's own: its VmHWM/cpuUsage at exit (bench/lib/exit-stats.mjs), process start and migrations included. " +
      "PostgreSQL's: every process of the throwaway cluster, read from /proc before and after the sync: utime + stime of the postmaster and of each process whose parent it is (backends, zombies not yet reaped, checkpointer, WAL writer, autovacuum, parallel workers), plus the postmaster's cutime + cstime (the children it has reaped, backends of closed connections); the scan is repeated when a child is reaped during it (bench/lib/cpu.ts). " +
      "The simulator's: its /proc/<pid>/stat before and after. fetch-only and the bare floor: their own process.cpuUsage() at the end (node start included; the bare floor runs without tsx).",
    '',
    '| Process | median CPU s per 1,000,000 | range | per round | target |',
    '|---|---:|---:|---|---:|',
  ];
  for (const row of ROWS) {
    const s = perMillion(etl, row.pick);
    lines.push(
      `| ${row.label} | ${s === undefined ? 'n/a' : `**${s.median.toFixed(2)}**`} | ${s === undefined ? '–' : `${s.min.toFixed(2)}–${s.max.toFixed(2)}`} | ${s?.rounds.map((v) => v.toFixed(2)).join(', ') ?? '–'} | ${row.target === undefined ? '–' : `≤ ${row.target}`} |`,
    );
  }
  const ratio = requestsVsPages(etl);
  lines.push(
    '',
    `Simulator CPU per million while fetch-only read, per round: ${cells((r) => r.fetchCpu, etl)}; while the bare floor read: ${cells((r) => r.floorCpu, etl)}. ` +
      `1-minute load average at each round's start: ${etl.rounds.map((r) => r.load.toFixed(2)).join(', ')}.`,
    '',
    `E6 requests of the sync (the simulator's count, GET /admin/stats) ÷ the pages the data needs (Σ over windows of max(1, ⌈records ÷ 1000⌉), the records per window as the bare floor received them), per round: ` +
      `${etl.rounds.map((r) => `${int(r.syncRequests)} ÷ ${int(r.pagesNeeded)}`).join(', ')}; median **${ratio === undefined ? 'n/a' : ratio.median.toFixed(3)}** (target ≤ ${CPU_TARGETS.requestsVsPages}).`,
    '',
  );
  return lines;
}
