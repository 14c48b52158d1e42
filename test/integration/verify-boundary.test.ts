/**
 * Records exactly at window boundaries, inclusive toDate: the sync's ownership (the earlier window
 * keeps them: src/sync/membership/boundary.ts) and the audit's (src/sync/audit/compare.ts) agree.
 */
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator, type Simulator } from '@analytics-exporter/simulator';
import { runCli } from '../helpers/cli.js';
import { useTestDatabase } from '../helpers/db.js';
import { canonicalJson, simulatorEnv, storedMultiset } from '../helpers/sync.js';

const db = useTestDatabase();
const START = '2026-10-28T00:00:00Z';
const END = '2026-11-01T00:00:00Z';
let sim: Simulator;

beforeAll(async () => {
  sim = await startSimulator({ port: 0, records: 2_000, start: new Date(START), end: new Date(END), admin: true });
});
afterAll(async () => {
  await sim?.close();
});

const served = () =>
  sim
    .servedJson(new Date(START), new Date(END))
    .map((t) => canonicalJson(JSON.parse(t)))
    .sort();
async function admin(path: string, body: unknown): Promise<void> {
  const res = await request(`${sim.url}${path}`, { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' } });
  expect(res.statusCode).toBe(200);
  await res.body.dump();
}

describe('boundary records: sync and audit agree', () => {
  it('records at hour boundaries (and at the origin): verify finds nothing; a late one at a boundary is found in the earlier window and repaired', async () => {
    await admin('/admin/records', { at: '2026-10-28T00:00:00Z', count: 2 });
    await admin('/admin/records', { at: '2026-10-29T03:00:00Z', count: 3 });
    await admin('/admin/records', { at: '2026-10-30T12:00:00Z', count: 1 });
    const env = { ...simulatorEnv(sim), DATABASE_URL: db.url, DATABASE_SCHEMA: 'boundary', SYNC_WINDOW: '1h', LOG_FORMAT: 'json' };
    const sync = await runCli(['sync', '--from', START, '--to', END], env);
    expect(sync.code, sync.stderr).toBe(0);
    expect(await storedMultiset(db.pool(), 'boundary')).toEqual(served());
    const before = sim.stats.analyticsRequests;
    const clean = await runCli(['verify'], env);
    expect(clean.code, clean.stderr).toBe(0);
    console.log('clean verify requests', sim.stats.analyticsRequests - before);
    await admin('/admin/records', { at: '2026-10-31T05:00:00Z', count: 1 });
    const found = await runCli(['verify'], env);
    expect(found.code, found.stderr).toBe(1);
    expect(found.stderr).toContain('"window":["2026-10-31T04:00:00.000Z","2026-10-31T05:00:00.000Z"]');
    const repaired = await runCli(['verify', '--repair'], env);
    expect(repaired.code, repaired.stderr).toBe(0);
    expect(await storedMultiset(db.pool(), 'boundary')).toEqual(served());
    expect((await runCli(['verify'], env)).code).toBe(0);
  });
});
