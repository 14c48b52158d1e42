/**
 * 14. A compressed wire (issue 27 item 3): `sync` of the ETL's data over a bandwidth-limited link
 * (the simulator's `--bandwidth`, one shared link for all its connections), with `--gzip off` and
 * with `--gzip auto` (the sync asks for gzip, so it gets it), alternated within each round.
 * Reports records/s both ways, the bytes per record on the wire (E6 bodies, after gzip, counted by
 * the simulator) and the CPU that compressing and decoding cost.
 */
import { parseBandwidth } from '@analytics-exporter/simulator';
import { postgresCpuSeconds, processCpuSeconds } from '../lib/cpu.js';
import { runSyncChild, startSimulatorChild, upstreamEnv, type MeasuredRun, type SimulatorChild } from '../lib/children.js';
import { DATA_END, countRecords, daysBefore, withFreshDatabase, type BenchContext } from '../lib/context.js';
import type { Verdict } from '../lib/report.js';
import { fixed, int, median, medianOf, range } from '../lib/stats.js';
import { SYNC_ENV, syncArgs } from './etl.js';

export interface WireSpec {
  records: number;
  /** The records are spread over this many whole days before {@link DATA_END}, one window a day. */
  days: number;
  rounds: number;
  /** The link's rate, as `--bandwidth` takes it. */
  bandwidth: string;
}

export const WIRE_MODES = ['off', 'auto'] as const;
export type WireMode = (typeof WIRE_MODES)[number];

/** The targets of row 14. */
export const WIRE_TARGETS = {
  /** records/s with gzip ÷ without, on the same link, at least. */
  speedup: 2,
  /** Bytes per record on the wire with gzip ÷ without, less than. */
  bytesShare: 0.5,
};

export interface WireRun {
  mode: WireMode;
  run: MeasuredRun;
  recordsPerSecond: number;
  /** E6 body bytes the simulator wrote during the run (after gzip). */
  bodyBytes: number;
  bytesPerRecord: number;
  simulatorCpu: number | undefined;
  postgresCpu: number | undefined;
}

export interface WireRound {
  runs: Record<WireMode, WireRun>;
  /** records/s with gzip ÷ without, within the round. */
  speedup: number;
}

export interface WireResult {
  spec: WireSpec;
  rows: number;
  rounds: WireRound[];
  median: {
    speedup: number;
    recordsPerSecond: Record<WireMode, number>;
    bytesPerRecord: Record<WireMode, number>;
    syncCpu: Record<WireMode, number>;
    simulatorCpu: Record<WireMode, number | undefined>;
  };
}

interface SimulatorStats {
  bodyBytes: { analytics: number };
  gzipResponses: { analytics: number };
  analyticsRequests: number;
}

/** The simulator's counts (`GET /admin/stats`, served with `--admin`). */
async function statsOf(sim: SimulatorChild): Promise<SimulatorStats> {
  const res = await fetch(`${sim.url}/admin/stats`);
  if (!res.ok) throw new Error(`GET /admin/stats answered ${res.status}`);
  return (await res.json()) as SimulatorStats;
}

export async function wireSuite(ctx: BenchContext, spec: WireSpec): Promise<WireResult> {
  const start = daysBefore(DATA_END, spec.days);
  const sims = {} as Record<WireMode, SimulatorChild>;
  try {
    // One simulator per mode (gzip is chosen at start), each with its own link of the same rate;
    // only one serves at a time.
    for (const mode of WIRE_MODES) {
      sims[mode] = await startSimulatorChild({
        records: spec.records,
        start,
        end: DATA_END,
        extraArgs: ['--gzip', mode, '--bandwidth', spec.bandwidth, '--admin'],
      });
    }
    const rounds: WireRound[] = [];
    for (let round = 1; round <= spec.rounds; round++) {
      // Alternate which goes first, so neither always meets the warmer (or busier) machine.
      const order: readonly WireMode[] = round % 2 === 1 ? WIRE_MODES : [...WIRE_MODES].reverse();
      const runs = {} as Record<WireMode, WireRun>;
      for (const mode of order) runs[mode] = await measure(ctx, spec, sims[mode], mode, start);
      const speedup = runs.auto.recordsPerSecond / runs.off.recordsPerSecond;
      rounds.push({ runs, speedup });
      ctx.log(
        `wire round ${round}/${spec.rounds} at ${spec.bandwidth}: ` +
          WIRE_MODES.map(
            (m) =>
              `gzip ${m} ${int(runs[m].recordsPerSecond)}/s (${runs[m].run.wallSeconds.toFixed(2)} s, ${runs[m].bytesPerRecord.toFixed(1)} B/record, sync CPU ${runs[m].run.cpuSeconds.toFixed(2)} s)`,
          ).join('; ') +
          `; speed-up ×${speedup.toFixed(2)}`,
      );
    }
    const per = <T>(f: (r: WireRun) => T): Record<WireMode, T[]> => ({ off: rounds.map((r) => f(r.runs.off)), auto: rounds.map((r) => f(r.runs.auto)) });
    const rates = per((r) => r.recordsPerSecond);
    const bytes = per((r) => r.bytesPerRecord);
    const cpu = per((r) => r.run.cpuSeconds);
    const simCpu = per((r) => r.simulatorCpu);
    return {
      spec,
      rows: spec.records,
      rounds,
      median: {
        speedup: median(rounds.map((r) => r.speedup)),
        recordsPerSecond: { off: median(rates.off), auto: median(rates.auto) },
        bytesPerRecord: { off: median(bytes.off), auto: median(bytes.auto) },
        syncCpu: { off: median(cpu.off), auto: median(cpu.auto) },
        simulatorCpu: { off: medianOf(simCpu.off), auto: medianOf(simCpu.auto) },
      },
    };
  } finally {
    await Promise.all(Object.values(sims).map((s) => s.stop()));
  }
}

/** One `sync` of the whole set from `sim` into a fresh database, with the simulator's wire count around it. */
async function measure(ctx: BenchContext, spec: WireSpec, sim: SimulatorChild, mode: WireMode, start: Date): Promise<WireRun> {
  return withFreshDatabase(ctx, `bench_wire_${mode}`, async (db) => {
    const before = await statsOf(sim);
    const sim0 = processCpuSeconds(sim.pid);
    const pg0 = postgresCpuSeconds(ctx.cluster.dataDir);
    const run = await runSyncChild(syncArgs(start, DATA_END), upstreamEnv(sim.url, db.url, SYNC_ENV));
    const pg1 = postgresCpuSeconds(ctx.cluster.dataDir);
    const sim1 = processCpuSeconds(sim.pid);
    const after = await statsOf(sim);
    const stored = await countRecords(db.url);
    if (stored !== spec.records || run.summary?.records !== spec.records) {
      throw new Error(`wire (gzip ${mode}): sync stored ${stored} rows (reported ${String(run.summary?.records)}), expected ${spec.records}`);
    }
    const requests = after.analyticsRequests - before.analyticsRequests;
    const gzipped = after.gzipResponses.analytics - before.gzipResponses.analytics;
    if (gzipped !== (mode === 'auto' ? requests : 0)) throw new Error(`wire (gzip ${mode}): ${gzipped} of ${requests} E6 answers were gzip`);
    const bodyBytes = after.bodyBytes.analytics - before.bodyBytes.analytics;
    return {
      mode,
      run,
      recordsPerSecond: stored / run.wallSeconds,
      bodyBytes,
      bytesPerRecord: bodyBytes / stored,
      simulatorCpu: sim0 === undefined || sim1 === undefined ? undefined : sim1 - sim0,
      postgresCpu: pg0 === undefined || pg1 === undefined ? undefined : pg1 - pg0,
    };
  });
}

/** Row 14: records/s with gzip ÷ without (≥ 2), and bytes per record with gzip (< half of those without). */
export function wireVerdict(result: WireResult): Verdict {
  const { speedup, bytesPerRecord } = result.median;
  const bytesTarget = bytesPerRecord.off * WIRE_TARGETS.bytesShare;
  const speedMet = speedup >= WIRE_TARGETS.speedup;
  const bytesMet = bytesPerRecord.auto < bytesTarget;
  return {
    name: '14. Compressed wire',
    met: speedMet && bytesMet,
    detail:
      `at ${result.spec.bandwidth}: ${int(result.median.recordsPerSecond.auto)} records/s with gzip, ${int(result.median.recordsPerSecond.off)} without: ×${speedup.toFixed(2)} (target ≥ ${WIRE_TARGETS.speedup}); ` +
      `${bytesPerRecord.auto.toFixed(1)} bytes per record on the wire with gzip, ${bytesPerRecord.off.toFixed(1)} without (target < ${bytesTarget.toFixed(1)}, half)`,
    results: [
      { id: 'wire_gzip_speedup', figure: Number(speedup.toFixed(3)), unit: 'ratio', target: WIRE_TARGETS.speedup, met: speedMet },
      {
        id: 'wire_bytes_per_record_gzip',
        figure: Number(bytesPerRecord.auto.toFixed(1)),
        unit: 'bytes',
        target: Number(bytesTarget.toFixed(1)),
        met: bytesMet,
      },
    ],
  };
}

/** The BENCHMARKS.md section of row 14. */
export function renderWire(result: WireResult): string[] {
  const { spec, rounds } = result;
  const bytesPerSecond = parseBandwidth(spec.bandwidth)!;
  const row = (mode: WireMode, label: string): string => {
    const runs = rounds.map((r) => r.runs[mode]);
    const bodyBytes = median(runs.map((r) => r.bodyBytes));
    return (
      `| ${label} | **${int(result.median.recordsPerSecond[mode])}** | ${median(runs.map((r) => r.run.wallSeconds)).toFixed(2)} (${range(
        runs.map((r) => r.run.wallSeconds),
        2,
      )}) | **${result.median.bytesPerRecord[mode].toFixed(1)}** | ${fixed(bodyBytes / 1e6, 1)} | ${(bodyBytes / bytesPerSecond).toFixed(2)} | ` +
      `${result.median.syncCpu[mode].toFixed(2)} | ${fixed(result.median.simulatorCpu[mode], 2)} | ${fixed(medianOf(runs.map((r) => r.postgresCpu)), 2)} |`
    );
  };
  return [
    `## 14. Compressed wire: ${int(result.rows)} records over a ${spec.bandwidth} link`,
    '',
    `\`sync\` of ${int(result.rows)} records in ${spec.days} one-day windows (SYNC_WINDOW=1d, defaults otherwise) from a simulator child that paces its E6 bodies on one link of ${spec.bandwidth} shared by all its connections (\`--bandwidth\`), ` +
      `with \`--gzip off\` and with \`--gzip auto\` (the sync sends \`Accept-Encoding: gzip\`, so every page comes compressed; the simulator compresses before it paces). ` +
      `${rounds.length} round(s), the two alternated (which goes first changes each round), each into a fresh database. Bytes on the wire are the E6 body bytes the simulator wrote (\`GET /admin/stats\`), headers not counted. CPU seconds are medians of the rounds.`,
    '',
    '| Wire | records/s (median) | wall s (median, range) | bytes per record on the wire | MB on the wire | link busy s (bytes ÷ rate) | sync CPU s | simulator CPU s | PostgreSQL CPU s |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|',
    row('off', 'uncompressed (`--gzip off`)'),
    row('auto', 'gzip (`--gzip auto`)'),
    '',
    `records/s with gzip ÷ without, per round: ${rounds.map((r) => r.speedup.toFixed(2)).join(', ')}; median **×${result.median.speedup.toFixed(2)}** (target ≥ ${WIRE_TARGETS.speedup}). ` +
      `gzip sends ${(result.median.bytesPerRecord.auto / result.median.bytesPerRecord.off).toFixed(3)} of the uncompressed bytes (target < ${WIRE_TARGETS.bytesShare}); ` +
      `decoding it costs the sync ${(result.median.syncCpu.auto - result.median.syncCpu.off).toFixed(2)} CPU s more per ${int(result.rows)} records. ` +
      'Where the wall time is well above the link-busy time, the run is bound by CPU (the sync, PostgreSQL and the simulator on the same cores), not by the link: the speed-up of gzip grows with the share of the wall time the uncompressed body needs on the link. ' +
      "The simulator's generated records repeat their customers, users and field names, so they compress better than real data may.",
    '',
  ];
}
