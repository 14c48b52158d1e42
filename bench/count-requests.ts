/**
 * Counts the E6 requests one `sync` run makes on the ETL's data set (bench/suites/etl.ts: one-day
 * windows, the default settings, the simulator at zero latency), against the pages the data needs
 * (Σ over windows of ceil(records ÷ pageSize)), by kind. No timing: it needs no quiet machine.
 *
 *   npx tsx bench/count-requests.ts [records=1000000] [days=25] [SETTING=value ...]
 *
 * Runs in process (runSync) into a fresh database of a throwaway PostgreSQL cluster.
 */
import { loadConfig } from '../src/config.js';
import { createPool } from '../src/db/pool.js';
import { migrate } from '../src/db/migrate.js';
import { runSync } from '../src/sync/run/run.js';
import { planWindows } from '../src/sync/windows.js';
import { AnalyticsClient } from '../src/upstream/analytics.js';
import { startSimulator, type SimulatorRequestEvent } from '@analytics-exporter/simulator';
import { createTestDatabase, startThrowawayCluster } from '../test/helpers/postgres.js';
import { pgDeps } from '../test/helpers/pg-deps.js';
import { silentLogger } from '../test/helpers/silent-logger.js';
import { simulatorEnv } from '../test/helpers/sync.js';
import { DATA_END, daysBefore } from './lib/context.js';
import { SYNC_ENV } from './suites/etl.js';

const records = Number(process.argv[2] ?? 1_000_000);
const days = Number(process.argv[3] ?? 25);
const start = daysBefore(DATA_END, days);

const requests: SimulatorRequestEvent[] = [];
const sim = await startSimulator({ records, start, end: DATA_END, onRequest: (e) => requests.push(e) });
const cluster = await startThrowawayCluster();
const db = await createTestDatabase(cluster.url, 'count_requests');
const overrides = Object.fromEntries(process.argv.slice(4).map((a) => [a.slice(0, a.indexOf('=')), a.slice(a.indexOf('=') + 1)]));
const config = loadConfig({ ...simulatorEnv(sim), ...SYNC_ENV, ...overrides });
const sync = config.sources[0]!.sync;
const pool = createPool(db.url, silentLogger);
const client = AnalyticsClient.fromConfig(config.sources[0]!.upstream!, { log: silentLogger });
try {
  await migrate(pool, 'analytics', silentLogger);
  const result = await runSync(pgDeps({ pool, client, config: sync, tables: config.tables, schema: 'analytics', log: silentLogger }), {
    from: start,
    to: DATA_END,
  });
  const windows = planWindows(start.getTime(), DATA_END.getTime(), sync.windowMs);
  const pages = windows.reduce((n, w) => n + Math.max(1, Math.ceil(sim.dataset.count(new Date(w.start), new Date(w.end), false) / sync.pageSize)), 0);
  const kinds = classify(requests.filter((e) => e.endpoint === 'analytics'));
  const total = Object.values(kinds).reduce((a, b) => a + (typeof b === 'number' ? b : 0), 0);
  console.log(
    JSON.stringify(
      {
        records,
        days,
        result: { status: result.status, records: 'records' in result ? result.records : undefined },
        pages,
        requests: total,
        ratio: +(total / pages).toFixed(4),
        kinds,
      },
      null,
      2,
    ),
  );
} finally {
  await client.close();
  await pool.end();
  await db.drop();
  await cluster.stop();
  await sim.close();
}

/** E6 requests by kind, from their query: the clock probe, counts, boundary sets, page 1 of slices (fitting or overflowing), later pages, repeats. */
function classify(events: readonly SimulatorRequestEvent[]): Record<string, number> {
  const kinds: Record<string, number> = {};
  const seen = new Set<string>();
  const fills: number[] = [];
  const add = (kind: string): void => void (kinds[kind] = (kinds[kind] ?? 0) + 1);
  for (const e of events) {
    const q = new URL(e.path, 'http://x').searchParams;
    const from = new Date(q.get('startDate')!);
    const to = new Date(q.get('toDate')!);
    const size = Number(q.get('pageSize'));
    const page = Number(q.get('pageNumber') ?? 1);
    const key = `${q.get('startDate')}|${q.get('toDate')}|${size}|${page}`;
    if (seen.has(key)) add('repeat');
    seen.add(key);
    if (to.getTime() < start.getTime() || from.getTime() >= DATA_END.getTime() + 86_400_000) add('clock probe');
    else if (size === 1) add('count (pageSize 1)');
    else if (from.getTime() === to.getTime()) add(page === 1 ? 'boundary set' : 'boundary set, later page');
    else if (page > 1) add('later page');
    else {
      const n = sim.dataset.count(from, to, true);
      add(n > size ? 'page 1, overflow' : 'page 1, leaf');
      if (n <= size) fills.push(n / size);
    }
  }
  fills.sort((a, b) => a - b);
  if (fills.length > 0)
    kinds['leaf fill ‰: min, median, max'] = [fills[0]!, fills[fills.length >> 1]!, fills[fills.length - 1]!].map((f) => Math.round(f * 1000)) as never;
  return kinds;
}
