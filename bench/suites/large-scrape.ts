/**
 * 7. A large upstream: E7 answers 100,000 series (about 8.3 MB of text). Measures, against a
 * `serve` child: the first scrape (E7 read, parse, serialise), cached scrapes in both formats
 * (METRICS_CACHE_TTL long enough that every later scrape is served from the cache), and the
 * child's peak resident set (VmHWM) at the end; and, as the yardstick, how long
 * `promtool check metrics` takes to read the same text.
 *
 * The upstream is a small server in the bench process that answers E0 with a token and E7 with
 * the fixed text: the simulator's E7 has at most 7 event types × 9,999 customers of series.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startE7Upstream, startServeChild, upstreamEnv } from '../lib/children.js';
import { withFreshDatabase, type BenchContext } from '../lib/context.js';
import { median } from '../lib/stats.js';

export interface LargeScrapeSpec {
  series: number;
  /** Fresh `serve` children, each scraped cold once and then cached. */
  rounds: number;
  /** Cached scrapes per format. */
  scrapes: number;
  /** Runs of `promtool check metrics`. */
  promtoolRuns: number;
}

export interface LargeScrapeResult {
  spec: LargeScrapeSpec;
  upstreamBytes: number;
  /** The first scrape, which reads E7, in seconds. */
  firstScrapeSeconds: number;
  /** Median of the cached scrapes, request to last byte, in seconds. */
  cachedTextSeconds: number;
  cachedOpenMetricsSeconds: number;
  cachedTextRange: [number, number];
  bodyBytes: number;
  /** `analytics_exporter_upstream_samples` in the last scrape. */
  upstreamSamples: number;
  promtoolSeconds: number;
  promtoolRange: [number, number];
  /** VmHWM of each round's serve child after all its scrapes, in bytes; and the largest. */
  servePeakRssRounds: number[];
  servePeakRssBytes: number;
}

/** Prometheus text of `series` series, about 83 bytes a line, as E7 sends it (no HELP or TYPE). */
export function largeExposition(series: number): string {
  const events = ['userlogin', 'dialogcreated', 'dialogsubmitted', 'documentcreated', 'pdfcreated', 'smssent', 'emailsent'];
  const lines: string[] = [];
  for (let i = 0; i < series; i++) {
    const customer = Math.floor(i / events.length);
    lines.push(
      `${events[i % events.length]}_event_count{customer="Customer ${String(customer).padStart(6, '0')}",customer_id="c-${String(customer).padStart(8, '0')}"} ${(i * 7919) % 100_000}`,
    );
  }
  return `${lines.join('\n')}\n`;
}

async function timedFetch(url: string, accept?: string): Promise<{ seconds: number; body: Buffer }> {
  const started = performance.now();
  const response = await fetch(url, accept === undefined ? {} : { headers: { accept } });
  const body = Buffer.from(await response.arrayBuffer());
  if (response.status !== 200) throw new Error(`/metrics answered ${response.status}`);
  return { seconds: (performance.now() - started) / 1000, body };
}

function peakRss(pid: number): number {
  const match = /^VmHWM:\s+(\d+)\s+kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (match === null) throw new Error(`no VmHWM for process ${pid}`);
  return Number(match[1]) * 1024;
}

function sampleValue(body: string, name: string): number {
  // With or without labels (the upstream gauges carry `source`): the first series of the name.
  const match = new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'm').exec(body);
  if (match === null) throw new Error(`${name} missing from the /metrics body`);
  return Number(match[1]);
}

export async function largeScrapeSuite(ctx: BenchContext, spec: LargeScrapeSpec): Promise<LargeScrapeResult> {
  const text = largeExposition(spec.series);
  const bytes = Buffer.from(text);
  const textFile = join(ctx.scratch, 'large-upstream.prom');
  writeFileSync(textFile, bytes);

  const promtool: number[] = [];
  for (let run = 0; run < spec.promtoolRuns; run++) {
    const started = performance.now();
    // Exit status 1 means lint findings (no HELP); only a missing binary is an error here.
    const result = spawnSync('promtool', ['check', 'metrics'], { input: bytes, stdio: ['pipe', 'ignore', 'ignore'] });
    if (result.error !== undefined) throw new Error(`promtool check metrics could not run: ${result.error.message} (scripts/ensure-prometheus.sh installs it)`);
    promtool.push((performance.now() - started) / 1000);
  }
  ctx.log(`large scrape: promtool check metrics on ${(bytes.length / 1e6).toFixed(1)} MB: ${promtool.map((s) => s.toFixed(3)).join(', ')} s`);

  const { server: upstream, url: upstreamUrl } = await startE7Upstream(bytes);
  try {
    return await withFreshDatabase(ctx, 'bench_large_scrape', async (db) => {
      const first: number[] = [];
      const textTimes: number[] = [];
      const omTimes: number[] = [];
      const peaks: number[] = [];
      let last: Buffer = Buffer.alloc(0);
      for (let round = 1; round <= spec.rounds; round++) {
        const serve = await startServeChild(upstreamEnv(upstreamUrl, db.url, { METRICS_CACHE_TTL: '1h' }));
        try {
          const url = `${serve.url}/metrics`;
          first.push((await timedFetch(url)).seconds);
          for (let i = 0; i < spec.scrapes; i++) {
            const scrape = await timedFetch(url);
            textTimes.push(scrape.seconds);
            last = scrape.body;
          }
          for (let i = 0; i < spec.scrapes; i++) omTimes.push((await timedFetch(url, 'application/openmetrics-text;version=1.0.0')).seconds);
          peaks.push(peakRss(serve.pid));
        } finally {
          await serve.stop();
        }
        ctx.log(
          `large scrape round ${round}/${spec.rounds}: first ${first[first.length - 1]!.toFixed(3)} s, serve peak RSS ${(peaks[peaks.length - 1]! / 2 ** 20).toFixed(1)} MiB`,
        );
      }
      const body = last.toString();
      const result: LargeScrapeResult = {
        spec,
        upstreamBytes: bytes.length,
        firstScrapeSeconds: median(first),
        cachedTextSeconds: median(textTimes),
        cachedOpenMetricsSeconds: median(omTimes),
        cachedTextRange: [Math.min(...textTimes), Math.max(...textTimes)],
        bodyBytes: last.length,
        upstreamSamples: sampleValue(body, 'analytics_exporter_upstream_samples'),
        promtoolSeconds: median(promtool),
        promtoolRange: [Math.min(...promtool), Math.max(...promtool)],
        servePeakRssRounds: peaks,
        servePeakRssBytes: Math.max(...peaks),
      };
      if (result.upstreamSamples !== spec.series) throw new Error(`serve served ${result.upstreamSamples} upstream samples, not ${spec.series}`);
      ctx.log(
        `large scrape: cached text ${result.cachedTextSeconds.toFixed(4)} s, cached OpenMetrics ${result.cachedOpenMetricsSeconds.toFixed(4)} s, ` +
          `serve peak RSS at most ${(result.servePeakRssBytes / 2 ** 20).toFixed(1)} MiB`,
      );
      return result;
    });
  } finally {
    await new Promise((resolve) => upstream.close(resolve));
  }
}
