/**
 * The upstream side's limit: pages through the same windows as `sync` would, with the same
 * client and prefetcher (src/upstream/analytics.ts, src/sync/prefetch.ts) and the same
 * concurrency, but discards every page instead of writing it. Run as a child process by the
 * bench (`node --import tsx bench/lib/fetch-only.ts '<json>'`); prints one JSON line: records,
 * pages, seconds from the first request to the last page, and the process's CPU seconds.
 */
import { loadConfig } from '../../src/config.js';
import { silentLogger } from '../../src/log.js';
import { Prefetcher } from '../../src/sync/prefetch.js';
import { planWindows } from '../../src/sync/windows.js';
import { AnalyticsClient } from '../../src/upstream/analytics.js';

interface Spec {
  url: string;
  from: string;
  to: string;
  env: Record<string, string>;
}

const spec = JSON.parse(process.argv[2] ?? '{}') as Spec;
const config = loadConfig({ STATISTICS_URL: spec.url, AUTH_URL: spec.url, CLIENT_ID: 'demo-client', CLIENT_SECRET: 'demo-secret', ...spec.env });
const started = performance.now();
const client = AnalyticsClient.fromConfig(config.upstream!, { log: silentLogger });
const windows = planWindows(Date.parse(spec.from), Date.parse(spec.to), config.sync.windowMs);
const prefetcher = new Prefetcher(client, windows, { pageSize: config.sync.pageSize, concurrency: config.sync.concurrency });
let records = 0;
let pages = 0;
try {
  for (let i = 0; i < windows.length; i++) {
    const first = await prefetcher.take(i, 1);
    records += first.data.length;
    pages++;
    for (let n = 2; n <= first.totalPages; n++) {
      const page = await prefetcher.take(i, n);
      records += page.data.length;
      pages++;
    }
    prefetcher.drop(i);
  }
} finally {
  prefetcher.close();
  await client.close();
}
const seconds = (performance.now() - started) / 1000;
const cpu = process.cpuUsage();
process.stdout.write(`${JSON.stringify({ records, pages, seconds, cpuSeconds: (cpu.user + cpu.system) / 1e6 })}\n`);
