/**
 * scripts/ensure-test-tools.sh, which npm's pretest runs before every `npm test` (CI's too): what it
 * decides from what the machine has. The real script runs as a child process with a PATH that hides
 * tools, and with ENSURE_NO_INSTALL=1, which makes it act as it does for a user who is not root (the
 * tests run as root in CI), so nothing is installed. Copies of the scripts folder with a made-up
 * ensure script show that a new ensure-*.sh is asked without editing the runner.
 */
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { scratchDir } from '../helpers/scratch.js';

const SCRIPTS = fileURLToPath(new URL('../../scripts/', import.meta.url));
const RUNNER = 'ensure-test-tools.sh';
const INSTALL = 'sudo apt-get update && sudo apt-get install -y --no-install-recommends';

/** A folder of links to every program on this process's PATH except `hidden`: a PATH without them. */
function pathWithout(dir: string, hidden: string[]): string {
  const bin = join(dir, 'bin');
  mkdirSync(bin);
  const seen = new Set(hidden);
  for (const source of (process.env.PATH ?? '').split(delimiter)) {
    if (source === '' || !existsSync(source)) continue;
    for (const name of readdirSync(source)) {
      if (seen.has(name)) continue;
      seen.add(name);
      symlinkSync(join(source, name), join(bin, name));
    }
  }
  return bin;
}

/** A copy of scripts/ensure-*.sh in `dir`/scripts, plus the made-up ensure scripts given (name → body). */
function scriptsWith(dir: string, extra: Record<string, string>): string {
  const scripts = join(dir, 'scripts');
  mkdirSync(scripts);
  for (const name of readdirSync(SCRIPTS).filter((n) => /^ensure-.*\.sh$/.test(n))) {
    copyFileSync(join(SCRIPTS, name), join(scripts, name));
  }
  for (const [name, body] of Object.entries(extra)) writeFileSync(join(scripts, name), `#!/usr/bin/env bash\n${body}\n`);
  return scripts;
}

interface Run {
  status: number | null;
  stdout: string;
  stderr: string;
  ms: number;
}

/** Runs `script` with bash (found on the full PATH) and `env` over this process's environment. */
function run(script: string, env: Record<string, string>, args: string[] = []): Run {
  const started = performance.now();
  const result = spawnSync('bash', [script, ...args], { env: { ...process.env, ...env }, encoding: 'utf8', timeout: 20_000 });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr, ms: performance.now() - started };
}

describe('scripts/ensure-test-tools.sh', () => {
  it('prints nothing and exits 0, in well under a second, when the machine has everything', () => {
    const result = run(join(SCRIPTS, RUNNER), { ENSURE_NO_INSTALL: '1' });
    expect(result).toMatchObject({ status: 0, stdout: '', stderr: '' });
    expect(result.ms).toBeLessThan(1_000);
  });

  it('installs nothing and stops with one line naming the apt-get command when tmux is missing', () => {
    const dir = scratchDir('ensure-tools-');
    const result = run(join(SCRIPTS, RUNNER), { PATH: pathWithout(dir, ['tmux']), ENSURE_NO_INSTALL: '1' });
    expect(result).toMatchObject({ status: 1, stdout: '' });
    expect(result.stderr).toBe(`ensure-test-tools: missing tmux; run: ${INSTALL} tmux\n`);
  });

  it('names every missing package in that one line', () => {
    const dir = scratchDir('ensure-tools-');
    const result = run(join(SCRIPTS, RUNNER), { PATH: pathWithout(dir, ['tmux', 'openssl']), ENSURE_NO_INSTALL: '1' });
    expect(result).toMatchObject({ status: 1, stdout: '' });
    expect(result.stderr).toBe(`ensure-test-tools: missing tmux openssl; run: ${INSTALL} tmux openssl\n`);
  });

  it('asks a newly added ensure script too, and lets it install only when allowed to', () => {
    const dir = scratchDir('ensure-tools-');
    const marker = join(dir, 'installed');
    // A stand-in for an ensure script someone adds later: missing until its install has run.
    const fake = `if [[ \${1:-} == --missing ]]; then [[ -e ${marker} ]] || echo zz-example; exit 0; fi\ntouch ${marker}`;
    const scripts = scriptsWith(dir, { 'ensure-zz-example.sh': fake });

    const refused = run(join(scripts, RUNNER), { ENSURE_NO_INSTALL: '1' });
    expect(refused).toMatchObject({ status: 1, stdout: '' });
    expect(refused.stderr).toBe(`ensure-test-tools: missing zz-example; run: ${INSTALL} zz-example\n`);
    expect(existsSync(marker)).toBe(false);

    // Without ENSURE_NO_INSTALL only root installs; anyone else gets the same one line.
    const asUser = run(join(scripts, RUNNER), {});
    if (process.getuid?.() === 0) {
      expect(asUser).toMatchObject({ status: 0, stdout: 'ensure-test-tools: installing zz-example\n', stderr: '' });
      expect(existsSync(marker)).toBe(true);
    } else {
      expect(asUser).toMatchObject({ status: 1, stdout: '', stderr: refused.stderr });
      expect(existsSync(marker)).toBe(false);
    }
  });

  it('stops naming an ensure script whose --missing fails', () => {
    const dir = scratchDir('ensure-tools-');
    const scripts = scriptsWith(dir, { 'ensure-zz-broken.sh': 'exit 3' });
    const result = run(join(scripts, RUNNER), { ENSURE_NO_INSTALL: '1' });
    expect(result).toMatchObject({ status: 1, stdout: '' });
    expect(result.stderr).toBe('ensure-test-tools: scripts/ensure-zz-broken.sh --missing failed\n');
  });

  it('stops naming an ensure script that does not take --missing', () => {
    const dir = scratchDir('ensure-tools-');
    // What an ensure script written before --missing prints as it checks, whatever its arguments.
    const scripts = scriptsWith(dir, { 'ensure-zz-old.sh': 'echo "ensure-zz-old: zz 1.0 in /usr/bin"' });
    const result = run(join(scripts, RUNNER), {});
    expect(result).toMatchObject({ status: 1, stdout: '' });
    expect(result.stderr).toBe('ensure-test-tools: scripts/ensure-zz-old.sh --missing printed other than Debian package names (does it take --missing?)\n');
  });

  it('every scripts/ensure-*.sh answers --missing with package names only, installing nothing', () => {
    const names = readdirSync(SCRIPTS).filter((n) => /^ensure-.*\.sh$/.test(n) && n !== RUNNER);
    expect(names).toEqual(expect.arrayContaining(['ensure-pgbouncer.sh', 'ensure-postgres.sh', 'ensure-prometheus.sh']));
    for (const name of names) {
      const result = run(join(SCRIPTS, name), {}, ['--missing']);
      expect(result.status, `${name}: ${result.stderr}`).toBe(0);
      expect(result.stderr, name).toBe('');
      expect(result.stdout, name).toMatch(/^([a-z0-9][a-z0-9+.-]+\n)*$/);
    }
  });
});
