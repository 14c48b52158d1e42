import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPool } from '../../src/db/pool.js';
import { silentLogger } from '../helpers/silent-logger.js';
import { startSimulator, type Simulator } from '@analytics-exporter/simulator';
import { CLI_PATH, runCli, runCliInProcess } from '../helpers/cli.js';
import { useTestDatabase } from '../helpers/db.js';
import { until } from '../helpers/wait.js';

type Output = { what: string; text: string };

/**
 * Runs every command, on success and failure paths, with a recognisable client secret, bearer
 * token and database password, and looks for them everywhere a user or an attacker could read:
 * stdout, stderr (the logs, errors included, at trace level), /metrics, /readyz, the database.
 */
const SECRET = 'S3CRET-needle-4c1d';
const WRONG_SECRET = 'WRONG-needle-9b2e';
const TOKEN_PREFIX = 'TOKEN-needle-';
const DB_PASSWORD = 'PW-needle-77aa';
const needles = [SECRET, WRONG_SECRET, TOKEN_PREFIX, DB_PASSWORD, Buffer.from(`needle-client:${SECRET}`).toString('base64')];

const db = useTestDatabase();
let sim: Simulator;
let dir: string;

beforeAll(async () => {
  sim = await startSimulator({
    port: 0,
    clientId: 'needle-client',
    clientSecret: SECRET,
    tokenPrefix: TOKEN_PREFIX,
    records: 3000,
    start: new Date(Date.now() - 2 * 86_400_000),
    end: new Date(),
  });
  dir = mkdtempSync(join(tmpdir(), 'ae-secrets-'));
  writeFileSync(join(dir, 'secret'), `${SECRET}\n`);
});
afterAll(async () => {
  await sim?.close();
  rmSync(dir, { recursive: true, force: true });
});

function env(extra: Record<string, string> = {}): Record<string, string> {
  // Trust authentication ignores the password, but it travels in the URL like a real one.
  const url = new URL(db.url);
  url.username = 'postgres';
  url.password = DB_PASSWORD;
  return {
    STATISTICS_URL: sim.url,
    AUTH_URL: sim.url,
    CLIENT_ID: 'needle-client',
    CLIENT_SECRET_FILE: join(dir, 'secret'),
    DATABASE_URL: url.toString(),
    DATABASE_SCHEMA: 'secrets',
    LOG_LEVEL: 'trace',
    SYNC_START_DATE: '1d',
    ...extra,
  };
}

function expectNoNeedles(outputs: readonly Output[]): void {
  for (const { what, text } of outputs) {
    for (const needle of needles) expect(text.includes(needle), `${what} contains ${needle}`).toBe(false);
  }
}

describe('secrets never leave the process', () => {
  it('runs every command on success and failure paths, and finds none of them in any output or in the database', async () => {
    const outputs: Output[] = [];
    // Most runs go through main() in this process, whose stdout, stderr and console are captured;
    // a success and a failure path run as real processes too, so whatever reaches the streams
    // some other way shows there.
    const record = async (what: string, args: string[], extra: Record<string, string> = {}, child = false): Promise<number | null> => {
      const r = await (child ? runCli : runCliInProcess)(args, env(extra));
      outputs.push({ what, text: r.stdout + r.stderr });
      return r.code;
    };
    expect(await record('check', ['check'], {}, true)).toBe(0);
    expect(await record('check basic', ['check'], { TOKEN_AUTH_METHOD: 'client_secret_basic' })).toBe(0);
    expect(await record('migrate', ['migrate'])).toBe(0);
    expect(await record('sync', ['sync'])).toBe(0);
    expect(await record('sync basic', ['sync'], { TOKEN_AUTH_METHOD: 'client_secret_basic' })).toBe(0);
    // Failure paths: a wrong secret (given inline), the database unreachable, the upstream answering 401 to every token.
    expect(await record('check wrong secret', ['check'], { CLIENT_SECRET_FILE: '', CLIENT_SECRET: WRONG_SECRET })).toBe(1);
    expect(await record('sync wrong secret', ['sync'], { CLIENT_SECRET_FILE: '', CLIENT_SECRET: WRONG_SECRET }, true)).toBe(1);
    expect(await record('sync db down', ['sync'], { DATABASE_URL: `postgres://postgres:${DB_PASSWORD}@127.0.0.1:1/none` })).toBe(1);
    expect(await record('check db down', ['check'], { DATABASE_URL: `postgres://postgres:${DB_PASSWORD}@127.0.0.1:1/none` })).toBe(1);
    sim.queueFault({ status: 401 }, 40, 'analytics');
    expect(await record('sync token refused', ['sync', '--from', new Date(Date.now() - 3_600_000).toISOString()])).toBe(1);
    // Config errors echo values: the secret must be masked there too.
    expect(await record('config error', ['check'], { CLIENT_SECRET_FILE: '', CLIENT_SECRET: WRONG_SECRET, TOKEN_AUTH_METHOD: 'nope' })).toBe(2);

    expect(outputs).toHaveLength(11);
    // The trace-level logs did see tokens being used: they are not empty of activity.
    expect(outputs.find((o) => o.what === 'sync')!.text).toContain('sync run succeeded');
    expect(sim.stats.tokenRequests).toBeGreaterThan(3);
    expectNoNeedles(outputs);
    const pool = createPool(db.url, silentLogger);
    try {
      const { rows } = await pool.query<{ text: string }>(
        `select coalesce(string_agg(r::text, ' '), '') as text from (
           select payload::text as r from secrets.records
           union all select row(s.*)::text from secrets.sync_runs s
           union all select row(w.*)::text from secrets.sync_windows w
           union all select row(t.*)::text from secrets.sync_state t) x`,
      );
      expect(rows[0]!.text.length).toBeGreaterThan(1000);
      for (const needle of needles) expect(rows[0]!.text.includes(needle), `database contains ${needle}`).toBe(false);
      const settings = await pool.query<{ application_name: string }>('select application_name from pg_stat_activity');
      for (const row of settings.rows) for (const needle of needles) expect(row.application_name).not.toContain(needle);
    } finally {
      await pool.end();
    }
  }, 120_000);

  it('serves /metrics and /readyz without them, also after upstream failures', async () => {
    const outputs: Output[] = [];
    // Every token request refused for a while: the scheduled syncs fail on E0 as well.
    sim.queueFault({ status: 401 }, 40, 'token');
    const child = spawn(process.execPath, [CLI_PATH, 'serve'], {
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env({ METRICS_LISTEN: '127.0.0.1:0', SYNC_SCHEDULE: '*/2 * * * * *' }) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let text = '';
    child.stdout.on('data', (c: Buffer) => (text += c.toString()));
    child.stderr.on('data', (c: Buffer) => (text += c.toString()));
    const exited = new Promise((resolve) => child.on('close', resolve));
    try {
      const url = await until('serve listening', () => /serving (http:\/\/127\.0\.0\.1:\d+)\/metrics/.exec(text)?.[1], 10_000);
      const get = async (path: string) => (await request(`${url}${path}`, { reset: true })).body.text();
      sim.revokeAllTokens();
      sim.queueFault({ status: 401 }, 4, 'prometheus');
      for (let i = 0; i < 3; i++) {
        outputs.push({ what: `serve /metrics ${i}`, text: await get('/metrics') });
        await sleep(400);
      }
      outputs.push({ what: 'serve /readyz', text: await get('/readyz') });
      await sleep(2500); // at least one scheduled sync
    } finally {
      child.kill('SIGTERM');
      await exited;
      outputs.push({ what: 'serve logs', text });
    }
    expect(outputs.map((o) => o.what)).toEqual(['serve /metrics 0', 'serve /metrics 1', 'serve /metrics 2', 'serve /readyz', 'serve logs']);
    expect(text).toContain('sync run failed');
    expectNoNeedles(outputs);
  }, 60_000);
});
