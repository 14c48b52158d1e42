/**
 * Throwaway Prometheus servers and promtool for integration tests (CONTRIBUTING.md, "Tests").
 *
 * Tests prove the exporter against the real thing: `promtool check metrics` lints exposition
 * text, and a real Prometheus scrapes the exporter over HTTP(S) so queries (and the dashboard's
 * PromQL) run against what it actually stored. Both come from Debian's `prometheus` package
 * (scripts/ensure-prometheus.sh installs it); a machine without them fails loudly with the
 * install command, it never skips.
 *
 * A server lives in its own temp folder (config, TSDB, log), listens only on 127.0.0.1 on a free
 * port, scrapes and evaluates every second, and is ready when {@link startPrometheus} resolves
 * (about 0.1 s). The first scrape comes about 5-6 s later whatever the scrape interval:
 * Prometheus 2.x hands discovered targets (static ones too) to the scrape manager on a fixed 5 s
 * tick. Use {@link PrometheusServer.waitFor} rather than sleeping.
 *
 * Prometheus does not mind running as root, so unlike PostgreSQL it runs as whoever runs the tests.
 *
 * Nothing here may leave a Prometheus behind after a crashed run: servers are killed and their
 * folders deleted on process exit and on SIGINT/SIGTERM/SIGHUP, and a detached watchdog shell
 * does the same if the Node process dies without a chance to clean up (SIGKILL, OOM);
 * test/helpers/processes.ts does both.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { closeSync, existsSync, mkdtempSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join, resolve as resolvePath } from 'node:path';
import { registerCleanup } from './processes.js';
import { freePort } from './ports.js';

/** Where the Prometheus binaries were found, and which version they are. */
export interface PrometheusBinaries {
  /** Absolute path of the `prometheus` server binary. */
  prometheus: string;
  /** Absolute path of `promtool`. */
  promtool: string;
  /** Version of the server, e.g. "2.42.0+ds" (from `prometheus --version`). */
  version: string;
}

/** What a promtool run printed and how it exited. */
export interface PromtoolResult {
  /** Exit code; promtool uses 1 for errors and 3 for lint problems. */
  code: number;
  stdout: string;
  stderr: string;
}

/** One series of an instant-query result. */
export interface PromSample {
  /** The series' labels, `__name__` included when the expression keeps it. */
  metric: Record<string, string>;
  /** Evaluation time (Unix seconds, may have decimals) and the value as Prometheus prints it ("42", "NaN", "+Inf"). */
  value: [number, string];
}

/** An instant vector, as returned by {@link PrometheusServer.query}. */
export type PromVector = PromSample[];

/** The whole JSON body of a Prometheus HTTP API answer (https://prometheus.io/docs/prometheus/latest/querying/api/). */
export interface PromApiResponse<T = unknown> {
  status: 'success' | 'error';
  data?: T;
  /** Set when status is "error", e.g. "bad_data" for a PromQL parse error. */
  errorType?: string;
  /** Set when status is "error", e.g. `invalid parameter "query": 1:5: parse error: unexpected end of input`. */
  error?: string;
  warnings?: string[];
}

/** The `data` of a successful `/api/v1/query` answer. */
export interface PromQueryData {
  resultType: 'vector' | 'matrix' | 'scalar' | 'string';
  /** PromVector for "vector"; `[time, "value"]` for "scalar" and "string"; series with `values` for "matrix". */
  result: unknown;
}

/** One scrape target as reported by `/api/v1/targets`. */
export interface PromActiveTarget {
  discoveredLabels: Record<string, string>;
  /** Labels after relabelling: `job`, `instance`, ... */
  labels: Record<string, string>;
  scrapePool: string;
  scrapeUrl: string;
  globalUrl: string;
  /** Why the last scrape failed; "" when it succeeded. */
  lastError: string;
  /** RFC 3339 time of the last scrape; "0001-01-01T00:00:00Z" before the first one. */
  lastScrape: string;
  lastScrapeDuration: number;
  health: 'up' | 'down' | 'unknown';
  scrapeInterval: string;
  scrapeTimeout: string;
}

/** The `data` of a `/api/v1/targets` answer. */
export interface PromTargetsData {
  activeTargets: PromActiveTarget[];
  droppedTargets: Array<{ discoveredLabels: Record<string, string> }>;
}

/** Options for {@link startPrometheus}. */
export interface StartPrometheusOptions {
  /**
   * `scrape_configs` entries exactly as Prometheus expects them, e.g.
   * `{ job_name: 'exporter', scrape_interval: '1s', static_configs: [{ targets: ['127.0.0.1:1234'] }] }`,
   * with `scheme`, `tls_config`, `basic_auth`, ... as needed. File paths in them (CA files,
   * password files) should be absolute.
   */
  scrapeConfigs: object[];
  /** Rule files to load (`rule_files`); relative paths are taken from the current directory. */
  ruleFiles?: string[];
  /** More command-line flags for `prometheus`, e.g. `['--query.lookback-delta=10s']`. */
  extraArgs?: string[];
  /** How long to wait for `/-/ready` (default 30 s). */
  readyTimeoutMs?: number;
}

/** A running Prometheus started by {@link startPrometheus}. */
export interface PrometheusServer {
  /** Base URL without a trailing slash, e.g. `http://127.0.0.1:41234`. */
  readonly url: string;
  /** TCP port on 127.0.0.1. */
  readonly port: number;
  /** The server's temp folder: prometheus.yml, data/ and prometheus.log. Deleted by stop(). */
  readonly dir: string;
  /**
   * Runs an instant query now and returns its vector (a scalar result becomes one sample with
   * no labels).
   *
   * @throws Error with Prometheus' error text (e.g. "parse error: ...") when the query is
   *   rejected, or when the result is a matrix or a string (use {@link PrometheusServer.queryRaw}).
   */
  query(promql: string): Promise<PromVector>;
  /** Runs an instant query and returns the API's whole JSON answer, errors included (never throws for a rejected query). */
  queryRaw(promql: string): Promise<PromApiResponse<PromQueryData>>;
  /**
   * Runs `promql` every 100 ms until `predicate` accepts the result, and returns that result.
   *
   * @param timeoutMs give up after this long (default 20 s; mind the ~6 s to the first scrape).
   * @throws Error on timeout, with the last result, the targets' health and last scrape errors;
   *   at once when the query itself is rejected (a parse error does not go away by waiting).
   */
  waitFor(promql: string, predicate: (result: PromVector) => boolean, timeoutMs?: number): Promise<PromVector>;
  /** The `data` of `/api/v1/targets`: every target's health, last scrape and last error. */
  targets(): Promise<PromTargetsData>;
  /** The server's log so far (logfmt, level info and up). */
  log(): string;
  /** SIGTERM, waits for the exit (SIGKILL after 10 s), then deletes the temp folder. Idempotent. */
  stop(): Promise<void>;
}

const INSTALL_HINT =
  'Prometheus binaries (prometheus, promtool) were not found on PATH or in /usr/bin. Install them with ' +
  '`apt-get install prometheus` (or run scripts/ensure-prometheus.sh, which also keeps the package from ' +
  'starting a system service).';
const PORT_ATTEMPTS = 5;
const STOP_TIMEOUT_MS = 10_000;
const PROMTOOL_TIMEOUT_MS = 60_000;

let cachedBinaries: PrometheusBinaries | undefined;

/**
 * Finds `prometheus` and `promtool`: on PATH first, then in /usr/bin (where Debian's package
 * puts them), and reads the server's version. The result is cached for the process.
 *
 * @throws Error saying to `apt-get install prometheus` when either binary is missing, or when
 *   `prometheus --version` cannot be run or read.
 */
export function findPrometheusBinaries(): PrometheusBinaries {
  if (cachedBinaries) return cachedBinaries;
  const prometheus = findBinary('prometheus');
  const promtool = findBinary('promtool');
  if (prometheus === undefined || promtool === undefined) throw new Error(INSTALL_HINT);
  let versionText: string;
  try {
    versionText = execFileSync(prometheus, ['--version'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (error) {
    throw new Error(`${prometheus} --version failed. ${INSTALL_HINT}`, { cause: error });
  }
  const version = /^prometheus, version (\S+)/m.exec(versionText)?.[1];
  if (version === undefined) throw new Error(`Cannot read the Prometheus version from "${versionText.trim()}" (${prometheus})`);
  cachedBinaries = { prometheus, promtool, version };
  return cachedBinaries;
}

function findBinary(name: string): string | undefined {
  const dirs = [...(process.env.PATH ?? '').split(delimiter).filter((dir) => dir !== ''), '/usr/bin'];
  return dirs.map((dir) => resolvePath(dir, name)).find((path) => existsSync(path));
}

/**
 * Runs promtool with `args`, feeding `stdin` (if given) to it, and resolves with its exit code
 * and output whatever the code is: a non-zero exit is a result here, not an error.
 *
 * @throws Error when promtool is not installed (with how to install it), cannot be started, is
 *   killed by a signal, or runs longer than 60 s.
 */
export function promtool(args: string[], stdin?: string): Promise<PromtoolResult> {
  const { promtool: file } = findPrometheusBinaries();
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, { stdio: ['pipe', 'pipe', 'pipe'], env: { ...process.env, LC_ALL: 'C' } });
    let stdout = '';
    let stderr = '';
    const timer = setTimeout(() => child.kill('SIGKILL'), PROMTOOL_TIMEOUT_MS);
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    // promtool may exit before reading all of stdin (e.g. on the first parse error): that is not our error.
    child.stdin.on('error', () => undefined);
    child.on('error', (error) => {
      clearTimeout(timer);
      reject(new Error(`Cannot run ${file}: ${error.message}`, { cause: error }));
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      if (code === null) reject(new Error(`promtool ${args.join(' ')} was killed (${signal ?? 'unknown signal'}):\n${stderr}`));
      else resolve({ code, stdout, stderr });
    });
    child.stdin.end(stdin ?? '');
  });
}

/**
 * Lints exposition text with `promtool check metrics` (text on stdin). Exit code 0: valid and
 * lint-clean; 1: not parseable (the parse error is on stderr); 3: parseable but with lint
 * problems such as a counter without `_total` or a metric without HELP (listed on stdout).
 *
 * @throws Error when promtool is not installed or cannot be run (see {@link promtool}).
 */
export function checkMetrics(text: string): Promise<PromtoolResult> {
  return promtool(['check', 'metrics'], text);
}

/** Blocks the thread for `ms` (only for exit handlers, where nothing asynchronous runs any more). */
function sleepSync(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/** True while `pid` runs (a zombie, dead but not yet reaped, counts as gone). */
function isRunning(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return !/\) Z /.test(stat);
  } catch {
    // No /proc entry: gone (or not Linux, where kill(0) is the best we have).
    if (existsSync('/proc/self/stat')) return false;
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  }
}

/**
 * Kills `child` at once if it still runs and waits (up to 1 s) until the kernel has finished it,
 * so it cannot write into its folder once that is deleted. Synchronous, for exit handlers.
 */
function killNow(child: ChildProcess | undefined): void {
  const pid = child?.pid;
  if (child === undefined || pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // Already gone.
  }
  // Let the kernel finish it before its folder goes, so it cannot write into a deleted tree.
  for (let waited = 0; waited < 1000 && isRunning(pid); waited += 10) sleepSync(10);
}

/**
 * What the watchdog runs once the Node process is gone: stop the server (only if that pid still
 * runs a Prometheus with this folder on its command line, so a reused pid is never hit), TERM
 * first and KILL after 5 s. `$1` is the server's pid, `$2` its folder.
 */
const WATCHDOG_STOP_SCRIPT =
  'server_pid=$1; dir=$2; ' +
  'mine() { grep -qaF -- "$dir" "/proc/$server_pid/cmdline" 2>/dev/null; }; ' +
  'if mine; then kill -TERM "$server_pid" 2>/dev/null; i=0; ' +
  'while mine && [ "$i" -lt 50 ]; do sleep 0.1; i=$((i + 1)); done; ' +
  'if mine; then kill -KILL "$server_pid" 2>/dev/null; sleep 0.2; fi; fi';

/** Resolves with the exit once `child` has exited (at once if it already has). */
function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => child.once('exit', () => resolve()));
}

const delay = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Starts a throwaway Prometheus: writes `prometheus.yml` (global scrape and evaluation interval
 * 1 s, `opts.scrapeConfigs`, `opts.ruleFiles`) into a fresh temp folder and runs
 * `prometheus --config.file=… --storage.tsdb.path=<folder>/data --web.listen-address=127.0.0.1:<free port>
 * --web.enable-lifecycle` plus `opts.extraArgs`, logging into `<folder>/prometheus.log`. Resolves
 * once `/-/ready` answers 200 (about 0.1 s); a port taken meanwhile is retried with another.
 *
 * @returns the server handle; call `stop()` when done (a crashed run is cleaned up anyway).
 * @throws Error when Prometheus is not installed (with how to install it), exits during start
 *   (e.g. a bad config; the message holds its log), or is not ready within `readyTimeoutMs`.
 */
export async function startPrometheus(opts: StartPrometheusOptions): Promise<PrometheusServer> {
  const { prometheus } = findPrometheusBinaries();
  const root = mkdtempSync(join(tmpdir(), 'prometheus-test-'));
  const configFile = join(root, 'prometheus.yml');
  const logFile = join(root, 'prometheus.log');
  const readLog = () => (existsSync(logFile) ? readFileSync(logFile, 'utf8') : '');

  // JSON is YAML, so no YAML library is needed.
  const config = {
    global: { scrape_interval: '1s', evaluation_interval: '1s' },
    rule_files: (opts.ruleFiles ?? []).map((file) => resolvePath(file)),
    scrape_configs: opts.scrapeConfigs,
  };
  writeFileSync(configFile, `${JSON.stringify(config, null, 2)}\n`);

  let child: ChildProcess | undefined;
  const crashCleanup = registerCleanup({ dir: root, stopNow: () => killNow(child) });
  const cleanUp = async () => {
    if (child?.pid !== undefined && child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL');
      await exited(child);
    }
    crashCleanup.release();
  };

  try {
    let port = 0;
    for (let attempt = 1; ; attempt++) {
      port = await freePort();
      const url = `http://127.0.0.1:${port}`;
      const args = [
        `--config.file=${configFile}`,
        `--storage.tsdb.path=${join(root, 'data')}`,
        `--web.listen-address=127.0.0.1:${port}`,
        `--web.external-url=${url}/`,
        '--web.enable-lifecycle',
        // Hidden flag: apply target updates within 100 ms instead of on the next 5 s tick, so
        // the first scrape never waits for a second tick (the 5 s discovery tick remains).
        '--scrape.discovery-reload-interval=100ms',
        '--log.level=info',
        ...(opts.extraArgs ?? []),
      ];
      const logFd = openSync(logFile, 'a');
      try {
        child = spawn(prometheus, args, { cwd: root, stdio: ['ignore', logFd, logFd], env: { ...process.env, LC_ALL: 'C' } });
      } finally {
        closeSync(logFd);
      }
      const spawned = child;
      const spawnError = new Promise<Error>((resolve) => spawned.once('error', resolve));
      if (spawned.pid !== undefined) {
        crashCleanup.watch({ name: 'prometheus-watchdog', stopScript: WATCHDOG_STOP_SCRIPT, args: [String(spawned.pid), root] });
      }

      const polling = new AbortController();
      const outcome = await Promise.race([
        waitReady(url, configFile, opts.readyTimeoutMs ?? 30_000, polling.signal).then((ready) => (ready ? 'ready' : 'timeout')),
        exited(spawned).then(() => 'exited' as const),
        spawnError,
      ]);
      polling.abort();
      if (outcome === 'ready') break;
      if (outcome instanceof Error) throw new Error(`Cannot run ${prometheus}: ${outcome.message}`, { cause: outcome });
      const log = readLog();
      if (outcome === 'exited' && attempt < PORT_ATTEMPTS && /address already in use/i.test(log)) continue;
      const why = outcome === 'exited' ? `exited (${spawned.signalCode ?? `code ${spawned.exitCode}`})` : 'was not ready in time';
      throw new Error(`Prometheus ${why} while starting. Log (${logFile}):\n${log.trim()}`);
    }

    const running = child;
    const url = `http://127.0.0.1:${port}`;
    const api = async <T>(path: string, init?: RequestInit): Promise<PromApiResponse<T>> => {
      const response = await fetch(`${url}${path}`, init);
      const body = await response.text();
      try {
        return JSON.parse(body) as PromApiResponse<T>;
      } catch {
        throw new Error(`Prometheus ${path} answered HTTP ${response.status} with non-JSON: ${body.slice(0, 500)}`);
      }
    };
    const queryRaw = (promql: string) =>
      api<PromQueryData>('/api/v1/query', {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ query: promql }).toString(),
      });
    const query = async (promql: string): Promise<PromVector> => {
      const answer = await queryRaw(promql);
      if (answer.status !== 'success' || answer.data === undefined) {
        throw new Error(`Prometheus rejected the query ${JSON.stringify(promql)} (${answer.errorType ?? 'error'}): ${answer.error ?? JSON.stringify(answer)}`);
      }
      const { resultType, result } = answer.data;
      if (resultType === 'vector') return result as PromVector;
      if (resultType === 'scalar') return [{ metric: {}, value: result as [number, string] }];
      throw new Error(`The query ${JSON.stringify(promql)} gave a ${resultType}, not an instant vector; use queryRaw()`);
    };
    const targets = async (): Promise<PromTargetsData> => {
      const answer = await api<PromTargetsData>('/api/v1/targets');
      if (answer.status !== 'success' || answer.data === undefined)
        throw new Error(`Prometheus /api/v1/targets failed: ${answer.error ?? JSON.stringify(answer)}`);
      return answer.data;
    };

    let stopped = false;
    return {
      url,
      port,
      dir: root,
      query,
      queryRaw,
      targets,
      log: readLog,
      async waitFor(promql, predicate, timeoutMs = 20_000) {
        const deadline = Date.now() + timeoutMs;
        let last: PromVector = [];
        for (;;) {
          last = await query(promql);
          if (predicate(last)) return last;
          if (Date.now() > deadline) break;
          await delay(100);
        }
        const health = await targets()
          .then((data) =>
            data.activeTargets
              .map((t) => `  ${t.scrapePool} ${t.scrapeUrl}: ${t.health}, last scrape ${t.lastScrape}${t.lastError ? `, error: ${t.lastError}` : ''}`)
              .join('\n'),
          )
          .catch((error: unknown) => `  (targets unavailable: ${String(error)})`);
        throw new Error(
          `Timed out after ${timeoutMs} ms waiting for ${JSON.stringify(promql)}; last result: ${JSON.stringify(last)}\nTargets:\n${health || '  (none)'}`,
        );
      },
      async stop() {
        if (stopped) return;
        stopped = true;
        if (running.exitCode === null && running.signalCode === null) {
          running.kill('SIGTERM');
          const timer = setTimeout(() => running.kill('SIGKILL'), STOP_TIMEOUT_MS);
          await exited(running);
          clearTimeout(timer);
        }
        crashCleanup.release();
      },
    };
  } catch (error) {
    await cleanUp();
    throw error;
  }
}

/**
 * Polls `/-/ready` until it answers 200 and `/api/v1/status/flags` shows our config file (so a
 * server of someone else's that took the port is not mistaken for ours). Resolves false when
 * `timeoutMs` passes or `signal` aborts first.
 */
async function waitReady(url: string, configFile: string, timeoutMs: number, signal: AbortSignal): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline && !signal.aborted) {
    try {
      const ready = await fetch(`${url}/-/ready`, { signal: AbortSignal.timeout(1000) });
      await ready.body?.cancel();
      if (ready.status === 200) {
        const flags = (await (await fetch(`${url}/api/v1/status/flags`, { signal: AbortSignal.timeout(1000) })).json()) as PromApiResponse<
          Record<string, string>
        >;
        if (flags.data?.['config.file'] === configFile) return true;
      }
    } catch {
      // Not listening yet.
    }
    await delay(25);
  }
  return false;
}
