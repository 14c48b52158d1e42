/**
 * Demo mode: with STATISTICS_URL unset, commands run against the simulator package, started
 * in-process on a loopback port and announced as demo data. It is a development dependency: a
 * production install has no demo, and a command without STATISTICS_URL is a configuration error.
 */
import { createRequire } from 'node:module';
import { loadConfig, type Config, type UpstreamConfig, type UpstreamRequests } from './config.js';
import { ConfigError } from './errors.js';
import type { Logger } from './log.js';

export const SIMULATOR_PACKAGE = '@analytics-exporter/simulator';

function notInstalled(cause?: unknown): ConfigError {
  return new ConfigError(
    'STATISTICS_URL',
    `STATISTICS_URL is unset and the demo simulator (${SIMULATOR_PACKAGE}, a development dependency) is not installed: set STATISTICS_URL (and AUTH_URL, CLIENT_ID, CLIENT_SECRET) to the platform's analytics API, or install the development dependencies for the demo`,
    cause === undefined ? {} : { cause },
  );
}

export type SimulatorModule = typeof import('@analytics-exporter/simulator');

/** The simulator's exports; undefined when not installed. @throws what else its loading throws. */
export async function importSimulator(): Promise<SimulatorModule | undefined> {
  try {
    return await import('@analytics-exporter/simulator');
  } catch (err) {
    const { code, message } = err as { code?: unknown; message?: unknown };
    if (code === 'ERR_MODULE_NOT_FOUND' && typeof message === 'string' && message.includes(SIMULATOR_PACKAGE)) return undefined;
    throw err;
  }
}

/** Checks, before anything opens, that a source without upstream has the simulator. @throws {ConfigError} (STATISTICS_URL) */
export function requireDemoSimulator(config: Config): void {
  if (config.sources.every((source) => source.upstream !== undefined)) return;
  try {
    // Resolved, not loaded.
    createRequire(import.meta.url).resolve(`${SIMULATOR_PACKAGE}/package.json`);
  } catch (err) {
    throw notInstalled(err);
  }
}

/** loadConfig's defaults, pointed at the simulator. */
function demoUpstreamConfig(url: string, clientId: string, clientSecret: string): UpstreamConfig {
  return loadConfig({ STATISTICS_URL: url, AUTH_URL: url, CLIENT_ID: clientId, CLIENT_SECRET: clientSecret }).sources[0]!.upstream!;
}

/**
 * Starts the simulator on 127.0.0.1 with demo data up to now; `requests`: SourceConfig.demo.
 * @throws {ConfigError} (STATISTICS_URL) when the simulator package is not installed.
 */
export async function startDemoUpstream(log: Logger, requests?: UpstreamRequests): Promise<{ config: UpstreamConfig; close: () => Promise<void> }> {
  // Here, so commands against the platform never load it.
  const simulator = await importSimulator();
  if (simulator === undefined) throw notInstalled();
  const { DEMO_CLIENT_ID, DEMO_CLIENT_SECRET, demoDatasetBounds, startSimulator } = simulator;
  const running = await startSimulator({
    host: '127.0.0.1',
    port: 0,
    clientId: DEMO_CLIENT_ID,
    clientSecret: DEMO_CLIENT_SECRET,
    ...demoDatasetBounds(Date.now()),
  });
  log.warn({ url: running.url }, 'STATISTICS_URL is unset: using the built-in simulator with DEMO DATA, not the platform');
  return { config: { ...demoUpstreamConfig(running.url, DEMO_CLIENT_ID, DEMO_CLIENT_SECRET), ...requests }, close: () => running.close() };
}
