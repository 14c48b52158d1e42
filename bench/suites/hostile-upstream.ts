/**
 * Part of the `hostile` suite (issue 25, item 5): upstreams that try to flood `serve`. Two E7
 * answers, each against a fresh `serve` child with the default limits
 * (UPSTREAM_SAMPLE_LIMIT 200,000, UPSTREAM_LABEL_LIMIT 64, UPSTREAM_LABEL_VALUE_LENGTH_LIMIT 2,048):
 * - `series`: 1,000,000 series (about 48 MB, under UPSTREAM_MAX_BODY's 64 MiB, so only the
 *   sample limit can stop it);
 * - `label pairs`: one line with 1,000,000 label pairs (about 11.9 MB);
 * - `at the limit`: as many series as UPSTREAM_SAMPLE_LIMIT lets through (200,000), served: what
 *   the default limit lets an upstream cost.
 * Each is scraped one scrape at a time, then in rounds of ~50 concurrent scrapes; measured: the
 * scrape time (request to last byte) p50/p99 of each, `upstream_up` and the `limit` failures in
 * the last body, and the child's peak resident set (VmHWM) after all its scrapes. A failed read
 * is not cached, so every single scrape and every concurrent round reads E7 again.
 *
 * The upstream is a small server in the bench process (as in large-scrape.ts) answering E0 with a
 * token and E7 with the fixed bytes.
 */
import { readFileSync } from 'node:fs';
import { request } from 'undici';
import { startE7Upstream, startServeChild, upstreamEnv } from '../lib/children.js';
import { withFreshDatabase, type BenchContext } from '../lib/context.js';

export interface HostileUpstreamPlan {
  /** Series of the flooding E7 text (1,000,000). */
  series: number;
  /** Label pairs of the one long line (1,000,000). */
  labelPairs: number;
  /** Series of the text just within the default UPSTREAM_SAMPLE_LIMIT (200,000); 0 leaves that case out. */
  atLimitSeries: number;
  /** Scrapes one after the other, per upstream. */
  singleScrapes: number;
  /** Scrapes at once in a concurrent round (~50), and how many rounds. */
  concurrency: number;
  concurrentRounds: number;
}

export interface HostileUpstreamCase {
  name: 'series' | 'label pairs' | 'at the limit';
  upstreamBytes: number;
  /** Scrape times one at a time, in seconds: p50 and p99 (the largest, for fewer than 100 scrapes). */
  singleP50Seconds: number;
  singleP99Seconds: number;
  /** Scrape times of the concurrent rounds, every scrape of every round. */
  concurrentP50Seconds: number;
  concurrentP99Seconds: number;
  /** Scrapes that did not answer 200 (another status, or a connection error) among all of them. */
  failedScrapes: number;
  /** `analytics_exporter_upstream_up{source="default"}` in the last body. */
  upstreamUp: number;
  /** `analytics_exporter_upstream_errors_total{source="default",reason="limit"}` in the last body. */
  limitFailures: number;
  /** VmHWM of the serve child after all its scrapes, in bytes. */
  servePeakRssBytes: number;
}

export interface HostileUpstreamResult {
  plan: HostileUpstreamPlan;
  cases: HostileUpstreamCase[];
}

/** E7 text of `series` series, about 48 bytes a line, as E7 sends it (no HELP or TYPE). */
function manySeries(series: number): Buffer {
  const chunks: Buffer[] = [];
  for (let i = 0; i < series; i += 10_000) {
    let text = '';
    for (let k = i; k < Math.min(series, i + 10_000); k++) text += `userlogin_event_count{customer="c-${String(k).padStart(8, '0')}"} ${k % 1000}\n`;
    chunks.push(Buffer.from(text));
  }
  return Buffer.concat(chunks);
}

/** One sample line with `pairs` label pairs. */
function manyLabelPairs(pairs: number): Buffer {
  const labels: string[] = [];
  for (let i = 0; i < pairs; i++) labels.push(`l${i}="v"`);
  return Buffer.from(`userlogin_event_count{${labels.join(',')}} 1\n`);
}

/** The `q` quantile of `values` by the nearest rank. */
function quantile(values: readonly number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!;
}

function peakRss(pid: number): number {
  const match = /^VmHWM:\s+(\d+)\s+kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (match === null) throw new Error(`no VmHWM for process ${pid}`);
  return Number(match[1]) * 1024;
}

/** The value of the series `name{labels}` exactly as written in a text body, or NaN. */
function seriesValue(body: string, series: string): number {
  const at = body.indexOf(`\n${series} `);
  if (at === -1) return NaN;
  const start = at + series.length + 2;
  return Number(body.slice(start, body.indexOf('\n', start)));
}

/**
 * One scrape on a connection of its own (`reset`), as Prometheus's client retries a request whose
 * reused keep-alive connection the server closed at that moment: a failure here is serve's.
 */
async function scrape(url: string): Promise<{ seconds: number; status: number; body: string }> {
  const started = performance.now();
  try {
    const response = await request(url, { headers: { 'x-prometheus-scrape-timeout-seconds': '10' }, reset: true });
    const body = await response.body.text();
    return { seconds: (performance.now() - started) / 1000, status: response.statusCode, body };
  } catch {
    return { seconds: (performance.now() - started) / 1000, status: 0, body: '' };
  }
}

async function runCase(ctx: BenchContext, plan: HostileUpstreamPlan, name: HostileUpstreamCase['name'], bytes: Buffer): Promise<HostileUpstreamCase> {
  const { server: upstream, url: upstreamUrl } = await startE7Upstream(bytes);
  try {
    return await withFreshDatabase(ctx, 'bench_hostile_upstream', async (db) => {
      // Its 50 concurrent scrapes come from one address: above the default 32 connections per client.
      const serve = await startServeChild(upstreamEnv(upstreamUrl, db.url, { METRICS_MAX_CONNECTIONS_PER_CLIENT: String(plan.concurrency + 8) }));
      try {
        const url = `${serve.url}/metrics`;
        const single: number[] = [];
        const concurrent: number[] = [];
        let failed = 0;
        let last = '';
        for (let i = 0; i < plan.singleScrapes; i++) {
          const result = await scrape(url);
          single.push(result.seconds);
          if (result.status !== 200) failed++;
          else last = result.body;
        }
        for (let round = 0; round < plan.concurrentRounds; round++) {
          const results = await Promise.all(Array.from({ length: plan.concurrency }, () => scrape(url)));
          for (const result of results) {
            concurrent.push(result.seconds);
            if (result.status !== 200) failed++;
          }
          last = results.find((result) => result.status === 200)?.body ?? last;
        }
        const result: HostileUpstreamCase = {
          name,
          upstreamBytes: bytes.length,
          singleP50Seconds: quantile(single, 0.5),
          singleP99Seconds: quantile(single, 0.99),
          concurrentP50Seconds: quantile(concurrent, 0.5),
          concurrentP99Seconds: quantile(concurrent, 0.99),
          failedScrapes: failed,
          upstreamUp: seriesValue(last, 'analytics_exporter_upstream_up{source="default"}'),
          // Absent (no failure yet) for a source within its limits.
          limitFailures: seriesValue(last, 'analytics_exporter_upstream_errors_total{source="default",reason="limit"}') || 0,
          servePeakRssBytes: peakRss(serve.pid),
        };
        ctx.log(
          `hostile upstream, ${name} (${(bytes.length / 1e6).toFixed(1)} MB): single p50 ${result.singleP50Seconds.toFixed(3)} s p99 ${result.singleP99Seconds.toFixed(3)} s, ` +
            `${plan.concurrency} concurrent p50 ${result.concurrentP50Seconds.toFixed(3)} s p99 ${result.concurrentP99Seconds.toFixed(3)} s, ` +
            `upstream_up ${result.upstreamUp}, limit failures ${result.limitFailures}, serve peak RSS ${(result.servePeakRssBytes / 2 ** 20).toFixed(1)} MiB`,
        );
        return result;
      } finally {
        await serve.stop();
      }
    });
  } finally {
    await new Promise((resolve) => upstream.close(resolve));
  }
}

/**
 * Runs the hostile-upstream part: each flooding E7 answer against a fresh serve child with the
 * default limits (see the file's comment).
 *
 * @throws when serve answers a scrape with another status than 200, serves a flooding source as
 *   up (the limits did not hold), or fails the source at the limit.
 */
export async function hostileUpstreamPart(ctx: BenchContext, plan: HostileUpstreamPlan): Promise<HostileUpstreamResult> {
  const cases: HostileUpstreamCase[] = [];
  cases.push(await runCase(ctx, plan, 'series', manySeries(plan.series)));
  cases.push(await runCase(ctx, plan, 'label pairs', manyLabelPairs(plan.labelPairs)));
  if (plan.atLimitSeries > 0) cases.push(await runCase(ctx, plan, 'at the limit', manySeries(plan.atLimitSeries)));
  for (const c of cases) {
    const expectedUp = c.name === 'at the limit' ? 1 : 0;
    if (c.failedScrapes > 0 || c.upstreamUp !== expectedUp) {
      throw new Error(`hostile upstream, ${c.name}: ${c.failedScrapes} failed scrapes, upstream_up ${c.upstreamUp} (expected ${expectedUp})`);
    }
  }
  return { plan, cases };
}

function caseLabel(plan: HostileUpstreamPlan, name: HostileUpstreamCase['name']): string {
  if (name === 'series') return `${plan.series.toLocaleString('en-US')} series`;
  if (name === 'label pairs') return `1 line, ${plan.labelPairs.toLocaleString('en-US')} label pairs`;
  return `${plan.atLimitSeries.toLocaleString('en-US')} series (at the limit, served)`;
}

/** The part's rows for BENCHMARKS.md: one per upstream. */
export function hostileUpstreamMarkdown(result: HostileUpstreamResult): string[] {
  const s = (seconds: number) => `${(seconds * 1000).toFixed(0)} ms`;
  return [
    `| Upstream (E7) | Body | 1 at a time p50 / p99 | ${result.plan.concurrency} at once p50 / p99 | upstream_up | limit failures | serve peak RSS |`,
    '|---|---|---|---|---|---|---|',
    ...result.cases.map(
      (c) =>
        `| ${caseLabel(result.plan, c.name)} | ` +
        `${(c.upstreamBytes / 1e6).toFixed(1)} MB | ${s(c.singleP50Seconds)} / ${s(c.singleP99Seconds)} | ${s(c.concurrentP50Seconds)} / ${s(c.concurrentP99Seconds)} | ` +
        `${c.upstreamUp} | ${c.limitFailures} | ${(c.servePeakRssBytes / 2 ** 20).toFixed(1)} MiB |`,
    ),
  ];
}
