/**
 * Demo mode: with STATISTICS_URL unset, commands run against the demo simulator, the workspace
 * package @analytics-exporter/simulator, started in-process on a loopback port and announced
 * plainly as demo data. The package is a development dependency: a production install (the
 * image's `npm ci --omit=dev --workspaces=false`) has no demo, and a command without
 * STATISTICS_URL is then a configuration error.
 */
import { createRequire } from 'node:module';
import { loadConfig, type Config, type UpstreamConfig, type UpstreamRequests } from './config.js';
import { ConfigError } from './errors.js';
import type { Logger } from './log.js';

/** The package of the demo simulator. */
export const SIMULATOR_PACKAGE = '@analytics-exporter/simulator';

/** The configuration error of a command that needs the demo simulator where it is not installed. */
function notInstalled(cause?: unknown): ConfigError {
  return new ConfigError(
    'STATISTICS_URL',
    `STATISTICS_URL is unset and the demo simulator (${SIMULATOR_PACKAGE}, a development dependency) is not installed: set STATISTICS_URL (and AUTH_URL, CLIENT_ID, CLIENT_SECRET) to the platform's analytics API, or install the development dependencies for the demo`,
    cause === undefined ? {} : { cause },
  );
}

/** The simulator package's exports. */
export type SimulatorModule = typeof import('@analytics-exporter/simulator');

/**
 * Loads the simulator package.
 *
 * @returns its exports, or undefined when the package is not installed (a production install).
 * @throws whatever else its loading throws (a broken build of it).
 */
export async function importSimulator(): Promise<SimulatorModule | undefined> {
  try {
    return await import('@analytics-exporter/simulator');
  } catch (err) {
    const { code, message } = err as { code?: unknown; message?: unknown };
    // The package itself missing, not a module inside it.
    if (code === 'ERR_MODULE_NOT_FOUND' && typeof message === 'string' && message.includes(SIMULATOR_PACKAGE)) return undefined;
    throw err;
  }
}

/**
 * Checks, before anything is opened, that a configuration whose environment source has no
 * upstream (STATISTICS_URL unset) can run: the demo simulator must be installed.
 *
 * @throws {ConfigError} (variable STATISTICS_URL) when the simulator package is not installed.
 */
export function requireDemoSimulator(config: Config): void {
  if (config.sources.every((source) => source.upstream !== undefined)) return;
  try {
    // Resolved, not loaded: the simulator loads only when the command runs it.
    createRequire(import.meta.url).resolve(`${SIMULATOR_PACKAGE}/package.json`);
  } catch (err) {
    throw notInstalled(err);
  }
}

/** Upstream settings for the demo: loadConfig's, with the settings table's defaults, pointed at the simulator. */
function demoUpstreamConfig(url: string, clientId: string, clientSecret: string): UpstreamConfig {
  return loadConfig({ STATISTICS_URL: url, AUTH_URL: url, CLIENT_ID: clientId, CLIENT_SECRET: clientSecret }).sources[0]!.upstream!;
}

/**
 * Starts the demo simulator on 127.0.0.1 (ephemeral port) with the demo data up to now.
 *
 * @param requests how the client calls it (SourceConfig.demo: UPSTREAM_TIMEOUT, UPSTREAM_RATE_LIMIT, …);
 *   the settings' defaults when absent.
 * @returns the upstream configuration pointing at it, and `close()` to stop it.
 * @throws {ConfigError} (variable STATISTICS_URL) when the simulator package is not installed.
 */
export async function startDemoUpstream(log: Logger, requests?: UpstreamRequests): Promise<{ config: UpstreamConfig; close: () => Promise<void> }> {
  // Loaded here, so that commands against the platform never load the simulator.
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
