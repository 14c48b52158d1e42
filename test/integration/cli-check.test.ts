import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { inject } from 'vitest';
import { startSimulator, type Simulator } from '@analytics-exporter/simulator';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runChecks, type StepResult } from '../../src/app/check.js';
import { loadConfig } from '../../src/config.js';
import { silentLogger } from '../helpers/silent-logger.js';
import { CLI_PATH, runCli, runCliInProcess } from '../helpers/cli.js';
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
    const r = await runCliInProcess(['check'], env());
    expect(r.stdout).toMatch(/^ok +configuration/m);
    expect(r.stdout).toMatch(/^ok +token +Bearer token from http:\/\/127\.0\.0\.1:\d+\/connect\/token \(client_secret_post/m);
    expect(r.stdout).toMatch(/^ok +analytics +E6 /m);
    expect(r.stdout).toMatch(/^ok +prometheus +E7 text with \d+ sample lines/m);
    expect(r.stdout).toMatch(/^ok +database +PostgreSQL \d+/m);
    expect(r.code).toBe(0);
  });

  it('passes with client_secret_basic', async () => {
    const r = await runCliInProcess(['check', '--token-auth-method', 'client_secret_basic'], env());
    expect(r.stdout).toMatch(/^ok +token .*client_secret_basic/m);
    expect(r.code).toBe(0);
  });

  it('stops at the token step with a wrong secret, exit 1, secret not shown', async () => {
    const r = await runCliInProcess(['check'], { ...env(), CLIENT_SECRET: 'wrong-secret-1234' });
    expect(r.stdout).toMatch(/^FAIL +token +token request refused: .*HTTP 401.*invalid_client/m);
    expect(r.stdout).toMatch(/^skip +analytics +not tried: no token/m);
    expect(r.stdout).toMatch(/^skip +prometheus/m);
    expect(r.code).toBe(1);
    expect(r.stdout + r.stderr).not.toContain('wrong-secret-1234');
    expect(r.stdout + r.stderr).not.toContain(SECRET);
  });

  it('exits 2 naming the variable for TOKEN_AUTH_METHOD=foo', async () => {
    const r = await runCliInProcess(['check'], { ...env(), TOKEN_AUTH_METHOD: 'foo' });
    expect(r.code).toBe(2);
    expect(r.stdout).toMatch(/^FAIL +configuration +TOKEN_AUTH_METHOD must be client_secret_post or client_secret_basic; got "foo"/m);
  });

  it('exits 2 for a bad flag value, naming the flag and the variable it sets', async () => {
    const r = await runCliInProcess(['check', '--upstream-timeout', 'soon'], env());
    expect(r.code).toBe(2);
    expect(r.stdout).toContain('--upstream-timeout (UPSTREAM_TIMEOUT) must be a positive duration');
  });

  it('exits 1 when the database is unreachable, after the upstream steps pass', async () => {
    const r = await runCliInProcess(['check'], { ...env(), DATABASE_URL: 'postgres://nobody:pw-never-shown@127.0.0.1:1/none' });
    expect(r.stdout).toMatch(/^ok +prometheus/m);
    expect(r.stdout).toMatch(/^FAIL +database +.*ECONNREFUSED/m);
    expect(r.stdout).toMatch(/^skip +pooling +not tried: no database$/m);
    expect(r.stdout + r.stderr).not.toContain('pw-never-shown');
    expect(r.code).toBe(1);
  });

  it('never shows the user info of a STATISTICS_URL (issue 25)', async () => {
    const url = new URL(sim.url);
    url.username = 'statuser';
    url.password = 'UrlPass-Stat-123';
    const r = await runCliInProcess(['check'], { ...env(), STATISTICS_URL: url.href });
    expect(r.stdout).toMatch(/^ok +analytics +E6 http:\/\/127\.0\.0\.1:\d+\/analytics: /m);
    expect(r.stdout + r.stderr).not.toContain('UrlPass-Stat-123');
    expect(r.stdout + r.stderr).not.toContain('statuser');
    expect(r.code).toBe(0);
  });

  it('exits 2 for a keyword-form DATABASE_URL without showing its password (issue 25)', async () => {
    const r = await runCliInProcess(['check'], { ...env(), LOG_LEVEL: 'trace', DATABASE_URL: "host=db port=5432 user=u password='Kw Secret\\'123' dbname=x" });
    expect(r.stdout).toMatch(
      /^FAIL +configuration +DATABASE_URL must be a postgres:\/\/ or postgresql:\/\/ URL; got "host=db port=5432 user=u password=\*\*\* dbname=x"$/m,
    );
    expect(r.stdout + r.stderr).not.toContain('Kw Secret');
    expect(r.stdout + r.stderr).not.toContain("\\'123");
    expect(r.code).toBe(2);
  });

  it('checks against the built-in simulator when nothing is configured', async () => {
    const dataDir = await initialisedDataDir('ae-check-');
    onTestFinished(() => rmSync(dataDir, { recursive: true, force: true }));
    const r = await runCliInProcess(['check'], { LOG_LEVEL: 'warn', DATA_DIR: dataDir });
    expect(r.stdout).toMatch(/^ok +configuration +STATISTICS_URL unset: checking against the built-in demo simulator/m);
    expect(r.stdout).toMatch(/^ok +prometheus/m);
    expect(r.stderr).toContain('DEMO DATA');
    expect(r.code).toBe(0);
  });
});

describe('check with CONFIG_FILE', () => {
  // A second environment with its own API client and data.
  const SANDBOX_SECRET = 'sandbox-check-secret-7c1d';
  let sandbox: Simulator;
  let dir: string;
  beforeAll(async () => {
    sandbox = await startSimulator({ port: 0, clientId: 'sandbox-client', clientSecret: SANDBOX_SECRET, records: 300, seed: 7 });
    dir = mkdtempSync(join(tmpdir(), 'ae-check-sources-'));
  });
  afterAll(async () => {
    await sandbox.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** Two sources: production on the file's test simulator, sandbox on its own, its secret from ${SANDBOX_SECRET}. */
  const sourcesFile = () => {
    const file = join(dir, 'sources.yaml');
    writeFileSync(
      file,
      [
        'sources:',
        '  - name: production',
        `    statistics_url: ${sim.url}`,
        `    auth_url: ${sim.url}`,
        '    client_id: cli-client',
        `    client_secret: ${SECRET}`,
        '    labels: {environment: production}',
        '  - name: sandbox',
        `    statistics_url: ${sandbox.url}`,
        `    auth_url: ${sandbox.url}`,
        '    client_id: sandbox-client',
        '    client_secret: ${SANDBOX_SECRET}',
        '    token_auth_method: client_secret_basic',
        '',
      ].join('\n'),
    );
    return file;
  };

  it('checks every source in its own block, in the file order, the database once', async () => {
    const config = loadConfig({ CONFIG_FILE: sourcesFile(), SANDBOX_SECRET, DATABASE_URL: inject('postgresUrl') });
    const lines: string[] = [];
    const results: StepResult[] = [];
    const ok = await runChecks(config, {
      log: silentLogger,
      section: (source) => lines.push(`source ${source.name}`),
      report: (result) => {
        results.push(result);
        lines.push(`${result.status} ${result.step} ${result.source ?? ''}`.trim());
      },
    });
    expect(lines).toEqual([
      'source production',
      'ok token production',
      'ok analytics production',
      'ok prometheus production',
      'source sandbox',
      'ok token sandbox',
      'ok analytics sandbox',
      'ok prometheus sandbox',
      'ok database',
      'ok pooling',
      'ok writable',
      'ok migrations',
      // The run's own database: its schema migrated or not, as the files before left it.
      lines.at(-1) === 'skip privileges' ? 'skip privileges' : 'ok privileges',
    ]);
    // Each block read its own environment: its own token URL and its own data.
    const detail = (source: string, step: string) => results.find((r) => r.source === source && r.step === step)!.detail;
    expect(detail('production', 'token')).toContain(`${sim.url.replace(/\/$/, '')}/connect/token (client_secret_post`);
    expect(detail('sandbox', 'token')).toContain(`${sandbox.url.replace(/\/$/, '')}/connect/token (client_secret_basic`);
    expect(detail('production', 'analytics')).not.toBe(detail('sandbox', 'analytics'));
    expect(ok).toBe(true);
  });

  it('fails only the block of a source with a wrong secret, exit 1, and shows no secret', async () => {
    const r = await runCliInProcess(['check'], {
      CONFIG_FILE: sourcesFile(),
      SANDBOX_SECRET: 'wrong-sandbox-secret-5e6f',
      LOG_LEVEL: 'warn',
      DATABASE_URL: inject('postgresUrl'),
    });
    expect(r.stdout).toMatch(/^ok +configuration +2 sources from .*sources\.yaml: production, sandbox$/m);
    const blocks = r.stdout.split(/^(?=source )/m).slice(1);
    expect(blocks.map((b) => b.split('\n')[0])).toEqual([
      `source production: upstream ${new URL(sim.url).origin}/ {environment="production"}`,
      `source sandbox: upstream ${new URL(sandbox.url).origin}/`,
    ]);
    expect(blocks[0]).toMatch(/^ok +token .*\n^ok +analytics .*\n^ok +prometheus /m);
    expect(blocks[1]).toMatch(/^FAIL +token +token request refused: .*HTTP 401/m);
    expect(blocks[1]).toMatch(/^skip +analytics +not tried: no token\n^skip +prometheus/m);
    expect(blocks[1]).toMatch(/^ok +database /m);
    expect(r.code).toBe(1);
    expect(r.stdout + r.stderr).not.toContain('wrong-sandbox-secret-5e6f');
    expect(r.stdout + r.stderr).not.toContain(SECRET);
  });

  it('exits 2 naming the file, line and key of a broken CONFIG_FILE', async () => {
    const file = join(dir, 'broken.yaml');
    writeFileSync(file, 'sources:\n  - name: production\n    statistics_url: https://x.test/\n    client_secret_fil: /run/secrets/x\n');
    const r = await runCliInProcess(['check'], { CONFIG_FILE: file, LOG_LEVEL: 'warn' });
    expect(r.stdout).toBe(`FAIL  configuration  CONFIG_FILE ${file} line 4: sources[0].client_secret_fil: unknown key\n`);
    expect(r.code).toBe(2);
  });

  it('exits 2 for a name written as ${SECRET1} naming the variable, never its value (issue 25)', async () => {
    const file = join(dir, 'secret-name.yaml');
    writeFileSync(
      file,
      `sources:\n  - name: \${SECRET1}\n    statistics_url: ${sim.url}\n    auth_url: ${sim.url}\n    client_id: cli-client\n    client_secret: \${SECRET1}\n`,
    );
    const r = await runCliInProcess(['check'], { CONFIG_FILE: file, SECRET1: 'Name-Secret+Value/9', LOG_LEVEL: 'trace' });
    expect(r.stdout).toBe(
      `FAIL  configuration  CONFIG_FILE ${file} line 2: sources[0].name: must be 1 to 64 lower-case letters, digits, _ or -; got "\${SECRET1}"\n`,
    );
    expect(r.stdout + r.stderr).not.toContain('Name-Secret');
    expect(r.code).toBe(2);
  });

  it('exits 2 naming a repeated source name (check) and a missing secret file (sync), before anything is opened', async () => {
    const one = (name: string, secret: string) =>
      [`  - name: ${name}`, `    statistics_url: ${sim.url}`, `    auth_url: ${sim.url}`, '    client_id: cli-client', `    ${secret}`].join('\n');
    const duplicate = join(dir, 'duplicate.yaml');
    writeFileSync(duplicate, `sources:\n${one('production', `client_secret: ${SECRET}`)}\n${one('production', `client_secret: ${SECRET}`)}\n`);
    const dup = await runCliInProcess(['check'], { CONFIG_FILE: duplicate, LOG_LEVEL: 'warn' });
    expect(dup.stdout).toBe(
      `FAIL  configuration  CONFIG_FILE ${duplicate} line 7: sources[1].name: "production" is also the name of sources[0]; names must be unique\n`,
    );
    expect(dup.stdout).not.toContain(SECRET);
    expect(dup.code).toBe(2);
    const missing = join(dir, 'missing-secret.yaml');
    writeFileSync(missing, `sources:\n${one('production', 'client_secret_file: secrets/production')}\n`);
    const r = await runCliInProcess(['sync'], { CONFIG_FILE: missing, DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none', LOG_LEVEL: 'warn' });
    expect(r.stderr).toBe(
      `analytics-exporter: invalid configuration: CONFIG_FILE ${missing} line 6: sources[0].client_secret_file must name a readable file (ENOENT); got ${JSON.stringify(join(dir, 'secrets/production'))}\n`,
    );
    expect(r.code).toBe(2);
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
    // A real process: the status main() resolves with is the process's exit status.
    expect((await runCli(['nope'])).code).toBe(2);
    const r = await runCliInProcess(['check', '--bogus']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("unknown option '--bogus'");
  });

  it('prints help for every command with exit 0', async () => {
    // Once as a real process: --help on its stdout with exit 0.
    const top = await runCli(['--help']);
    expect(top.code).toBe(0);
    expect(top.stdout).toContain('STATISTICS_URL');
    expect(top.stdout).toContain('Exit status: 0 success, 1 failure, 2 bad usage or configuration.');
    // Short: the commands first, a few settings, and where the rest are (test/unit/cli-help.test.ts).
    expect(top.stdout.indexOf('Commands:')).toBeLessThan(top.stdout.indexOf('Options:'));
    expect(top.stdout).not.toContain('--sync-window');
    const settings = await runCli(['--help-settings']);
    expect(settings.code).toBe(0);
    expect(settings.stdout).toContain('--sync-window <value>');
    expect(settings.stdout).toContain('[env SYNC_WINDOW]');
    const help: Record<string, string> = {};
    for (const command of ['check', 'simulate', 'serve', 'sync', 'fields', 'migrate', 'verify', 'state', 'rollup']) {
      const r = await runCliInProcess([command, '--help']);
      expect(r.code, command).toBe(0);
      expect(r.stdout, command).toContain(`Usage: analytics-exporter ${command}`);
      help[command] = r.stdout.replace(/\s+/g, ' ');
    }
    // What a user with several sources looks for: /probe, the per-source schedule, exit statuses.
    expect(help.serve).toContain('/probe?source=NAME');
    expect(help.serve).toContain("the source's sync.schedule in CONFIG_FILE");
    expect(help.check).toContain('Exit status: 0 every step passed, 1 a step failed, 2 bad configuration');
    expect(help.fields).toContain('2 bad usage, such as a --source that is not configured');
    // The audit serve runs, and what a verify stopped by Ctrl-C exits with (both found missing by a new user).
    expect(help.serve).toContain('audit every source on AUDIT_SCHEDULE');
    expect(help.verify).toContain('was stopped by a signal');
    expect(help.migrate).toContain('Exit status: 0 done');
    for (const command of ['sync', 'fields']) expect(help[command], command).not.toContain('(default: [])');
  });

  it('fields refuses a --source that is not configured with exit 2, as sync does, before opening the database', async () => {
    // An unreachable DATABASE_URL: the answer comes before any connection is tried.
    const r = await runCliInProcess(['fields', '--source', 'default', '--source', 'staging'], {
      DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none',
      LOG_LEVEL: 'warn',
    });
    expect(r.stderr).toBe('analytics-exporter fields: --source staging is not a configured source; configured: default\n');
    expect(r.stdout).toBe('');
    expect(r.code).toBe(2);
  });
});
