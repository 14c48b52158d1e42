import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { inject } from 'vitest';
import { startSimulator, type Simulator } from '../../src/simulator/index.js';
import { spawn } from 'node:child_process';
import { rmSync } from 'node:fs';
import { CLI_PATH, runCli } from '../helpers/cli.js';
import { initialisedDataDir } from '../helpers/embedded.js';

let sim: Simulator;
const SECRET = 'cli-check-secret-9f8e';

beforeAll(async () => {
  sim = await startSimulator({ port: 0, clientId: 'cli-client', clientSecret: SECRET, records: 5000 });
});
afterAll(async () => {
  await sim.close();
});

// The run's PostgreSQL server rather than the embedded default: opening PGlite costs about a second of
// CPU a process, and an embedded database would land in the working tree's ./data.
const env = () => ({
  STATISTICS_URL: sim.url,
  AUTH_URL: sim.url,
  CLIENT_ID: 'cli-client',
  CLIENT_SECRET: SECRET,
  LOG_LEVEL: 'warn',
  DATABASE_URL: inject('postgresUrl'),
});

describe('analytics-exporter check', () => {
  it('passes every step against the simulator, database included', async () => {
    const r = await runCli(['check'], env());
    expect(r.stdout).toMatch(/^ok +configuration/m);
    expect(r.stdout).toMatch(/^ok +token +Bearer token from http:\/\/127\.0\.0\.1:\d+\/connect\/token \(client_secret_post/m);
    expect(r.stdout).toMatch(/^ok +analytics +E6 /m);
    expect(r.stdout).toMatch(/^ok +prometheus +E7 text with \d+ sample lines/m);
    expect(r.stdout).toMatch(/^ok +database +PostgreSQL \d+/m);
    expect(r.code).toBe(0);
  });

  it('passes with client_secret_basic', async () => {
    const r = await runCli(['check', '--token-auth-method', 'client_secret_basic'], env());
    expect(r.stdout).toMatch(/^ok +token .*client_secret_basic/m);
    expect(r.code).toBe(0);
  });

  it('stops at the token step with a wrong secret, exit 1, secret not shown', async () => {
    const r = await runCli(['check'], { ...env(), CLIENT_SECRET: 'wrong-secret-1234' });
    expect(r.stdout).toMatch(/^FAIL +token +token request refused: .*HTTP 401.*invalid_client/m);
    expect(r.stdout).toMatch(/^skip +analytics +not tried: no token/m);
    expect(r.stdout).toMatch(/^skip +prometheus/m);
    expect(r.code).toBe(1);
    expect(r.stdout + r.stderr).not.toContain('wrong-secret-1234');
    expect(r.stdout + r.stderr).not.toContain(SECRET);
  });

  it('exits 2 naming the variable for TOKEN_AUTH_METHOD=foo', async () => {
    const r = await runCli(['check'], { ...env(), TOKEN_AUTH_METHOD: 'foo' });
    expect(r.code).toBe(2);
    expect(r.stdout).toMatch(/^FAIL +configuration +TOKEN_AUTH_METHOD must be client_secret_post or client_secret_basic; got "foo"/m);
  });

  it('exits 2 for a bad flag value, naming the variable it sets', async () => {
    const r = await runCli(['check', '--upstream-timeout', 'soon'], env());
    expect(r.code).toBe(2);
    expect(r.stdout).toContain('UPSTREAM_TIMEOUT must be a positive duration');
  });

  it('exits 1 when the database is unreachable, after the upstream steps pass', async () => {
    const r = await runCli(['check'], { ...env(), DATABASE_URL: 'postgres://nobody:pw-never-shown@127.0.0.1:1/none' });
    expect(r.stdout).toMatch(/^ok +prometheus/m);
    expect(r.stdout).toMatch(/^FAIL +database +.*ECONNREFUSED/m);
    expect(r.stdout + r.stderr).not.toContain('pw-never-shown');
    expect(r.code).toBe(1);
  });

  it('checks against the built-in simulator when nothing is configured', async () => {
    const dataDir = await initialisedDataDir('ae-check-');
    onTestFinished(() => rmSync(dataDir, { recursive: true, force: true }));
    const r = await runCli(['check'], { LOG_LEVEL: 'warn', DATA_DIR: dataDir });
    expect(r.stdout).toMatch(/^ok +configuration +STATISTICS_URL unset: checking against the built-in demo simulator/m);
    expect(r.stdout).toMatch(/^ok +prometheus/m);
    expect(r.stderr).toContain('DEMO DATA');
    expect(r.code).toBe(0);
  });
});

describe('usage', () => {
  it('exits quietly when its output pipe closes early (--help | head)', async () => {
    const child = spawn(process.execPath, [CLI_PATH, '--help'], { stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout.destroy();
    let stderr = '';
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    expect(stderr).not.toContain('EPIPE');
    expect(code).toBe(0);
  });

  it('exits 2 for an unknown command or option', async () => {
    expect((await runCli(['nope'])).code).toBe(2);
    const r = await runCli(['check', '--bogus']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("unknown option '--bogus'");
  });

  it('prints help for every command with exit 0', async () => {
    const top = await runCli(['--help']);
    expect(top.code).toBe(0);
    expect(top.stdout).toContain('STATISTICS_URL');
    expect(top.stdout).toContain('Exit status: 0 success, 1 failure, 2 bad usage or configuration.');
    for (const command of ['check', 'simulate']) {
      const r = await runCli([command, '--help']);
      expect(r.code, command).toBe(0);
      expect(r.stdout, command).toContain(`Usage: analytics-exporter ${command}`);
    }
  });
});
