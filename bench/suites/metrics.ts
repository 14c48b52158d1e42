/**
 * 5. /metrics under load: 2,000 scrapes, 50 at a time (autocannon), against a fresh `serve`
 * child each round after one scrape that fills its cache (timed apart), and against a bare `node:http` child answering the same bytes (a body
 * `serve` answered in that round). The simulator runs in the bench process so that its request
 * counters tell how many E7 reads the scrapes caused.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import autocannon from 'autocannon';
import { loadConfig } from '../../src/config.js';
import { startSimulator } from '@analytics-exporter/simulator';
import { startBareServer, startServeChild, upstreamEnv } from '../lib/children.js';
import { withFreshDatabase, type BenchContext } from '../lib/context.js';
import { median } from '../lib/stats.js';

export interface MetricsSpec {
  scrapes: number;
  connections: number;
  rounds: number;
}

export interface LoadRun {
  p50Ms: number;
  p99Ms: number;
  /** autocannon's mean latency, in ms (not whole). */
  meanMs: number;
  /** Scrapes ÷ wall seconds of the load; autocannon ends an `amount` run on its 1 s tick, so short runs round up to whole seconds. */
  scrapesPerSecond: number;
  seconds: number;
  /** Responses other than 2xx, plus connection errors and timeouts. */
  failures: number;
}

export interface ServeRound {
  serve: LoadRun;
  bare: LoadRun;
  /** The fresh serve's first scrape, before the load (token and E7 read included), in ms. */
  coldMs: number;
  /** E7 requests the simulator received during the first scrape and the serve run (and E0 token requests). */
  upstreamRequests: number;
  tokenRequests: number;
  /** E7 reads the cache allows from the first scrape to the load's end: one per started METRICS_CACHE_TTL. */
  allowedUpstreamRequests: number;
  bodyBytes: number;
}

export interface MetricsResult {
  spec: MetricsSpec;
  cacheTtlMs: number;
  rounds: ServeRound[];
  median: { serve: LoadRun; bare: LoadRun; upstreamRequests: number; allowed: number; bodyBytes: number };
}

/** `spec.scrapes` GETs of `url`, `spec.connections` at once (autocannon, keep-alive); latency in whole milliseconds. */
export async function loadRun(url: string, spec: MetricsSpec): Promise<LoadRun> {
  const started = performance.now();
  const result = await autocannon({ url, connections: spec.connections, amount: spec.scrapes });
  const seconds = (performance.now() - started) / 1000;
  return {
    p50Ms: result.latency.p50,
    p99Ms: result.latency.p99,
    meanMs: result.latency.mean,
    scrapesPerSecond: result.requests.total / seconds,
    seconds,
    failures: result.non2xx + result.errors + result.timeouts + Math.max(0, spec.scrapes - result.requests.total),
  };
}

function medianRun(runs: LoadRun[]): LoadRun {
  return {
    p50Ms: median(runs.map((r) => r.p50Ms)),
    p99Ms: median(runs.map((r) => r.p99Ms)),
    meanMs: median(runs.map((r) => r.meanMs)),
    scrapesPerSecond: median(runs.map((r) => r.scrapesPerSecond)),
    seconds: median(runs.map((r) => r.seconds)),
    failures: runs.reduce((n, r) => n + r.failures, 0),
  };
}

export async function metricsSuite(ctx: BenchContext, spec: MetricsSpec): Promise<MetricsResult> {
  // serve's defaults, as a deployment would run it (METRICS_CACHE_TTL 30s, METRICS_WINDOW 24h).
  const cacheTtlMs = loadConfig({}).serve.cacheTtlMs;
  const sim = await startSimulator({ port: 0 });
  const rounds: ServeRound[] = [];
  try {
    await withFreshDatabase(ctx, 'bench_serve', async (db) => {
      for (let round = 1; round <= spec.rounds; round++) {
        // spec.connections (50) from one address: a load test, beyond a scraper's share (METRICS_MAX_CONNECTIONS_PER_CLIENT, 32).
        const serve = await startServeChild(upstreamEnv(sim.url, db.url, { METRICS_MAX_CONNECTIONS_PER_CLIENT: String(2 * spec.connections) }));
        let serveRun: LoadRun;
        let upstreamRequests: number;
        let tokenRequests: number;
        let body: Buffer;
        let contentType: string;
        let coldMs: number;
        let spanSeconds: number;
        try {
          const e7Before = sim.stats.prometheusRequests;
          const e0Before = sim.stats.tokenRequests;
          // One scrape first, timed alone: a fresh serve's first scrape waits for its token and
          // E7 read, which the bare server never does; counted in the E7 requests, not in the load's latencies.
          const warmStarted = performance.now();
          await (await fetch(`${serve.url}/metrics`)).arrayBuffer();
          coldMs = performance.now() - warmStarted;
          serveRun = await loadRun(`${serve.url}/metrics`, spec);
          spanSeconds = (performance.now() - warmStarted) / 1000;
          upstreamRequests = sim.stats.prometheusRequests - e7Before;
          tokenRequests = sim.stats.tokenRequests - e0Before;
          const response = await fetch(`${serve.url}/metrics`);
          body = Buffer.from(await response.arrayBuffer());
          contentType = response.headers.get('content-type') ?? 'text/plain; version=0.0.4; charset=utf-8';
        } finally {
          await serve.stop();
        }
        const bodyFile = join(ctx.scratch, `metrics-body-${round}.txt`);
        writeFileSync(bodyFile, body);
        const bare = await startBareServer(bodyFile, contentType);
        let bareRun: LoadRun;
        try {
          bareRun = await loadRun(`${bare.url}/metrics`, spec);
        } finally {
          await bare.stop();
        }
        const allowed = Math.floor((spanSeconds * 1000) / cacheTtlMs) + 1;
        rounds.push({ serve: serveRun, bare: bareRun, coldMs, upstreamRequests, tokenRequests, allowedUpstreamRequests: allowed, bodyBytes: body.length });
        ctx.log(
          `/metrics round ${round}/${spec.rounds}: serve p50 ${serveRun.p50Ms} ms p99 ${serveRun.p99Ms} ms ${Math.round(serveRun.scrapesPerSecond)}/s, ` +
            `${upstreamRequests} E7 requests; bare p50 ${bareRun.p50Ms} ms p99 ${bareRun.p99Ms} ms ${Math.round(bareRun.scrapesPerSecond)}/s`,
        );
      }
    });
  } finally {
    await sim.close();
  }
  return {
    spec,
    cacheTtlMs,
    rounds,
    median: {
      serve: medianRun(rounds.map((r) => r.serve)),
      bare: medianRun(rounds.map((r) => r.bare)),
      upstreamRequests: median(rounds.map((r) => r.upstreamRequests)),
      allowed: median(rounds.map((r) => r.allowedUpstreamRequests)),
      bodyBytes: median(rounds.map((r) => r.bodyBytes)),
    },
  };
}
