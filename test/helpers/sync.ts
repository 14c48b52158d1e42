import { expect } from 'vitest';
import { loadConfig, type SyncConfig, type TablesConfig } from '../../src/config.js';
import type { Pool } from '../../src/db/pool.js';
import { silentLogger } from './silent-logger.js';
import type { Simulator } from '@analytics-exporter/simulator';
import { AnalyticsClient } from '../../src/upstream/analytics.js';
import { canonicalJson } from './canonical.js';

/** A run's settings for tests (SyncDeps' `config` and `tables`): the configuration's defaults with `env` applied. */
export function syncSettings(env: Record<string, string> = {}): { config: SyncConfig; tables: TablesConfig } {
  const config = loadConfig(env);
  return { config: config.sources[0]!.sync, tables: config.tables };
}

/** The upstream settings that point the exporter at `sim` (its E6/E7 and E0 on one port) with the simulator's client credentials. */
export function simulatorEnv(sim: Pick<Simulator, 'url'>): Record<string, string> {
  return { STATISTICS_URL: sim.url, AUTH_URL: sim.url, CLIENT_ID: 'demo-client', CLIENT_SECRET: 'demo-secret' };
}

/** A client of `sim` with instant backoff (Retry-After is still honoured). */
export function simClient(sim: Simulator, env: Record<string, string> = {}): AnalyticsClient {
  const config = loadConfig({ ...simulatorEnv(sim), ...env });
  return AnalyticsClient.fromConfig(config.sources[0]!.upstream!, { log: silentLogger, random: () => 0 });
}

export { canonicalJson } from './canonical.js';

/** The stored payloads of `schema.records`, canonical and sorted (a multiset). */
export async function storedMultiset(pool: Pool, schema: string): Promise<string[]> {
  const { rows } = await pool.query<{ payload: unknown }>(`select payload from "${schema}".records`);
  return rows.map((r) => canonicalJson(r.payload)).sort();
}

/** The simulator's records with event time in [from, to), canonical and sorted. */
export function expectedMultiset(sim: Simulator, from: Date, to: Date): string[] {
  return [...sim.dataset.iterate(from, to, false)].map(canonicalJson).sort();
}

/**
 * Asserts that `schema.records` holds exactly the simulator's records of [from, to): the same
 * count and the same multiset of payloads (identical records counted as often as they occur).
 */
export async function expectExactDataset(pool: Pool, schema: string, sim: Simulator, from: Date, to: Date): Promise<number> {
  const expected = expectedMultiset(sim, from, to);
  const stored = await storedMultiset(pool, schema);
  expect(stored.length).toBe(expected.length);
  // Compare as one string first: a diff of 200,000 lines would drown the report.
  if (stored.join('\n') !== expected.join('\n')) {
    const missing = expected.filter((x, i) => stored[i] !== x).slice(0, 3);
    expect.fail(`stored records differ from the simulator's; first differing expected payloads: ${missing.join(' | ')}`);
  }
  return stored.length;
}

/** The watermark of `schema`, or null. */
export async function watermarkOf(pool: Pool, schema: string): Promise<Date | null> {
  const { rows } = await pool.query<{ watermark: Date | null }>(`select watermark from "${schema}".sync_state`);
  return rows[0]?.watermark ?? null;
}
