/**
 * `npm run bench [-- --quick] [-- --profile] [-- --only etl,growth,slow,metrics,large-scrape,requests,paced,dashboards,sources,audit,hostile,wire,embedded] [-- --out FILE]`
 *
 * Builds nothing itself (`npm run bench` runs `npm run build` first), starts a throwaway
 * PostgreSQL cluster (test/helpers/postgres.ts) and runs the benchmarks of the issue:
 * 1. ETL throughput beside the store's and the upstream's limits, 2. peak memory of `sync`,
 * 3. a slow upstream, 4. growth with the number of records, 5. /metrics under load, 6. E6 requests
 * per window against the minimum (order-independent reads), 7. /metrics with 100,000 upstream series
 * (a cached scrape against promtool's parse, serve's peak memory), 8. a backfill paced under the
 * simulator's rate limit (UPSTREAM_RATE_LIMIT) against the same backfill without a budget, 9. every SQL
 * query of the Analytics history dashboard at two sizes (bench/suites/dashboards.ts), 10. `serve` with
 * 1, 4 and 16 sources in CONFIG_FILE: memory per source, scrape latency and CPU (bench/suites/sources.ts), 11. the audit's E6
 * requests over a year of hourly windows with 0 and k drifted ones (bench/suites/audit.ts), 12. scrapes from one address while
 * another attacks serve: 2,000 slowloris connections, plain and TLS (bench/suites/hostile.ts), 14. `sync` over a
 * 100mbit link with and without gzip (bench/suites/wire.ts), 16. the embedded default's ./data
 * against the same records in PostgreSQL, and `sync` into PGlite at scale (bench/suites/embedded.ts). Prints the
 * tables and writes them to BENCHMARKS.md with the machine's description and bench/findings.md.
 *
 * Needs: the PostgreSQL server binaries (as the tests do: `apt-get install postgresql`, or
 * scripts/ensure-postgres.sh) and psql (`apt-get install postgresql-client`, part of that).
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { startThrowawayCluster } from '../test/helpers/postgres.js';
import { ROOT, requireBuild } from './lib/children.js';

import type { BenchContext } from './lib/context.js';
import { machineTicks, stealShare } from './lib/cpu.js';
import { describeMachine } from './lib/machine.js';
import { renderMarkdown, targetResults, verdicts, type Report } from './lib/report.js';
import { dashboardsSuite, type DashboardsSpec } from './suites/dashboards.js';
import { etlSuite, profileEtl, type EtlSpec } from './suites/etl.js';
import { measureSizes, sizeResult, type SizeResult } from './suites/growth.js';
import { largeScrapeSuite, type LargeScrapeSpec } from './suites/large-scrape.js';
import { metricsSuite, type MetricsSpec } from './suites/metrics.js';
import { requestsSuite, type RequestsSet, type RequestsSpec } from './suites/requests.js';
import { pacedSuite, type PacedSpec } from './suites/paced.js';
import { slowSuite, type SlowSpec } from './suites/slow.js';
import { sourcesSuite, type SourcesSpec } from './suites/sources.js';
import { auditSuite, type AuditSpec } from './suites/audit.js';
import { hostileSuite, type HostileSpec } from './suites/hostile.js';
import { wireSuite, type WireSpec } from './suites/wire.js';
import { QUICK_HOSTILE_AUTH_PLAN } from './suites/hostile-auth.js';
import { embeddedSuite, type EmbeddedSpec } from './suites/embedded.js';

interface Plan {
  etl: EtlSpec;
  /** Sizes of the growth benchmark below the ETL's (which is the largest), and runs of each. */
  smallerSizes: number[];
  sizeRuns: number;
  /** The size the largest is compared with for the memory target. */
  memoryBase: number;
  /** Runs of the memory base and the ETL size again with {@link V8_DEFAULT_HEAP}; 0 = none. */
  tunedRuns: number;
  slow: SlowSpec;
  metrics: MetricsSpec;
  largeScrape: LargeScrapeSpec;
  requests: RequestsSpec;
  paced: PacedSpec;
  dashboards: DashboardsSpec;
  sources: SourcesSpec;
  audit: AuditSpec;
  hostile: HostileSpec;
  wire: WireSpec;
  embedded: EmbeddedSpec;
}

/** 6.: the ETL's data set, and dense data: whole-minute timestamps (about 21 records a minute, and 10× that) with ties reshuffled per request. */
function requestSets(etl: EtlSpec): RequestsSet[] {
  return [
    {
      name: `the ETL's data set: ${etl.records.toLocaleString('en-US')} records, ${etl.days} one-day windows`,
      records: etl.records,
      days: etl.days,
      window: '1d',
      precisionMs: 1000,
      order: 'stable',
    },
    {
      name: 'dense: 30,000 records in a day on whole minutes, 1h windows, ties reshuffled',
      records: 30_000,
      days: 1,
      window: '1h',
      precisionMs: 60_000,
      order: 'ties',
    },
    {
      name: 'dense ×10: 300,000 records in a day on whole minutes, 1h windows, ties reshuffled',
      records: 300_000,
      days: 1,
      window: '1h',
      precisionMs: 60_000,
      order: 'ties',
    },
  ];
}

/** Where the full run's report goes (and bench/results.json beside it). */
const DEFAULT_OUT = join(ROOT, 'BENCHMARKS.md');

const PLANS: Record<'full' | 'quick', Plan> = {
  full: {
    etl: { records: 1_000_000, days: 25, rounds: 5 },
    smallerSizes: [10_000, 100_000],
    sizeRuns: 5,
    memoryBase: 100_000,
    tunedRuns: 3,
    slow: { records: 200_000, days: 20, latencyMs: 100, concurrentRuns: 5, sequentialRuns: 3 },
    metrics: { scrapes: 2000, connections: 50, rounds: 5 },
    largeScrape: { series: 100_000, rounds: 5, scrapes: 20, promtoolRuns: 5 },
    requests: { sets: requestSets({ records: 1_000_000, days: 25, rounds: 5 }) },
    paced: { records: 100_000, days: 5, pageSize: 500, limit: { perSecond: 20, burst: 5 }, budget: { perSecond: 16, burst: 4 }, runs: 3 },
    dashboards: { sizes: [1_000_000, 5_000_000], days: 30, runs: 5, rangesDays: [30, 7] },
    // 10 connections: a few Prometheus servers and probe jobs at once, not a flood; the cold
    // scrapes are sequential so that each one reads every source.
    sources: { counts: [1, 4, 16], rounds: 3, warmupScrapes: 20, scrapes: 2000, connections: 10, coldScrapes: 200 },
    audit: { windows: 8760, records: 17_520, drifts: [1, 10, 100] },
    hostile: {
      slowloris: { attackConnections: 2000, scrapeSeconds: 30, concurrency: 2 },
      auth: {
        attackers: 150,
        attackSeconds: 30,
        baselineSeconds: 5,
        scrapeIntervalMs: 100,
        attackCosts: [10, 12],
        timingCosts: [4, 8, 10, 12],
        timingSamples: 31,
      },
      upstream: { series: 1_000_000, labelPairs: 1_000_000, atLimitSeries: 200_000, singleScrapes: 50, concurrency: 50, concurrentRounds: 5 },
    },
    wire: { records: 1_000_000, days: 25, rounds: 3, bandwidth: '100mbit' },
    embedded: { days: 30, scale: { records: 1_000_000, days: 25 } },
  },
  // The same benchmarks at a fifth of the ETL
  // size, half the slow one and half the scrapes; three ETL rounds and growth runs, two of the
  // slow and /metrics ones (one sequential slow run); no unasked profile.
  quick: {
    etl: { records: 200_000, days: 25, rounds: 3 },
    smallerSizes: [10_000, 100_000],
    sizeRuns: 3,
    memoryBase: 100_000,
    tunedRuns: 0,
    slow: { records: 100_000, days: 10, latencyMs: 100, concurrentRuns: 2, sequentialRuns: 1 },
    metrics: { scrapes: 1000, connections: 50, rounds: 2 },
    largeScrape: { series: 100_000, rounds: 2, scrapes: 10, promtoolRuns: 3 },
    requests: { sets: requestSets({ records: 200_000, days: 25, rounds: 3 }) },
    paced: { records: 20_000, days: 2, pageSize: 500, limit: { perSecond: 20, burst: 5 }, budget: { perSecond: 16, burst: 4 }, runs: 1 },
    dashboards: { sizes: [100_000, 500_000], days: 30, runs: 5, rangesDays: [30, 7] },
    sources: { counts: [1, 4, 16], rounds: 1, warmupScrapes: 20, scrapes: 1000, connections: 10, coldScrapes: 100 },
    audit: { windows: 8760, records: 17_520, drifts: [1, 10, 100] },
    hostile: {
      slowloris: { attackConnections: 2000, scrapeSeconds: 10, concurrency: 2 },
      auth: QUICK_HOSTILE_AUTH_PLAN,
      upstream: { series: 1_000_000, labelPairs: 1_000_000, atLimitSeries: 200_000, singleScrapes: 20, concurrency: 50, concurrentRounds: 2 },
    },
    wire: { records: 200_000, days: 25, rounds: 1, bandwidth: '100mbit' },
    embedded: { days: 30, scale: { records: 100_000, days: 25 } },
  },
};

/**
 * The CLI sets V8's heap-growing factor itself (src/heap.ts); an operator's flag turns that off.
 * The memory benchmark runs the sync with V8's own sizing too, to show what the setting changes.
 */
const V8_DEFAULT_HEAP = ['--heap-growing-percent=0'];

const SUITES = [
  'etl',
  'growth',
  'slow',
  'metrics',
  'large-scrape',
  'requests',
  'paced',
  'dashboards',
  'sources',
  'audit',
  'hostile',
  'wire',
  'embedded',
] as const;
type Suite = (typeof SUITES)[number];

function usage(message: string): never {
  process.stderr.write(`bench: ${message}\nusage: npm run bench -- [--quick] [--profile] [--only ${SUITES.join(',')}] [--out FILE]\n`);
  process.exit(2);
}

async function main(): Promise<void> {
  let parsed;
  try {
    parsed = parseArgs({
      options: {
        quick: { type: 'boolean', default: false },
        profile: { type: 'boolean', default: false },
        only: { type: 'string' },
        out: { type: 'string', default: DEFAULT_OUT },
        help: { type: 'boolean', short: 'h', default: false },
      },
      strict: true,
    });
  } catch (err) {
    usage((err as Error).message);
  }
  const { values } = parsed;
  if (values.help === true) {
    process.stdout.write(
      `usage: npm run bench -- [--quick] [--profile] [--only ${SUITES.join(',')}] [--out FILE]\n` +
        '  --quick    smaller sizes and fewer runs (a few minutes on a quiet 2-core machine)\n' +
        '  --profile  add a CPU profile of one more ETL sync (a full run adds one by itself when a sync target is missed)\n' +
        '  --only     run only these suites (comma-separated)\n' +
        '  --out      where the markdown goes (default BENCHMARKS.md)\n' +
        'Needs PostgreSQL 15 binaries and psql (scripts/ensure-postgres.sh). Exit status: 0 done, 1 failed, 2 bad usage.\n',
    );
    return;
  }
  const only = new Set<Suite>();
  for (const name of (values.only ?? SUITES.join(',')).split(',')) {
    if (!(SUITES as readonly string[]).includes(name)) usage(`unknown suite ${JSON.stringify(name)}`);
    only.add(name as Suite);
  }
  requireBuild();
  const quick = values.quick === true;
  const plan = PLANS[quick ? 'quick' : 'full'];
  const startedAt = new Date();
  const loadStart = loadavg()[0]!;
  const ticksStart = machineTicks();
  const started = performance.now();
  const log = (line: string) => process.stderr.write(`[${((performance.now() - started) / 1000).toFixed(0).padStart(4)} s] ${line}\n`);
  const command = `npm run bench${process.argv.length > 2 ? ` -- ${process.argv.slice(2).join(' ')}` : ''}`;

  log(`${quick ? 'quick' : 'full'} run: starting a throwaway PostgreSQL cluster`);
  const cluster = await startThrowawayCluster();
  const scratch = mkdtempSync(join(tmpdir(), 'bench-'));
  const ctx: BenchContext = { quick, cluster, scratch, log };
  try {
    const machine = await describeMachine(cluster.url);
    const report: Report = {
      quick,
      machine,
      startedAt,
      totalSeconds: 0,
      command,
      load: { start: loadStart, end: loadStart, steal: undefined },
      memoryBaseRecords: plan.memoryBase,
    };

    // The ETL first: its sync runs are also the largest size of the memory and growth tables.
    if (only.has('etl') || only.has('growth')) report.etl = await etlSuite(ctx, plan.etl);
    if (only.has('growth')) {
      const smaller = await measureSizes(ctx, plan.smallerSizes, plan.etl.days, plan.sizeRuns);
      const largest: SizeResult = sizeResult(
        plan.etl.records,
        report.etl!.rounds.map((r) => r.sync),
      );
      report.sizes = [...smaller, largest];
      if (plan.tunedRuns > 0) {
        report.tuned = {
          nodeArgs: V8_DEFAULT_HEAP,
          sizes: await measureSizes(ctx, [plan.memoryBase, plan.etl.records], plan.etl.days, plan.tunedRuns, V8_DEFAULT_HEAP),
        };
      }
    }
    if (only.has('slow')) report.slow = await slowSuite(ctx, plan.slow);
    if (only.has('metrics')) report.metrics = await metricsSuite(ctx, plan.metrics);
    if (only.has('large-scrape')) report.largeScrape = await largeScrapeSuite(ctx, plan.largeScrape);
    if (only.has('requests')) report.requests = await requestsSuite(ctx, plan.requests);
    if (only.has('paced')) report.paced = await pacedSuite(ctx, plan.paced);
    if (only.has('dashboards')) report.dashboards = await dashboardsSuite(ctx, plan.dashboards);
    if (only.has('sources')) report.sources = await sourcesSuite(ctx, plan.sources);
    if (only.has('audit')) report.audit = await auditSuite(ctx, plan.audit);
    if (only.has('hostile')) report.hostile = await hostileSuite(ctx, plan.hostile);
    if (only.has('wire')) report.wire = await wireSuite(ctx, plan.wire);
    if (only.has('embedded')) report.embedded = await embeddedSuite(ctx, plan.embedded);

    const missed = verdicts(report).filter((v) => !v.met);
    const etlMissed = missed.some((v) => /^(2|4|13[a-d]?)\./.test(v.name));
    // A missed target in a full run is profiled unasked; a quick run stays quick (--profile asks).
    if (report.etl && (values.profile === true || (etlMissed && !quick))) {
      log(etlMissed ? 'a sync target was missed: profiling one more ETL run with node --cpu-prof' : 'profiling one more ETL run with node --cpu-prof');
      report.profile = await profileEtl(ctx, plan.etl, ROOT);
    }

    const before = join(ROOT, 'bench', 'before.json');
    if (existsSync(before) && !quick) report.before = JSON.parse(readFileSync(before, 'utf8')) as NonNullable<Report['before']>;
    report.totalSeconds = (performance.now() - started) / 1000;
    report.load.end = loadavg()[0]!;
    report.load.steal = stealShare(ticksStart, machineTicks());
    // The terminal gets the measurements; the file also gets the hand-written findings.
    process.stdout.write(renderMarkdown(report));
    const findings = join(ROOT, 'bench', 'findings.md');
    if (existsSync(findings)) report.findings = readFileSync(findings, 'utf8');

    writeFileSync(values.out, renderMarkdown(report));
    // bench/results.json beside BENCHMARKS.md; another --out gets its own (x.md → x.results.json),
    // so a partial or quick run never overwrites the committed figures.
    const results = values.out === DEFAULT_OUT ? join(ROOT, 'bench', 'results.json') : `${values.out.replace(/\.md$/, '')}.results.json`;
    writeFileSync(results, `${JSON.stringify(targetResults(report), null, 2)}\n`);
    log(`wrote ${values.out} and ${results}; ${missed.length === 0 ? 'every target met' : `missed: ${missed.map((v) => v.name).join('; ')}`}`);
  } finally {
    rmSync(scratch, { recursive: true, force: true });
    await cluster.stop();
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
