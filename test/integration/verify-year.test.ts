/**
 * `verify` on a year of hourly windows (8,760) against real PostgreSQL and the simulator, the E6
 * requests counted by the simulator: an unchanged history costs at most 20 (14: its 14 segments),
 * k windows that differ at most 1 + 2·k·⌈log2 8,760⌉; `--repair` then leaves
 * nothing to find.
 *
 * Loading a year through 8,760 sync windows would take minutes, so the history is seeded in SQL
 * from what the simulator serves (servedJson), as a sync stores it (test/helpers/audit-seed.ts):
 * the ledger's 8,760 windows, and each record in the window that owns it under the simulator's
 * inclusive toDate, (s, e] (a record exactly at a boundary belongs to the window ending there; the
 * data starts one second after the first window's start, so no record sits at the origin).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator, type Simulator } from '@analytics-exporter/simulator';
import { seedHourlyHistory } from '../helpers/audit-seed.js';
import { runCli } from '../helpers/cli.js';
import { useAppPool, useTestDatabase } from '../helpers/db.js';
import { canonicalJson, simulatorEnv, storedMultiset } from '../helpers/sync.js';
import { request } from 'undici';

const db = useTestDatabase();
const bed = useAppPool(db);
const HOUR = 3_600_000;
const START = Date.parse('2025-11-01T00:00:00Z');
const WINDOWS = 8760;
const END = START + WINDOWS * HOUR;
const SCHEMA = 'verify_year';
const DEPTH = Math.ceil(Math.log2(WINDOWS));
let sim: Simulator;

/** What E6 serves now for the year, canonical and sorted. */
function served(): string[] {
  return sim
    .servedJson(new Date(START), new Date(END))
    .map((text) => canonicalJson(JSON.parse(text)))
    .sort();
}

/** Requests the simulator's E6 answered while `fn` ran. */
async function e6Requests<T>(fn: () => Promise<T>): Promise<{ value: T; requests: number }> {
  const before = sim.stats.analyticsRequests;
  const value = await fn();
  return { value, requests: sim.stats.analyticsRequests - before };
}

beforeAll(async () => {
  sim = await startSimulator({ port: 0, records: 2 * WINDOWS, start: new Date(START + 1000), end: new Date(END), admin: true });
  await seedHourlyHistory(bed.pool, SCHEMA, sim, START, WINDOWS);
}, 120_000);
afterAll(async () => {
  await sim?.close();
});

describe('verify on a year of hourly windows', () => {
  const env = () => ({ ...simulatorEnv(sim), DATABASE_URL: db.url, DATABASE_SCHEMA: SCHEMA, SYNC_WINDOW: '1h', LOG_FORMAT: 'json' });

  it('an unchanged history: exit 0 in at most 20 E6 requests; 3 late arrivals: their windows found within 1 + 2·3·⌈log2 8,760⌉, then repaired', async () => {
    expect((await storedMultiset(bed.pool, SCHEMA)).length).toBe(2 * WINDOWS);
    const clean = await e6Requests(() => runCli(['verify'], env()));
    expect(clean.value.code, clean.value.stderr).toBe(0);
    expect(clean.requests).toBe(DEPTH);
    expect(clean.requests).toBeLessThanOrEqual(20);

    // Hours whose bounds hold no record, so the repair's sync (whatever it does with a record at a
    // window's start) stores them as seeded.
    const boundaryHours = new Set(
      sim
        .servedJson(new Date(START), new Date(END))
        .map((t) => Date.parse((JSON.parse(t) as { timestamp: string }).timestamp))
        .filter((ms) => ms % HOUR === 0)
        .map((ms) => (ms - START) / HOUR),
    );
    const hours: number[] = [];
    for (const wanted of [1000, 4000, 8000]) {
      let h = wanted;
      while (boundaryHours.has(h) || boundaryHours.has(h + 1)) h++;
      hours.push(h);
    }
    for (const h of hours) {
      const res = await request(`${sim.url}/admin/records`, {
        method: 'POST',
        body: JSON.stringify({ at: new Date(START + h * HOUR + 17 * 60_000 + 5_000).toISOString(), count: 1 }),
      });
      expect(res.statusCode).toBe(200);
      await res.body.dump();
    }
    const found = await e6Requests(() => runCli(['verify'], env()));
    expect(found.value.code, found.value.stderr).toBe(1);
    const named = [...found.value.stderr.matchAll(/"window":\["([^"]+)"/g)].map((m) => (Date.parse(m[1]!) - START) / HOUR);
    expect(named).toEqual(hours);
    expect(found.requests).toBeLessThanOrEqual(1 + 2 * 3 * DEPTH);

    const repaired = await runCli(['verify', '--repair'], env());
    expect(repaired.code, repaired.stderr).toBe(0);
    expect(await storedMultiset(bed.pool, SCHEMA)).toEqual(served());
    const after = await e6Requests(() => runCli(['verify'], env()));
    expect(after.value.code, after.value.stderr).toBe(0);
    expect(after.requests).toBe(DEPTH);
  }, 120_000);
});
