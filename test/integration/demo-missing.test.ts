/**
 * A production install (`npm ci --omit=dev --workspaces=false`, the image) has no simulator
 * package: the exporter must still start against the platform, and a command that would need
 * the demo says so plainly, as a configuration error, before it opens anything.
 *
 * The install is imitated: the built dist/, migrations/ and package.json in a folder of their own, beside a
 * node_modules that links every package of the repository's but @analytics-exporter/.
 */
import { spawn } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startSimulator, type Simulator } from '@analytics-exporter/simulator';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useTestDatabase } from '../helpers/db.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

const db = useTestDatabase();
let dir: string;
let sim: Simulator;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'ae-no-simulator-'));
  // package.json's `files`: dist/ and migrations/ (check reads the shipped migrations).
  cpSync(join(ROOT, 'dist'), join(dir, 'dist'), { recursive: true });
  cpSync(join(ROOT, 'migrations'), join(dir, 'migrations'), { recursive: true });
  cpSync(join(ROOT, 'package.json'), join(dir, 'package.json'));
  mkdirSync(join(dir, 'node_modules'));
  for (const entry of readdirSync(join(ROOT, 'node_modules'))) {
    if (entry === '@analytics-exporter' || entry === '.bin') continue;
    symlinkSync(join(ROOT, 'node_modules', entry), join(dir, 'node_modules', entry));
  }
  sim = await startSimulator({ port: 0, records: 100, clientId: 'prod-client', clientSecret: 'prod-client-secret' });
});

afterAll(async () => {
  await sim?.close();
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
});

/** Runs the copied CLI with exactly `env` (plus PATH and HOME). */
function run(args: string[], env: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [join(dir, 'dist/cli.js'), ...args], {
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', DATA_DIR: join(dir, 'data'), LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

describe('without the simulator package installed', () => {
  it.each(['serve', 'sync', 'check'])('%s without STATISTICS_URL exits 2 naming STATISTICS_URL and the missing demo simulator', async (command) => {
    const r = await run([command], {});
    expect(r.code).toBe(2);
    const said = `${r.stdout}${r.stderr}`;
    expect(said).toContain('STATISTICS_URL is unset and the demo simulator (@analytics-exporter/simulator, a development dependency) is not installed');
    // Refused before anything was opened: no database, no demo.
    expect(said).not.toContain('DEMO DATA');
    expect(said).not.toContain('PGlite');
  });

  it('simulate exits 2 saying the simulator is not installed', async () => {
    const r = await run(['simulate', '--port', '0'], {});
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('analytics-exporter simulate: the demo simulator (@analytics-exporter/simulator) is not installed');
  });

  it('checks against a configured platform as ever', async () => {
    const r = await run(['check'], {
      STATISTICS_URL: sim.url,
      AUTH_URL: sim.url,
      CLIENT_ID: 'prod-client',
      CLIENT_SECRET: 'prod-client-secret',
      DATABASE_URL: db.url,
    });
    expect(r.stdout).toMatch(/^ok +configuration +upstream /m);
    expect(r.stdout).toMatch(/^ok +analytics +E6 /m);
    expect(r.stdout).toMatch(/^ok +prometheus /m);
    expect(r.code, r.stdout + r.stderr).toBe(0);
  });
});
