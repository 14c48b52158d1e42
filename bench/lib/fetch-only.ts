/**
 * The upstream side's limit: reads the same windows as `sync` would, with the same client and
 * window reader (src/upstream/analytics.ts, src/sync/reader.ts: the same splits, the same
 * concurrency), but discards every page instead of writing it. Run as a child process by the
 * bench (`node --import tsx bench/lib/fetch-only.ts '<json>'`); prints one JSON line: records,
 * pages (leaves), E6 requests, seconds from the first request to the last page, and the
 * process's CPU seconds.
 */
import { loadConfig } from '../../src/config.js';
import { silentLogger } from '../../src/log.js';
import { WindowReader } from '../../src/sync/reader.js';
import { RecordEstimate } from '../../src/sync/split.js';
import { planWindows, recordTime } from '../../src/sync/windows.js';
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
const timeField = config.sync.recordTimeField;
const reader = new WindowReader(client, windows, {
  pageSize: config.sync.pageSize,
  concurrency: config.sync.concurrency,
  minSplitMs: config.sync.minSplitMs,
  instantAttempts: config.sync.windowAttempts,
  prepare: (page, part) => (timeField ? page.data.filter((r) => recordTime(r, timeField) !== part.end).length : page.data.length),
  eventTime: (record) => (timeField ? recordTime(record, timeField) : undefined),
  estimate: new RecordEstimate(),
});
let records = 0;
let pages = 0;
let requests = 0;
try {
  for (let i = 0; i < windows.length; i++) {
    for await (const leaf of reader.leaves(i)) {
      records += leaf.page;
      pages++;
    }
    requests += reader.stats(i).requests;
    reader.drop(i);
  }
} finally {
  reader.close();
  await client.close();
}
const seconds = (performance.now() - started) / 1000;
const cpu = process.cpuUsage();
process.stdout.write(`${JSON.stringify({ records, pages, requests, seconds, cpuSeconds: (cpu.user + cpu.system) / 1e6 })}\n`);
