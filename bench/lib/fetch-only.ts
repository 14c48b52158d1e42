/**
 * The upstream side's limit: reads the same windows as `sync` would, with the same client and
 * window reader (src/upstream/analytics.ts, src/sync/read/reader.ts: the same splits, the same
 * concurrency), but discards every page instead of writing it. Run as a child process by the
 * bench (`node --import tsx bench/lib/fetch-only.ts '<json>'`); prints one JSON line: records,
 * pages (leaves), E6 requests, seconds from the first request to the last page, and the
 * process's CPU seconds.
 */
import { loadConfig } from '../../src/config.js';
import { silentLogger } from '../../test/helpers/silent-logger.js';
import { planWindows } from '../../src/sync/windows.js';
import { AnalyticsClient } from '../../src/upstream/analytics.js';
import { readWindows } from './reader.js';

interface Spec {
  url: string;
  from: string;
  to: string;
  env: Record<string, string>;
}

const spec = JSON.parse(process.argv[2] ?? '{}') as Spec;
const config = loadConfig({ STATISTICS_URL: spec.url, AUTH_URL: spec.url, CLIENT_ID: 'demo-client', CLIENT_SECRET: 'demo-secret', ...spec.env });
const source = config.sources[0]!;
const started = performance.now();
const client = AnalyticsClient.fromConfig(source.upstream!, { log: silentLogger });
const windows = planWindows(Date.parse(spec.from), Date.parse(spec.to), source.sync.windowMs);
let counts;
try {
  counts = await readWindows(client, windows, source.sync);
} finally {
  await client.close();
}
const { records, pages } = counts;
const requests = counts.requests.reduce((a, b) => a + b, 0);
const seconds = (performance.now() - started) / 1000;
const cpu = process.cpuUsage();
process.stdout.write(`${JSON.stringify({ records, pages, requests, seconds, cpuSeconds: (cpu.user + cpu.system) / 1e6 })}\n`);
