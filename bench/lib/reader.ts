/**
 * Reads windows through the sync's own window reader (src/sync/read/reader.ts), configured as
 * src/sync/run/run.ts configures it, but discarding the pages: for the upstream's limit (fetch-only)
 * and the requests-per-window benchmark.
 */
import type { SyncConfig } from '../../src/config.js';
import { WindowReader } from '../../src/sync/read/reader.js';
import { RecordEstimate } from '../../src/sync/read/slices.js';
import { recordTime, type Window } from '../../src/sync/windows.js';
import type { AnalyticsClient } from '../../src/upstream/analytics.js';

/** What reading took, in total and per window. */
export interface ReadCounts {
  /** Records kept (the boundary rule applied, as the sync keeps them). */
  records: number;
  /** Leaf pages. */
  pages: number;
  /** E6 requests made, per window. */
  requests: number[];
  splits: number;
  instants: number;
}

/** Reads every window in order with a fresh estimate (nothing learned from a ledger). */
export async function readWindows(client: AnalyticsClient, windows: readonly Window[], config: SyncConfig): Promise<ReadCounts> {
  const timeField = config.recordTimeField;
  const reader = new WindowReader(client, windows, {
    pageSize: config.pageSize,
    concurrency: config.concurrency,
    minSplitMs: config.minSplitMs,
    instantAttempts: config.windowAttempts,
    prepare: (page, place) => page.data.filter((_r, i) => !place.drop.has(i)).map((r) => (timeField ? (recordTime(r, timeField) ?? null) : null)),
    toDate: config.toDate,
    timesOf: (times) => times,
    eventTime: (record) => (timeField ? recordTime(record, timeField) : undefined),
    estimate: new RecordEstimate(),
  });
  const counts: ReadCounts = { records: 0, pages: 0, requests: [], splits: 0, instants: 0 };
  try {
    for (let i = 0; i < windows.length; i++) {
      for await (const leaf of reader.leaves(i)) {
        counts.records += leaf.page.length;
        counts.pages++;
      }
      const stats = reader.stats(i);
      counts.requests.push(stats.requests);
      counts.splits += stats.splits;
      counts.instants += stats.instants;
      reader.drop(i);
    }
  } finally {
    reader.close();
  }
  return counts;
}
