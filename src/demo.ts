/**
 * Demo mode: with STATISTICS_URL unset, commands run against the built-in simulator,
 * started in-process on a loopback port and announced plainly as demo data.
 */
import type { UpstreamConfig } from './config.js';
import type { Logger } from './log.js';
import { startSimulator } from './simulator/index.js';

/** Credentials of the in-process demo simulator; they protect nothing and are not secrets. */
export const DEMO_CLIENT_ID = 'demo-client';
export const DEMO_CLIENT_SECRET = 'demo-secret';

/** Upstream settings for the demo, as loadConfig would build them for a real platform. */
export function demoUpstreamConfig(url: string): UpstreamConfig {
  return {
    statisticsUrl: new URL(url),
    tokenUrl: new URL('/connect/token', url),
    clientId: DEMO_CLIENT_ID,
    clientSecret: DEMO_CLIENT_SECRET,
    tokenAuthMethod: 'client_secret_post',
    scope: 'api.external',
    tls: {},
    timeoutMs: 30_000,
    maxAttempts: 5,
    retryMaxDelayMs: 30_000,
  };
}

/**
 * Starts the simulator on 127.0.0.1 (ephemeral port) with its default seeded data ending now.
 *
 * @returns the upstream configuration pointing at it, and `close()` to stop it.
 */
export async function startDemoUpstream(log: Logger): Promise<{ config: UpstreamConfig; close: () => Promise<void> }> {
  const simulator = await startSimulator({ host: '127.0.0.1', port: 0, clientId: DEMO_CLIENT_ID, clientSecret: DEMO_CLIENT_SECRET, end: new Date() });
  log.warn({ url: simulator.url }, 'STATISTICS_URL is unset: using the built-in simulator with DEMO DATA, not the platform');
  return { config: demoUpstreamConfig(simulator.url), close: () => simulator.close() };
}
