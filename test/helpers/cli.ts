import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/** The built CLI (`npm test` builds first, through the pretest script). */
export const CLI_PATH = fileURLToPath(new URL('../../dist/cli.js', import.meta.url));

export interface CliResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs the built CLI as a child process with exactly `env` (plus PATH and HOME), so no
 * variable of the developer's shell leaks into a test.
 *
 * @throws when dist/cli.js is missing: run `npm run build` (npm test does).
 */
export async function runCli(args: string[], env: Record<string, string> = {}, timeoutMs = 60_000): Promise<CliResult> {
  if (!existsSync(CLI_PATH)) throw new Error(`${CLI_PATH} is missing: run npm run build (npm test does it first)`);
  const child = spawn(process.execPath, [CLI_PATH, ...args], {
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
  });
}
