/**
 * `serve` as a child process (dist/cli.js, so `npm run build` first), the way the integration
 * tests of signals, logs, reloads and replicas start it: listening on a free port of 127.0.0.1,
 * its output collected, and killed with SIGKILL by the test's teardown if it is still running.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { CLI_PATH } from './cli.js';
import { until } from './wait.js';

/** What {@link startServe} returns. */
export interface ServeChild {
  child: ChildProcess;
  /** Everything the child wrote to stderr so far (and stdout, with `stdout: true`), as text. */
  output: () => string;
  /** Resolves with the exit code once the child has exited and closed its streams. */
  exited: Promise<number | null>;
  /**
   * Waits for the "serving http://…/metrics" log line and returns its base URL (no path).
   *
   * @throws Error when the line does not come within `timeoutMs` (polled every `intervalMs`).
   */
  listening: (timeoutMs?: number, intervalMs?: number) => Promise<string>;
}

export interface StartServeOptions {
  /** The test's teardown stack (useAppPool's `closers`): the child is SIGKILLed there unless it has exited. */
  closers?: (() => Promise<unknown>)[];
  /** Collect stdout into {@link ServeChild.output} too (default: stdout is ignored). */
  stdout?: boolean;
}

/**
 * Spawns `serve` with only PATH, HOME and METRICS_LISTEN=127.0.0.1:0 from outside `env` (which
 * may override them) and returns at once; see {@link spawnServe} to wait until it listens.
 */
export function startServe(env: Record<string, string>, opts: StartServeOptions = {}): ServeChild {
  const child = spawn(process.execPath, [CLI_PATH, 'serve'], {
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', METRICS_LISTEN: '127.0.0.1:0', ...env },
    stdio: ['ignore', opts.stdout === true ? 'pipe' : 'ignore', 'pipe'],
  });
  let output = '';
  const collect = (c: Buffer) => (output += c.toString());
  child.stdout?.on('data', collect);
  child.stderr!.on('data', collect);
  const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
  opts.closers?.push(async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await exited;
  });
  return {
    child,
    output: () => output,
    exited,
    listening: (timeoutMs, intervalMs) =>
      until('serve listening', () => /serving (http:\/\/127\.0\.0\.1:\d+)\/metrics/.exec(output)?.[1], timeoutMs, intervalMs),
  };
}

/** {@link startServe} with `closers`, once it listens: also returns its base URL. */
export async function spawnServe(env: Record<string, string>, closers: (() => Promise<unknown>)[]): Promise<ServeChild & { url: string }> {
  const server = startServe(env, { closers });
  return { ...server, url: await server.listening() };
}
