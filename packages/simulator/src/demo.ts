/**
 * The demo: the data `npm start` serves with STATISTICS_URL unset, and `analytics-simulator` serves
 * without data flags. The one definition of it; the exporter reads these from this package.
 */

/** Credentials of the demo simulator; they protect nothing and are not secrets. */
export const DEMO_CLIENT_ID = 'demo-client';
export const DEMO_CLIENT_SECRET = 'demo-secret';

/**
 * The demo data starts at a fixed instant and grows at a fixed rate, so a process started later
 * sees the same past records plus newer ones (the exporter's embedded database stays valid).
 */
export const DEMO_EPOCH_MS = Date.parse('2026-01-01T00:00:00Z');
/** One demo record every 13 s: about 6,600 a day, 200,000 in 30 days. */
export const DEMO_RECORD_INTERVAL_MS = 13_000;

/** Dataset bounds of the demo at `now` (ms since the epoch): [DEMO_EPOCH, now) rounded down to whole intervals. */
export function demoDatasetBounds(now: number): { start: Date; end: Date; records: number } {
  const records = Math.max(1, Math.floor((now - DEMO_EPOCH_MS) / DEMO_RECORD_INTERVAL_MS));
  return { start: new Date(DEMO_EPOCH_MS), end: new Date(DEMO_EPOCH_MS + records * DEMO_RECORD_INTERVAL_MS), records };
}
