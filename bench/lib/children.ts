/**
 * The processes a benchmark measures or talks to, each a child of the bench process so that its
 * CPU time and memory are its own: the simulator (`dist/cli.js simulate`), one `sync` run, a
 * `serve`, and a bare `node:http` server. Children get exactly the environment given (plus
 * PATH and HOME), as the CLI tests do, so nothing of the caller's shell leaks in.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));
export const CLI_PATH = join(ROOT, 'dist', 'cli.js');
const EXIT_STATS_PRELOAD = fileURLToPath(new URL('./exit-stats.mjs', import.meta.url));

/** Children still running; killed if the bench process ends early. */
const running = new Set<ChildProcess>();
process.on('exit', () => {
  for (const child of running) child.kill('SIGKILL');
});

function baseEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  return { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...extra };
}

function track(child: ChildProcess): ChildProcess {
  running.add(child);
  child.once('exit', () => running.delete(child));
  return child;
}

export function requireBuild(): void {
  if (!existsSync(CLI_PATH)) throw new Error(`${CLI_PATH} is missing: run npm run build (npm run bench does it first)`);
}

/** Resolves with the first stdout line matching `pattern`, or rejects when the child exits first or after `timeoutMs`. */
function waitForLine(child: ChildProcess, pattern: RegExp, what: string, timeoutMs = 30_000): Promise<RegExpExecArray> {
  return new Promise((resolve, reject) => {
    let buffered = '';
    let stderr = '';
    const timer = setTimeout(() => fail(new Error(`${what} did not start within ${timeoutMs} ms:\n${stderr}`)), timeoutMs);
    const onData = (chunk: Buffer): void => {
      buffered += chunk.toString();
      const match = pattern.exec(buffered);
      if (match) {
        cleanup();
        resolve(match);
      }
    };
    const onErr = (chunk: Buffer): void => {
      stderr += chunk.toString();
      const match = pattern.exec(stderr);
      if (match) {
        cleanup();
        resolve(match);
      }
    };
    const onExit = (code: number | null, signal: NodeJS.Signals | null): void =>
      fail(new Error(`${what} exited (${signal ?? `code ${code}`}) before it was ready:\n${stderr}`));
    const cleanup = (): void => {
      clearTimeout(timer);
      child.stdout?.off('data', onData);
      child.stderr?.off('data', onErr);
      child.off('exit', onExit);
    };
    const fail = (error: Error): void => {
      cleanup();
      reject(error);
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onErr);
    child.once('exit', onExit);
  });
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
  await exited;
  clearTimeout(timer);
}

export interface SimulatorChild {
  url: string;
  pid: number | undefined;
  stop(): Promise<void>;
}

export interface SimulatorSpec {
  records: number;
  start: Date;
  end: Date;
  /** Delay before every request, in milliseconds (`--latency`). */
  latencyMs?: number;
  /** More flags of `simulate`, e.g. `['--gzip', 'auto', '--bandwidth', '100mbit']`. */
  extraArgs?: string[];
}

/** Starts `dist/cli.js simulate` on an ephemeral loopback port. */
export async function startSimulatorChild(spec: SimulatorSpec): Promise<SimulatorChild> {
  requireBuild();
  const args = [
    CLI_PATH,
    'simulate',
    '--host',
    '127.0.0.1',
    '--port',
    '0',
    '--records',
    String(spec.records),
    '--start',
    spec.start.toISOString(),
    '--end',
    spec.end.toISOString(),
  ];
  if (spec.latencyMs) args.push('--latency', `${spec.latencyMs}ms`);
  if (spec.extraArgs) args.push(...spec.extraArgs);
  const child = track(spawn(process.execPath, args, { env: baseEnv({ LOG_LEVEL: 'warn' }), stdio: ['ignore', 'pipe', 'pipe'] }));
  const match = await waitForLine(child, /listening on (http:\/\/[^\s:]+:\d+)/, 'the simulator');
  child.stdout?.resume();
  child.stderr?.resume();
  return { url: match[1]!, pid: child.pid, stop: () => stopChild(child) };
}

/** Environment of a `sync` or `serve` child against the simulator at `url` and the database at `databaseUrl`. */
export function upstreamEnv(url: string, databaseUrl: string, extra: Record<string, string> = {}): Record<string, string> {
  return {
    STATISTICS_URL: url,
    AUTH_URL: url,
    CLIENT_ID: 'demo-client',
    CLIENT_SECRET: 'demo-secret',
    DATABASE_URL: databaseUrl,
    DATABASE_SCHEMA: 'analytics',
    ...extra,
  };
}

export interface MeasuredRun {
  /** Wall time from spawn to exit, in seconds. */
  wallSeconds: number;
  /** Peak resident set size (VmHWM at exit), in bytes. */
  peakRssBytes: number;
  /** CPU time (user + system) of the process, in seconds. */
  cpuSeconds: number;
  /** The child's own summary line (`sync run succeeded`), parsed, when it logged one. */
  summary: Record<string, unknown> | undefined;
  stderr: string;
  /** The exit status (0 unless `okCodes` allowed another). */
  code: number;
}

/**
 * Runs one `node dist/cli.js sync …` to completion and measures it.
 *
 * @param options.nodeArgs extra Node flags, e.g. `--cpu-prof`; `okCodes` the exit statuses accepted (default 0 only).
 * @throws when the child exits otherwise or reports no successful run.
 */
export async function runSyncChild(
  args: string[],
  env: Record<string, string>,
  options: { nodeArgs?: string[]; cwd?: string; okCodes?: readonly number[] } = {},
): Promise<MeasuredRun> {
  requireBuild();
  const scratch = mkdtempSync(join(tmpdir(), 'bench-sync-'));
  const statsFile = join(scratch, 'exit-stats.json');
  try {
    const started = performance.now();
    const child = track(
      spawn(process.execPath, [...(options.nodeArgs ?? []), '--import', EXIT_STATS_PRELOAD, CLI_PATH, 'sync', ...args], {
        env: baseEnv({ LOG_LEVEL: 'info', ...env, BENCH_EXIT_STATS_FILE: statsFile }),
        stdio: ['ignore', 'ignore', 'pipe'],
        cwd: options.cwd ?? ROOT,
      }),
    );
    let stderr = '';
    child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const { code, signal } = await new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve, reject) => {
      child.once('error', reject);
      child.once('close', (c, s) => resolve({ code: c, signal: s }));
    });
    const wallSeconds = (performance.now() - started) / 1000;
    if (code === null || !(options.okCodes ?? [0]).includes(code)) throw new Error(`sync exited ${signal ?? code}:\n${stderr.slice(-4000)}`);
    const lines = stderr.split('\n');
    // With `okCodes` [0, 1], the summary may be `sync run succeeded but parked …` (or `…, but … parked by earlier runs …`).
    const summaryLine = lines.find((line) => line.includes('"sync run succeeded"')) ?? lines.find((line) => line.includes('"sync run succeeded'));
    if (summaryLine === undefined) throw new Error(`sync exited ${code} without "sync run succeeded":\n${stderr.slice(-4000)}`);
    const summary = JSON.parse(summaryLine) as Record<string, unknown>;
    const { peakRssBytes, cpuSeconds } = JSON.parse(readFileSync(statsFile, 'utf8')) as { peakRssBytes: number; cpuSeconds: number };
    return { wallSeconds, peakRssBytes, cpuSeconds, summary, stderr, code };
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

export interface ServerChild {
  url: string;
  /** The child's process id (for /proc/<pid>/status). */
  pid: number;
  stop(): Promise<void>;
}

/** Starts `node dist/cli.js serve` on an ephemeral loopback port, without the sync schedule; over TLS when `env` has a WEB_CONFIG_FILE that says so. */
export async function startServeChild(env: Record<string, string>): Promise<ServerChild> {
  requireBuild();
  const child = track(
    spawn(process.execPath, [CLI_PATH, 'serve'], {
      env: baseEnv({ LOG_LEVEL: 'info', METRICS_LISTEN: '127.0.0.1:0', SYNC_SCHEDULE: 'off', ...env }),
      stdio: ['ignore', 'pipe', 'pipe'],
      cwd: ROOT,
    }),
  );
  const match = await waitForLine(child, /serving (https?:\/\/[^\s/"]+)\/metrics/, 'serve');
  child.stdout?.resume();
  child.stderr?.resume();
  return { url: match[1]!, pid: child.pid!, stop: () => stopChild(child) };
}

/** Starts bench/lib/bare-server.mjs: a bare node:http server answering every request with the bytes of `bodyFile`. */
export async function startBareServer(bodyFile: string, contentType: string): Promise<ServerChild> {
  const script = fileURLToPath(new URL('./bare-server.mjs', import.meta.url));
  const child = track(spawn(process.execPath, [script, bodyFile, contentType], { env: baseEnv({}), stdio: ['ignore', 'pipe', 'pipe'] }));
  const match = await waitForLine(child, /listening on (http:\/\/[^\s]+)/, 'the bare server');
  child.stdout?.resume();
  child.stderr?.resume();
  return { url: match[1]!, pid: child.pid!, stop: () => stopChild(child) };
}

/**
 * Runs a bench script as a child (a TypeScript one through tsx; a `.mjs` one as it is, so that its
 * CPU time holds no compiler) and returns the JSON it prints as its last stdout line.
 */
export async function runScriptChild<T>(script: string, args: string[]): Promise<T> {
  const loader = script.endsWith('.mjs') ? [] : ['--import', 'tsx'];
  const child = track(
    spawn(process.execPath, [...loader, fileURLToPath(new URL(script, import.meta.url)), ...args], {
      env: baseEnv({}),
      stdio: ['ignore', 'pipe', 'pipe'],
      cwd: ROOT,
    }),
  );
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const code = await new Promise<number | null>((resolve, reject) => {
    child.once('error', reject);
    child.once('close', resolve);
  });
  if (code !== 0) throw new Error(`${script} exited ${code}:\n${stderr.slice(-4000)}`);
  const last = stdout.trim().split('\n').pop() ?? '';
  return JSON.parse(last) as T;
}

/**
 * A fake platform on 127.0.0.1 for serve's scrape benches: E0 answers a token, E7 answers `bytes`
 * as Prometheus text, anything else 404. Close `server` when done.
 */
export async function startE7Upstream(bytes: Buffer): Promise<{ server: Server; url: string }> {
  const server = createServer((req, res) => {
    req.resume();
    const path = new URL(req.url ?? '/', 'http://x').pathname;
    if (path === '/connect/token') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ access_token: 'bench-token', token_type: 'Bearer', expires_in: 3600 }));
    } else if (path === '/analytics/prometheus') {
      res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4; charset=utf-8', 'content-length': bytes.length });
      res.end(bytes);
    } else {
      res.writeHead(404).end();
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}
