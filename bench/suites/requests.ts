/**
 * 6. Requests per window: the sync takes every record from a slice E6 answers
 * completely in one page, so it makes more requests than offset paging would; how many more?
 * Each data set is read through the sync's own window reader (bench/lib/reader.ts) against the
 * simulator in this process, and the requests made are set against the minimum:
 * Σ over windows of max(1, ceil(records in the window ÷ pageSize)), which is what exact offset
 * paging of the same windows needs, and what any reader that takes one page per request needs
 * at least.
 */
import { loadConfig } from '../../src/config.js';
import { silentLogger } from '../../test/helpers/silent-logger.js';
import { startSimulator, type RecordOrder } from '@analytics-exporter/simulator';
import { planWindows } from '../../src/sync/windows.js';
import { AnalyticsClient } from '../../src/upstream/analytics.js';
import { DATA_END, daysBefore, type BenchContext } from '../lib/context.js';
import { readWindows } from '../lib/reader.js';

export interface RequestsSet {
  name: string;
  records: number;
  days: number;
  /** SYNC_WINDOW. */
  window: string;
  /** Timestamps are multiples of this (the simulator's timePrecisionMs): 60,000 = whole minutes, dense ties. */
  precisionMs: number;
  order: RecordOrder;
}

export interface RequestsSpec {
  sets: RequestsSet[];
}

export interface RequestsRow {
  set: RequestsSet;
  windows: number;
  records: number;
  pageSize: number;
  minimum: number;
  requests: number;
  /** The simulator's own count of E6 requests; equal to `requests` or the suite fails. */
  simulatorRequests: number;
  /** Requests of the first window, which has nothing to learn from, and the largest of the others. */
  firstWindow: number;
  splits: number;
  instants: number;
  ratio: number;
  seconds: number;
}

export interface RequestsResult {
  rows: RequestsRow[];
}

export async function requestsSuite(ctx: BenchContext, spec: RequestsSpec): Promise<RequestsResult> {
  const rows: RequestsRow[] = [];
  for (const set of spec.sets) {
    ctx.log(`requests: ${set.name}`);
    const start = daysBefore(DATA_END, set.days);
    const sim = await startSimulator({ records: set.records, start, end: DATA_END, timePrecisionMs: set.precisionMs, order: set.order });
    const config = loadConfig({ STATISTICS_URL: sim.url, AUTH_URL: sim.url, CLIENT_ID: 'demo-client', CLIENT_SECRET: 'demo-secret', SYNC_WINDOW: set.window });
    const client = AnalyticsClient.fromConfig(config.sources[0]!.upstream!, { log: silentLogger });
    try {
      const windows = planWindows(start.getTime(), DATA_END.getTime(), config.sources[0]!.sync.windowMs);
      const pageSize = config.sources[0]!.sync.pageSize;
      const minimum = windows.reduce((n, w) => n + Math.max(1, Math.ceil(sim.dataset.count(new Date(w.start), new Date(w.end), false) / pageSize)), 0);
      const before = sim.stats.analyticsRequests;
      const started = performance.now();
      const counts = await readWindows(client, windows, config.sources[0]!.sync);
      const seconds = (performance.now() - started) / 1000;
      const requests = counts.requests.reduce((a, b) => a + b, 0);
      const simulatorRequests = sim.stats.analyticsRequests - before;
      if (requests !== simulatorRequests)
        throw new Error(`requests: ${set.name}: the reader counted ${requests} E6 requests, the simulator ${simulatorRequests}`);
      const expected = sim.dataset.count(start, DATA_END, false);
      if (counts.records !== expected) throw new Error(`requests: ${set.name}: read ${counts.records} records, the range holds ${expected}`);
      rows.push({
        set,
        windows: windows.length,
        records: counts.records,
        pageSize,
        minimum,
        requests,
        simulatorRequests,
        firstWindow: counts.requests[0] ?? 0,
        splits: counts.splits,
        instants: counts.instants,
        ratio: requests / minimum,
        seconds,
      });
    } finally {
      await client.close();
      await sim.close();
    }
  }
  return { rows };
}
