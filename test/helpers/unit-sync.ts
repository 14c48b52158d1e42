/**
 * One sync run in a unit test: the in-memory store and a fake E6 (test/helpers/memory-store.ts,
 * fake-e6.ts), small pages, and a JSON log a test reads back.
 */
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/log.js';
import type { E6Pages, SyncStore } from '../../src/sync/store/ports.js';
import { runSync, type SyncObserver, type SyncOptions, type SyncResult } from '../../src/sync/run/run.js';
import type { CapturedLog } from './log-capture.js';

/** What a test's harness keeps across its runs. */
export interface UnitSyncBed {
  store: SyncStore;
  client: E6Pages;
  log: CapturedLog;
  /** The log's level ('info', 'debug', ...). */
  level: Parameters<typeof createLogger>[0];
  observer: SyncObserver;
}

/**
 * Runs a sync of the default source into schema "unit" with pages of 10 records, two at a time,
 * and the settings of `env` on top.
 *
 * @throws Error when the run found its lock held (a unit test's run never should).
 */
export async function runUnitSync(bed: UnitSyncBed, env: Record<string, string>, options: SyncOptions): Promise<Exclude<SyncResult, { status: 'locked' }>> {
  const config = loadConfig({ SYNC_PAGE_SIZE: '10', SYNC_CONCURRENCY: '2', ...env });
  const result = await runSync(
    {
      store: bed.store,
      client: bed.client,
      config: config.sources[0]!.sync,
      tables: config.tables,
      schema: 'unit',
      log: createLogger(bed.level, { format: 'json', destination: bed.log }),
      observer: bed.observer,
    },
    options,
  );
  if (result.status === 'locked') throw new Error('the run found its lock held');
  return result;
}
