import { startServe, type RunningServer } from '../../src/serve/lifecycle.js';
import { loadConfig, type Config } from '../../src/config.js';
import { silentLogger } from './silent-logger.js';
import { startSimulator, type Simulator } from '@analytics-exporter/simulator';
import { startPrometheus, type PrometheusServer } from './prometheus.js';
import { simulatorEnv } from './sync.js';

/** The whole demo stack on loopback: simulator → serve (with a real PostgreSQL) → a real Prometheus scraping it. */
export interface Stack {
  /** The first source's simulator. */
  sim: Simulator;
  /** Every source's simulator, in the order of {@link StackOptions.sources}. */
  sims: Simulator[];
  serve: RunningServer;
  prometheus: PrometheusServer;
  /** The PostgreSQL URL serve writes to, and the schema. */
  databaseUrl: string;
  schema: string;
  /** Scrape job name of the exporter in Prometheus. */
  job: string;
  stop(): Promise<void>;
}

export interface StackOptions {
  /** A database of the test's own (from useTestDatabase()). */
  databaseUrl: string;
  schema?: string;
  /** Simulator records over the 7 days before now (default 50,000). */
  records?: number;
  /** Rule files for Prometheus (absolute paths). */
  ruleFiles?: string[];
  /** More environment for serve's configuration. */
  env?: Record<string, string>;
  /**
   * Names of the sources serve reads, each from a simulator of its own with other records (seed
   * 1, 2, …), all loaded into the one database. Default: the environment's one source, `default`.
   */
  sources?: string[];
  /**
   * A server in front of each simulator that serve reads E6 and E7 from (STATISTICS_URL), e.g.
   * one answering E7 with families of the test's own (test/helpers/e7-front.ts). E0 stays the
   * simulator's. Closed by `stop()`.
   */
  front?: (sim: Simulator) => Promise<{ url: string; close(): Promise<void> }>;
}

/**
 * Starts the stack and waits until the first sync succeeded (records are in the database) and
 * Prometheus has scraped the exporter at least once with `up == 1`.
 */
export async function startStack(options: StackOptions): Promise<Stack> {
  const schema = options.schema ?? 'analytics';
  const job = 'analytics-exporter';
  const now = Date.now();
  const names = options.sources;
  const sims: Simulator[] = [];
  for (let i = 0; i < (names?.length ?? 1); i++) {
    sims.push(
      await startSimulator({
        port: 0,
        seed: names ? i + 1 : undefined,
        records: options.records ?? 50_000,
        start: new Date(now - 7 * 86_400_000),
        end: new Date(now),
      }),
    );
  }
  const sim = sims[0]!;
  const fronts: Array<{ url: string; close(): Promise<void> }> = [];
  let serve: RunningServer | undefined;
  let prometheus: PrometheusServer | undefined;
  try {
    for (const s of options.front ? sims : []) fronts.push(await options.front!(s));
    const configOf = (s: Simulator): Config =>
      loadConfig({
        ...simulatorEnv(s),
        ...(options.front ? { STATISTICS_URL: fronts[sims.indexOf(s)]!.url } : {}),
        DATABASE_URL: options.databaseUrl,
        DATABASE_SCHEMA: schema,
        METRICS_LISTEN: '127.0.0.1:0',
        SYNC_START_DATE: '7d',
        SYNC_SETTLE: '0',
        SYNC_SCHEDULE: '*/2 * * * * *',
        ...options.env,
      });
    const first = configOf(sim);
    // Several sources: the environment's source of each simulator, renamed (the model a config file builds).
    const config: Config = names ? { ...first, sources: sims.map((s, i) => ({ ...configOf(s).sources[0]!, name: names[i]! })) } : first;
    serve = await startServe(config, silentLogger);
    prometheus = await startPrometheus({
      scrapeConfigs: [{ job_name: job, scrape_interval: '1s', scrape_timeout: '1s', static_configs: [{ targets: [new URL(serve.url).host] }] }],
      ...(options.ruleFiles ? { ruleFiles: options.ruleFiles } : {}),
    });
    // Every source has finished a run (one series per source).
    await prometheus.waitFor(`count(analytics_exporter_sync_runs_total{job="${job}"} >= 1) == ${sims.length}`, (r) => r.length === 1, 60_000);
    await prometheus.waitFor(`up{job="${job}"} == 1`, (r) => r.length === 1, 30_000);
  } catch (err) {
    await prometheus?.stop();
    await serve?.stop();
    await Promise.all([...fronts, ...sims].map((s) => s.close()));
    throw err;
  }
  const p = prometheus;
  const s = serve;
  return {
    sim,
    sims,
    serve: s,
    prometheus: p,
    databaseUrl: options.databaseUrl,
    schema,
    job,
    stop: async () => {
      await p.stop();
      await s.stop();
      await Promise.all([...fronts, ...sims].map((x) => x.close()));
    },
  };
}
