/**
 * Demo mode: with STATISTICS_URL unset, commands run against the built-in simulator,
 * started in-process on a loopback port and announced plainly as demo data.
 */
import { loadConfig, type UpstreamConfig } from './config.js';
import type { Logger } from './log.js';

/** Credentials of the in-process demo simulator; they protect nothing and are not secrets. */
export const DEMO_CLIENT_ID = 'demo-client';
export const DEMO_CLIENT_SECRET = 'demo-secret';

/**
 * The demo data starts at a fixed instant and grows at a fixed rate, so a process started later
 * sees the same past records plus newer ones (the embedded database under DATA_DIR stays valid).
 */
export const DEMO_EPOCH_MS = Date.parse('2026-01-01T00:00:00Z');
/** One demo record every 13 s: about 6,600 a day, 200,000 in 30 days. */
export const DEMO_RECORD_INTERVAL_MS = 13_000;

/** Dataset bounds of the demo at `now`: [DEMO_EPOCH, now) rounded down to whole intervals. */
export function demoDatasetBounds(now: number): { start: Date; end: Date; records: number } {
  const records = Math.max(1, Math.floor((now - DEMO_EPOCH_MS) / DEMO_RECORD_INTERVAL_MS));
  return { start: new Date(DEMO_EPOCH_MS), end: new Date(DEMO_EPOCH_MS + records * DEMO_RECORD_INTERVAL_MS), records };
}

/** Upstream settings for the demo: loadConfig's, with the settings table's defaults, pointed at the simulator. */
export function demoUpstreamConfig(url: string): UpstreamConfig {
  return loadConfig({ STATISTICS_URL: url, AUTH_URL: url, CLIENT_ID: DEMO_CLIENT_ID, CLIENT_SECRET: DEMO_CLIENT_SECRET }).sources[0]!.upstream!;
}

/**
 * Starts the simulator on 127.0.0.1 (ephemeral port) with the demo data up to now.
 *
 * @returns the upstream configuration pointing at it, and `close()` to stop it.
 */
export async function startDemoUpstream(log: Logger): Promise<{ config: UpstreamConfig; close: () => Promise<void> }> {
  // Loaded here, so that commands against the platform never load the simulator.
  const { startSimulator } = await import('./simulator/index.js');
  const simulator = await startSimulator({
    host: '127.0.0.1',
    port: 0,
    clientId: DEMO_CLIENT_ID,
    clientSecret: DEMO_CLIENT_SECRET,
    ...demoDatasetBounds(Date.now()),
  });
  log.warn({ url: simulator.url }, 'STATISTICS_URL is unset: using the built-in simulator with DEMO DATA, not the platform');
  return { config: demoUpstreamConfig(simulator.url), close: () => simulator.close() };
}
