import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { format } from 'node:util';
import { vi } from 'vitest';

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

/** Serialises in-process runs: each one swaps process-wide state (environment, stdout, stderr, exit code). */
let inProcessQueue: Promise<unknown> = Promise.resolve();

/**
 * Runs the CLI in this process through `main()` (src/cli.ts) with exactly `env` (plus PATH and
 * HOME), capturing what it writes to stdout and stderr, and resolves with the same shape as
 * {@link runCli} (`signal` always null). No child process: use it where the behaviour under test is
 * what a command prints and its exit status, not the process boundary (signals, a real exit, a
 * lock held by another process).
 *
 * For the run's duration `process.env` holds exactly that environment, stdout and stderr are
 * captured (the console too, as a process would print it) and report no terminal,
 * `process.exitCode` starts unset, and `process.exit` throws (a command that would end the process
 * fails the test instead of the worker); all of it is restored afterwards, and runs never overlap.
 *
 * @throws whatever `main()` throws (an unexpected error, which the real CLI reports with exit 1).
 */
export function runCliInProcess(args: string[], env: Record<string, string> = {}): Promise<CliResult> {
  const run = inProcessQueue.then(() => runInProcessNow(args, env));
  inProcessQueue = run.catch(() => undefined);
  return run;
}

async function runInProcessNow(args: string[], env: Record<string, string>): Promise<CliResult> {
  const { main } = await import('../../src/cli.js');
  const savedEnv = { ...process.env };
  const savedExitCode = process.exitCode;
  const streams = [process.stdout, process.stderr] as const;
  const savedTty = streams.map((stream) => Object.getOwnPropertyDescriptor(stream, 'isTTY'));
  const captured = ['', ''];
  const setEnv = (next: NodeJS.ProcessEnv) => {
    for (const key of Object.keys(process.env)) delete process.env[key];
    Object.assign(process.env, next);
  };
  const toConsole =
    (i: number) =>
    (...data: unknown[]) =>
      void (captured[i] += `${format(...data)}\n`);
  const spies = [
    ...(['log', 'info', 'debug'] as const).map((method) => vi.spyOn(console, method).mockImplementation(toConsole(0))),
    ...(['warn', 'error', 'trace'] as const).map((method) => vi.spyOn(console, method).mockImplementation(toConsole(1))),
    vi.spyOn(process, 'exit').mockImplementation((code) => {
      throw new Error(`process.exit(${code ?? ''}) called by an in-process CLI run of ${args.join(' ')}`);
    }),
    ...streams.map((stream, i) =>
      vi.spyOn(stream, 'write').mockImplementation((chunk: string | Uint8Array, encoding?: unknown, callback?: unknown) => {
        captured[i] += typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString();
        const done = typeof encoding === 'function' ? encoding : callback;
        if (typeof done === 'function') (done as () => void)();
        return true;
      }),
    ),
  ];
  try {
    setEnv({ PATH: savedEnv.PATH ?? '', HOME: savedEnv.HOME ?? '', ...env });
    process.exitCode = undefined;
    for (const stream of streams) Object.defineProperty(stream, 'isTTY', { value: false, configurable: true, writable: true });
    const code = await main(args);
    return { code, signal: null, stdout: captured[0]!, stderr: captured[1]! };
  } finally {
    for (const spy of spies) spy.mockRestore();
    streams.forEach((stream, i) => {
      const tty = savedTty[i];
      if (tty) Object.defineProperty(stream, 'isTTY', tty);
      else delete (stream as { isTTY?: boolean }).isTTY;
    });
    process.exitCode = savedExitCode;
    setEnv(savedEnv);
  }
}
