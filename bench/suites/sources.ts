/**
 * 10. Several sources: `serve` with CONFIG_FILE listing 1, 4 and 16 sources, each its own
 * simulator (own seed, own client id and secret, the default customers, so E7 answers the
 * default 7 event types × 12 customers = 84 series), the simulators in the bench process so that
 * their E7 request counters can be read. The sync schedule is off: the figures are about serving.
 *
 * For each number of sources and round, two fresh `serve` children:
 * - warm (METRICS_CACHE_TTL 1h): resident set after start and warm-up, /metrics under load at a
 *   fixed concurrency (autocannon, as the /metrics benchmark), /probe?source=<first> the same,
 *   resident set after the scrapes and its high-water mark; CPU seconds per scrape from
 *   /proc/<pid>/stat around each load;
 * - cold (METRICS_CACHE_TTL 0): sequential /metrics scrapes, each of which reads every source's
 *   E7 (and merges and serialises them): CPU seconds and latency per scrape.
 * Memory per extra source is (RSS(N) − RSS(1)) ÷ (N − 1), from the medians of the rounds.
 */
import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { startSimulator, type Simulator } from '@analytics-exporter/simulator';
import { CLI_PATH, startBareServer, startServeChild, type ServerChild } from '../lib/children.js';
import { withFreshDatabase, type BenchContext } from '../lib/context.js';
import { processCpuSeconds } from '../lib/cpu.js';
import { median } from '../lib/stats.js';
import { loadRun, type LoadRun } from './metrics.js';

export interface SourcesSpec {
  /** Numbers of sources, the first being the base of the per-source memory (1). */
  counts: number[];
  rounds: number;
  /** Sequential /metrics and /probe scrapes of a fresh serve before its resident set is read. */
  warmupScrapes: number;
  /** Warm /metrics and /probe scrapes each, at `connections` at once. */
  scrapes: number;
  connections: number;
  /** Cold /metrics scrapes, one at a time (each reads every source). */
  coldScrapes: number;
}

/** One load of scrapes and the serve CPU it cost. */
export interface ScrapeLoad extends LoadRun {
  /** serve's CPU seconds (user + system) during the load ÷ scrapes answered. */
  cpuSecondsPerScrape: number;
  /** E7 requests the simulators received during the load, all sources. */
  upstreamRequests: number;
}

export interface SourcesRound {
  sources: number;
  /** 1-minute load average when the round's warm serve started. */
  load: number;
  /** VmRSS of the warm serve after start and warm-up, after the scrapes, and VmHWM at the end, in bytes. */
  rssWarmBytes: number;
  rssAfterBytes: number;
  peakRssBytes: number;
  /** nodejs_heap_size_used_bytes of the last warm-up scrape: V8's heap in use, garbage included. */
  heapUsedBytes: number;
  warm: ScrapeLoad;
  probe: ScrapeLoad;
  cold: ScrapeLoad;
  /** A bare node:http server answering the warm /metrics body, same load: the machine's own latency noise. */
  bare: LoadRun;
  /** Upstream samples in one /metrics body (all sources) and in /probe's (one source); body sizes in bytes. */
  upstreamSamples: number;
  probeUpstreamSamples: number;
  metricsBytes: number;
  probeBytes: number;
}

/** One source count's rounds, and per figure the value reported for them (the same fields as a round's). */
export interface SourcesRow extends Pick<
  SourcesRound,
  'sources' | 'rssWarmBytes' | 'rssAfterBytes' | 'peakRssBytes' | 'heapUsedBytes' | 'warm' | 'probe' | 'cold' | 'bare'
> {
  rounds: SourcesRound[];
}

export interface SourcesResult {
  spec: SourcesSpec;
  /** E7 series of one source (its samples per scrape). */
  seriesPerSource: number;
  rows: SourcesRow[];
}

/** VmRSS or VmHWM of a process, in bytes. */
function statusBytes(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  const match = new RegExp(`^${field}:\\s+(\\d+)\\s+kB$`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (match === null) throw new Error(`no ${field} for process ${pid}`);
  return Number(match[1]) * 1024;
}

function sourceName(i: number): string {
  return `s${String(i + 1).padStart(2, '0')}`;
}

/** CONFIG_FILE with the first `count` simulators as sources; secrets in files beside it. */
function writeConfigFile(dir: string, sims: readonly Simulator[], count: number): string {
  const lines = ['sources:'];
  for (let i = 0; i < count; i++) {
    const name = sourceName(i);
    writeFileSync(join(dir, `${name}.secret`), `bench-secret-${name}`, { mode: 0o600 });
    lines.push(
      `  - name: ${name}`,
      `    statistics_url: ${sims[i]!.url}`,
      `    auth_url: ${sims[i]!.url}`,
      `    client_id: bench-client-${name}`,
      `    client_secret_file: ${name}.secret`,
      '    labels:',
      `      environment: env-${name}`,
    );
  }
  const file = join(dir, `sources-${count}.yaml`);
  writeFileSync(file, `${lines.join('\n')}\n`);
  return file;
}

/** Applies the migrations once, so that no measured serve pays for them. */
async function migrate(env: Record<string, string>): Promise<void> {
  const child = spawn(process.execPath, [CLI_PATH, 'migrate'], { env: { PATH: process.env.PATH ?? '', ...env }, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const code = await new Promise<number | null>((resolve, reject) => {
    child.once('error', reject);
    child.once('close', resolve);
  });
  if (code !== 0) throw new Error(`migrate exited ${code}:\n${stderr.slice(-4000)}`);
}

async function waitReady(serve: ServerChild): Promise<void> {
  for (let attempt = 0; attempt < 300; attempt++) {
    const response = await fetch(`${serve.url}/readyz`);
    await response.arrayBuffer();
    if (response.status === 200) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error('serve did not become ready within 30 s');
}

async function body(url: string): Promise<string> {
  const response = await fetch(url);
  const text = await response.text();
  if (response.status !== 200) throw new Error(`${url} answered ${response.status}: ${text.slice(0, 200)}`);
  return text;
}

/** Sample lines of a body that come from the upstream: those with the `environment` label every source adds to its samples only. */
function upstreamSampleLines(text: string): number {
  return text.split('\n').filter((line) => !line.startsWith('#') && line.includes(',environment="env-s')).length;
}

/** The value of an unlabelled sample in a body. */
function gaugeValue(text: string, name: string): number {
  const match = new RegExp(`^${name} (\\S+)$`, 'm').exec(text);
  if (match === null) throw new Error(`${name} missing from the /metrics body`);
  return Number(match[1]);
}

async function measuredLoad(url: string, pid: number, sims: readonly Simulator[], scrapes: number, connections: number): Promise<ScrapeLoad> {
  const e7Before = sims.reduce((n, s) => n + s.stats.prometheusRequests, 0);
  const cpuBefore = processCpuSeconds(pid)!;
  const run = await loadRun(url, { scrapes, connections, rounds: 1 });
  const cpu = processCpuSeconds(pid)! - cpuBefore;
  const upstreamRequests = sims.reduce((n, s) => n + s.stats.prometheusRequests, 0) - e7Before;
  if (run.failures > 0) throw new Error(`${url}: ${run.failures} of ${scrapes} scrapes failed`);
  return { ...run, cpuSecondsPerScrape: cpu / scrapes, upstreamRequests };
}

function medianLoad(loads: readonly ScrapeLoad[]): ScrapeLoad {
  return {
    ...medianBare(loads),
    cpuSecondsPerScrape: median(loads.map((l) => l.cpuSecondsPerScrape)),
    upstreamRequests: median(loads.map((l) => l.upstreamRequests)),
  };
}

function medianBare(loads: readonly LoadRun[]): LoadRun {
  const m = (pick: (l: LoadRun) => number) => median(loads.map(pick));
  return {
    p50Ms: m((l) => l.p50Ms),
    p99Ms: m((l) => l.p99Ms),
    meanMs: m((l) => l.meanMs),
    scrapesPerSecond: m((l) => l.scrapesPerSecond),
    seconds: m((l) => l.seconds),
    failures: loads.reduce((n, l) => n + l.failures, 0),
  };
}

async function measureRound(
  ctx: BenchContext,
  spec: SourcesSpec,
  sims: readonly Simulator[],
  count: number,
  env: Record<string, string>,
): Promise<SourcesRound> {
  const load = loadavg()[0]!;
  const first = sourceName(0);
  const warmServe = await startServeChild({ ...env, METRICS_CACHE_TTL: '1h' });
  let metricsBody = '';
  let round: Omit<SourcesRound, 'cold' | 'bare'>;
  try {
    await waitReady(warmServe);
    const metricsUrl = `${warmServe.url}/metrics`;
    const probeUrl = `${warmServe.url}/probe?source=${first}`;
    let metricsText = '';
    let probeText = '';
    for (let i = 0; i < spec.warmupScrapes; i++) {
      metricsText = await body(metricsUrl);
      probeText = await body(probeUrl);
    }
    const rssWarmBytes = statusBytes(warmServe.pid, 'VmRSS');
    metricsBody = metricsText;
    const warm = await measuredLoad(metricsUrl, warmServe.pid, sims, spec.scrapes, spec.connections);
    const probe = await measuredLoad(probeUrl, warmServe.pid, sims, spec.scrapes, spec.connections);
    round = {
      sources: count,
      load,
      rssWarmBytes,
      rssAfterBytes: statusBytes(warmServe.pid, 'VmRSS'),
      peakRssBytes: statusBytes(warmServe.pid, 'VmHWM'),
      heapUsedBytes: gaugeValue(metricsText, 'nodejs_heap_size_used_bytes'),
      warm,
      probe,
      upstreamSamples: upstreamSampleLines(metricsText),
      probeUpstreamSamples: upstreamSampleLines(probeText),
      metricsBytes: Buffer.byteLength(metricsText),
      probeBytes: Buffer.byteLength(probeText),
    };
  } finally {
    await warmServe.stop();
  }
  const bodyFile = join(ctx.scratch, `sources-${count}-metrics.txt`);
  writeFileSync(bodyFile, metricsBody);
  const bareServer = await startBareServer(bodyFile, 'text/plain; version=0.0.4; charset=utf-8');
  let bare: LoadRun;
  try {
    bare = await loadRun(`${bareServer.url}/metrics`, { scrapes: spec.scrapes, connections: spec.connections, rounds: 1 });
  } finally {
    await bareServer.stop();
  }
  const coldServe = await startServeChild({ ...env, METRICS_CACHE_TTL: '0s' });
  let cold: ScrapeLoad;
  try {
    await waitReady(coldServe);
    await body(`${coldServe.url}/metrics`);
    cold = await measuredLoad(`${coldServe.url}/metrics`, coldServe.pid, sims, spec.coldScrapes, 1);
  } finally {
    await coldServe.stop();
  }
  ctx.log(
    `sources ${count}: load ${load.toFixed(2)}, RSS ${(round.rssWarmBytes / 2 ** 20).toFixed(1)} MiB warm, ${(round.rssAfterBytes / 2 ** 20).toFixed(1)} after, ` +
      `peak ${(round.peakRssBytes / 2 ** 20).toFixed(1)}; /metrics p50 ${round.warm.p50Ms} p99 ${round.warm.p99Ms} ms, ` +
      `${(round.warm.cpuSecondsPerScrape * 1000).toFixed(2)} CPU ms/scrape; /probe p99 ${round.probe.p99Ms} ms; ` +
      `bare p99 ${bare.p99Ms} ms; cold p99 ${cold.p99Ms} ms, ${(cold.cpuSecondsPerScrape * 1000).toFixed(2)} CPU ms/scrape, ${cold.upstreamRequests} E7 requests; ${round.upstreamSamples} upstream samples`,
  );
  return { ...round, cold, bare };
}

/**
 * Runs section 10: starts max(counts) simulators in this process, applies the migrations once,
 * then measures each count in every round (see the module comment).
 *
 * @throws when a serve does not start or become ready, a scrape fails, or a body does not carry
 *   count × the per-source upstream samples (/probe: one source's).
 */
export async function sourcesSuite(ctx: BenchContext, spec: SourcesSpec): Promise<SourcesResult> {
  const most = Math.max(...spec.counts);
  // Data around now, so that E7's range (the last METRICS_WINDOW) has counts, not only zeros.
  const now = Date.now();
  const sims: Simulator[] = [];
  try {
    for (let i = 0; i < most; i++) {
      const name = sourceName(i);
      sims.push(
        await startSimulator({
          port: 0,
          seed: 1000 + i,
          records: 20_000,
          start: new Date(now - 2 * 86_400_000),
          end: new Date(now + 86_400_000),
          clientId: `bench-client-${name}`,
          clientSecret: `bench-secret-${name}`,
        }),
      );
    }
    const seriesPerSource = sims[0]!.dataset.eventCounts(undefined, undefined, true).length;
    return await withFreshDatabase(ctx, 'bench_sources', async (db) => {
      const files = new Map(spec.counts.map((count) => [count, writeConfigFile(ctx.scratch, sims, count)]));
      const envOf = (count: number) => ({ CONFIG_FILE: files.get(count)!, DATABASE_URL: db.url, DATABASE_SCHEMA: 'analytics' });
      await migrate(envOf(most));
      const rounds = new Map<number, SourcesRound[]>(spec.counts.map((count) => [count, []]));
      for (let r = 1; r <= spec.rounds; r++) {
        ctx.log(`sources round ${r}/${spec.rounds}`);
        for (const count of spec.counts) {
          const round = await measureRound(ctx, spec, sims, count, envOf(count));
          if (round.upstreamSamples !== count * seriesPerSource || round.probeUpstreamSamples !== seriesPerSource) {
            throw new Error(
              `${count} sources: /metrics served ${round.upstreamSamples} upstream samples (expected ${count * seriesPerSource}), /probe ${round.probeUpstreamSamples} (expected ${seriesPerSource})`,
            );
          }
          rounds.get(count)!.push(round);
        }
      }
      const rows = spec.counts.map((count): SourcesRow => {
        const list = rounds.get(count)!;
        return {
          sources: count,
          rounds: list,
          rssWarmBytes: median(list.map((r) => r.rssWarmBytes)),
          rssAfterBytes: median(list.map((r) => r.rssAfterBytes)),
          peakRssBytes: median(list.map((r) => r.peakRssBytes)),
          heapUsedBytes: median(list.map((r) => r.heapUsedBytes)),
          warm: medianLoad(list.map((r) => r.warm)),
          probe: medianLoad(list.map((r) => r.probe)),
          cold: medianLoad(list.map((r) => r.cold)),
          bare: medianBare(list.map((r) => r.bare)),
        };
      });
      return { spec, seriesPerSource, rows };
    });
  } finally {
    await Promise.all(sims.map((sim) => sim.close()));
  }
}

/** Memory per extra source from the medians: (RSS(N) − RSS(1)) ÷ (N − 1), in bytes, for each N > 1. */
export function memoryPerSource(result: SourcesResult, pick: (row: SourcesRow) => number): Array<{ sources: number; bytes: number }> {
  const base = result.rows[0]!;
  return result.rows.slice(1).map((row) => ({ sources: row.sources, bytes: (pick(row) - pick(base)) / (row.sources - base.sources) }));
}
