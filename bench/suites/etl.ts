/**
 * 1. ETL throughput, beside the two limits measured in the same round: the store's (`psql
 * \copy` of the same records) and the upstream's (paging through the simulator, discarding);
 * and the same sync without the tables derived from records (ROLLUP_DIMENSIONS=off,
 * FIELD_CATALOGUE=off), for what maintaining them costs.
 * Each round also runs the bare floor of reading (bench/lib/bare-client.mjs: undici and JSON.parse
 * of the same pages, 4 at a time) and counts the sync's E6 requests in the simulator (`--admin`,
 * GET /admin/stats) against the pages the data needs.
 * Also supplies the largest size of 2. Memory and 4. Growth (its sync runs are those runs).
 */
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { postgresCpuSeconds, processCpuSeconds } from '../lib/cpu.js';
import { runScriptChild, runSyncChild, startSimulatorChild, upstreamEnv, type MeasuredRun } from '../lib/children.js';
import { DATA_END, countRecords, daysBefore, withFreshDatabase, type BenchContext } from '../lib/context.js';
import { migrateSchema, timePsqlCopy, writeCopyFile } from '../lib/copy-limit.js';
import { measureFootprint, type Footprint } from '../lib/footprint.js';
import { summarizeProfile, type ProfileSummary } from '../lib/profile.js';
import { median, pagesNeeded } from '../lib/stats.js';

export interface EtlSpec {
  records: number;
  /** The records are spread over this many whole days before {@link DATA_END}, one window a day. */
  days: number;
  rounds: number;
}

/** CPU seconds of each party during one measurement. */
export interface CpuSplit {
  self: number | undefined;
  simulator: number | undefined;
  postgres: number | undefined;
}

export interface EtlRound {
  sync: MeasuredRun;
  syncRate: number;
  syncCpu: CpuSplit;
  pages: number;
  copySeconds: number;
  copyRate: number;
  copyCpu: CpuSplit;
  fetchSeconds: number;
  fetchRate: number;
  fetchCpu: CpuSplit;
  /** syncRate ÷ the smaller of copyRate and fetchRate, within this round. */
  ratio: number;
  /** The same sync without rollups and catalogue ({@link BARE_ENV}). */
  bare: MeasuredRun;
  bareRate: number;
  bareCpu: CpuSplit;
  /** syncRate ÷ bareRate, within this round: the throughput kept with the derived tables. */
  derivedRatio: number;
  /** 1-minute load average at the round's start. */
  load: number;
  /** The bare floor: undici + JSON.parse of the same pages, 4 at a time (bench/lib/bare-client.mjs). */
  floorSeconds: number;
  floorCpu: CpuSplit;
  /** E6 requests of the sync as the simulator counted them, and the pages the data needs (from the floor's records per window). */
  syncRequests: number;
  pagesNeeded: number;
}

/** What bench/lib/bare-client.mjs prints. */
interface FloorRun {
  records: number;
  requests: number;
  recordsPerWindow: number[];
  seconds: number;
  cpuSeconds: number;
}

/** The simulator's count of E6 requests so far (GET /admin/stats; the simulator runs with `--admin`). */
async function analyticsRequests(simUrl: string): Promise<number> {
  const res = await fetch(`${simUrl}/admin/stats`);
  if (!res.ok) throw new Error(`GET /admin/stats answered ${res.status}`);
  return ((await res.json()) as { analyticsRequests: number }).analyticsRequests;
}

export interface EtlResult {
  spec: EtlSpec;
  rows: number;
  rounds: EtlRound[];
  /** 15. Bytes per record: the first round's databases after its sync with and without the derived tables. */
  footprint: { withDerived: Footprint; bare: Footprint } | undefined;
  median: {
    syncRate: number;
    copyRate: number;
    fetchRate: number;
    ratio: number;
    syncSeconds: number;
    copySeconds: number;
    fetchSeconds: number;
    bareRate: number;
    bareSeconds: number;
    derivedRatio: number;
  };
}

/** Sync settings every sync benchmark shares: one-day windows, the defaults otherwise (page size 1000, concurrency 4). */
export const SYNC_ENV = { SYNC_WINDOW: '1d' } as const;

/** {@link SYNC_ENV} without the tables derived from records: no records_hourly(_distinct), no record_fields / records_typed upkeep. */
export const BARE_ENV = { ...SYNC_ENV, ROLLUP_DIMENSIONS: 'off', FIELD_CATALOGUE: 'off' } as const;

export function syncArgs(start: Date, end: Date): string[] {
  return ['--from', start.toISOString(), '--to', end.toISOString()];
}

export async function etlSuite(ctx: BenchContext, spec: EtlSpec): Promise<EtlResult> {
  const start = daysBefore(DATA_END, spec.days);
  const copyFile = join(ctx.scratch, 'records.copy');
  ctx.log(`etl: writing ${spec.records} records as COPY rows`);
  const rows = await writeCopyFile(copyFile, { records: spec.records, start, end: DATA_END, windowMs: 86_400_000 });
  const sim = await startSimulatorChild({ records: spec.records, start, end: DATA_END, extraArgs: ['--admin'] });
  const rounds: EtlRound[] = [];
  let footprint: EtlResult['footprint'];
  const footprints: Partial<{ withDerived: Footprint; bare: Footprint }> = {};
  try {
    for (let round = 1; round <= spec.rounds; round++) {
      const load = loadavg()[0]!;
      // The store's limit: psql \copy into a freshly migrated, empty records table.
      const copy = await withFreshDatabase(ctx, 'bench_copy', async (db) => {
        await migrateSchema(
          db.url,
          'analytics',
          Array.from({ length: spec.days }, (_, d) => start.getTime() + d * 86_400_000),
        );
        const pg0 = postgresCpuSeconds(ctx.cluster.dataDir);
        const seconds = await timePsqlCopy(db.url, 'analytics', copyFile);
        const pg1 = postgresCpuSeconds(ctx.cluster.dataDir);
        const stored = await countRecords(db.url);
        if (stored !== rows) throw new Error(`\\copy stored ${stored} rows of ${rows}`);
        return { seconds, cpu: { self: undefined, simulator: undefined, postgres: delta(pg0, pg1) } };
      });

      // The upstream's limit: the same windows, client and window reader, pages discarded.
      const sim0 = processCpuSeconds(sim.pid);
      const fetched = await runScriptChild<{ records: number; pages: number; seconds: number; cpuSeconds: number }>('./fetch-only.ts', [
        JSON.stringify({ url: sim.url, from: start.toISOString(), to: DATA_END.toISOString(), env: SYNC_ENV }),
      ]);
      const sim1 = processCpuSeconds(sim.pid);

      // The bare floor: the same pages with undici and JSON.parse, nothing else.
      const floorSim0 = processCpuSeconds(sim.pid);
      const floor = await runScriptChild<FloorRun>('./bare-client.mjs', [
        JSON.stringify({ url: sim.url, from: start.toISOString(), to: DATA_END.toISOString(), windowMs: 86_400_000, pageSize: 1000 }),
      ]);
      const floorSim1 = processCpuSeconds(sim.pid);
      if (floor.records !== rows) throw new Error(`the bare client read ${floor.records} records, expected ${rows}`);

      // The ETL itself: `sync` as a child process, end to end (start, migrations, run, exit).
      const etl = await withFreshDatabase(ctx, 'bench_etl', async (db) => {
        const pg0 = postgresCpuSeconds(ctx.cluster.dataDir);
        const simBefore = processCpuSeconds(sim.pid);
        const requests0 = await analyticsRequests(sim.url);
        const run = await runSyncChild(syncArgs(start, DATA_END), upstreamEnv(sim.url, db.url, SYNC_ENV));
        const simAfter = processCpuSeconds(sim.pid);
        const pg1 = postgresCpuSeconds(ctx.cluster.dataDir);
        const requests = (await analyticsRequests(sim.url)) - requests0;
        const stored = await countRecords(db.url);
        if (stored !== rows || run.summary?.records !== rows)
          throw new Error(`sync stored ${stored} rows (reported ${String(run.summary?.records)}), expected ${rows}`);
        if (round === 1) footprints.withDerived = await measureFootprint(db.url, rows);
        return { run, requests, cpu: { self: run.cpuSeconds, simulator: delta(simBefore, simAfter), postgres: delta(pg0, pg1) } };
      });

      // The same sync without rollups and catalogue, into its own fresh database.
      const bare = await withFreshDatabase(ctx, 'bench_etl_bare', async (db) => {
        const pg0 = postgresCpuSeconds(ctx.cluster.dataDir);
        const simBefore = processCpuSeconds(sim.pid);
        const run = await runSyncChild(syncArgs(start, DATA_END), upstreamEnv(sim.url, db.url, BARE_ENV));
        const simAfter = processCpuSeconds(sim.pid);
        const pg1 = postgresCpuSeconds(ctx.cluster.dataDir);
        const stored = await countRecords(db.url);
        if (stored !== rows || run.summary?.records !== rows)
          throw new Error(`sync without derived tables stored ${stored} rows (reported ${String(run.summary?.records)}), expected ${rows}`);
        if (round === 1) footprints.bare = await measureFootprint(db.url, rows);
        return { run, cpu: { self: run.cpuSeconds, simulator: delta(simBefore, simAfter), postgres: delta(pg0, pg1) } };
      });

      const syncRate = rows / etl.run.wallSeconds;
      const bareRate = rows / bare.run.wallSeconds;
      const copyRate = rows / copy.seconds;
      const fetchRate = fetched.records / fetched.seconds;
      const result: EtlRound = {
        sync: etl.run,
        syncRate,
        syncCpu: etl.cpu,
        pages: Number(etl.run.summary?.pages ?? 0),
        copySeconds: copy.seconds,
        copyRate,
        copyCpu: copy.cpu,
        fetchSeconds: fetched.seconds,
        fetchRate,
        fetchCpu: { self: fetched.cpuSeconds, simulator: delta(sim0, sim1), postgres: undefined },
        ratio: syncRate / Math.min(copyRate, fetchRate),
        bare: bare.run,
        bareRate,
        bareCpu: bare.cpu,
        derivedRatio: syncRate / bareRate,
        load,
        floorSeconds: floor.seconds,
        floorCpu: { self: floor.cpuSeconds, simulator: delta(floorSim0, floorSim1), postgres: undefined },
        syncRequests: etl.requests,
        pagesNeeded: pagesNeeded(floor.recordsPerWindow, 1000),
      };
      rounds.push(result);
      if (round === 1 && footprints.withDerived !== undefined && footprints.bare !== undefined) {
        footprint = { withDerived: footprints.withDerived, bare: footprints.bare };
        ctx.log(
          `etl: ${(footprint.withDerived.total / rows).toFixed(1)} bytes per record on disk (${(footprint.bare.total / rows).toFixed(1)} without derived tables)`,
        );
      }
      ctx.log(
        `etl round ${round}/${spec.rounds}: sync ${Math.round(syncRate)}/s (${etl.run.wallSeconds.toFixed(2)} s), \\copy ${Math.round(copyRate)}/s, fetch-only ${Math.round(fetchRate)}/s, ratio ${result.ratio.toFixed(2)}; ` +
          `without rollups and catalogue ${Math.round(bareRate)}/s (${bare.run.wallSeconds.toFixed(2)} s), with ÷ without ${result.derivedRatio.toFixed(2)}; ` +
          `CPU s sync ${fixedOrNa(etl.cpu.self)}, PostgreSQL ${fixedOrNa(etl.cpu.postgres)}, fetch-only ${fixedOrNa(fetched.cpuSeconds)}, floor ${fixedOrNa(floor.cpuSeconds)}; E6 requests ${etl.requests} for ${result.pagesNeeded} pages; load ${load.toFixed(2)}`,
      );
    }
  } finally {
    await sim.stop();
  }
  return {
    spec,
    rows,
    rounds,
    footprint,
    median: {
      syncRate: median(rounds.map((r) => r.syncRate)),
      copyRate: median(rounds.map((r) => r.copyRate)),
      fetchRate: median(rounds.map((r) => r.fetchRate)),
      ratio: median(rounds.map((r) => r.ratio)),
      syncSeconds: median(rounds.map((r) => r.sync.wallSeconds)),
      copySeconds: median(rounds.map((r) => r.copySeconds)),
      fetchSeconds: median(rounds.map((r) => r.fetchSeconds)),
      bareRate: median(rounds.map((r) => r.bareRate)),
      bareSeconds: median(rounds.map((r) => r.bare.wallSeconds)),
      derivedRatio: median(rounds.map((r) => r.derivedRatio)),
    },
  };
}

function fixedOrNa(v: number | undefined): string {
  return v === undefined ? 'n/a' : v.toFixed(2);
}

function delta(before: number | undefined, after: number | undefined): number | undefined {
  return before === undefined || after === undefined ? undefined : after - before;
}

export interface ProfiledRun {
  run: MeasuredRun;
  profile: ProfileSummary;
}

/** One more ETL sync at `spec`'s size under `node --cpu-prof`: where the sync process spends its time. */
export async function profileEtl(ctx: BenchContext, spec: EtlSpec, root: string, nodeArgs: string[] = []): Promise<ProfiledRun> {
  const start = daysBefore(DATA_END, spec.days);
  const sim = await startSimulatorChild({ records: spec.records, start, end: DATA_END });
  const dir = join(ctx.scratch, 'cpu-profile');
  try {
    const run = await withFreshDatabase(ctx, 'bench_profile', (db) =>
      runSyncChild(syncArgs(start, DATA_END), upstreamEnv(sim.url, db.url, SYNC_ENV), {
        nodeArgs: [...nodeArgs, '--cpu-prof', `--cpu-prof-dir=${dir}`, '--cpu-prof-name=sync.cpuprofile'],
      }),
    );
    return { run, profile: summarizeProfile(join(dir, 'sync.cpuprofile'), root) };
  } finally {
    await sim.stop();
  }
}
