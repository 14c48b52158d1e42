/**
 * Crash cleanup for the child servers that test harnesses start (test/helpers/postgres.ts,
 * test/helpers/prometheus.ts): nothing may be left running, and no temp folder left behind,
 * however the test process ends.
 *
 * A harness calls {@link registerCleanup} once the server's temp folder exists, and
 * {@link ServerCleanup.release} once it has stopped the server itself. Until then the server is
 * covered three ways:
 *
 * - on process exit: the harness's synchronous `stopNow` runs, then the folder is deleted;
 * - on SIGINT, SIGTERM and SIGHUP: the same, and then the signal is raised again unless someone
 *   else listens for it, so the process still dies of it as it would have without us;
 * - on SIGKILL (or the OOM killer), where no Node code runs: a detached watchdog shell started
 *   with {@link ServerCleanup.watch} notices within about a second that the Node process is gone,
 *   runs the harness's stop script and deletes the folder.
 *
 * One set of exit and signal handlers serves every harness and every server in the process.
 */
import { spawn } from 'node:child_process';
import { rmSync } from 'node:fs';
import { tmpdir } from 'node:os';

/** An OS user and group to run a process as (Node's `uid`/`gid` spawn options). */
export interface RunAs {
  uid: number;
  gid: number;
}

/** What {@link registerCleanup} looks after. */
export interface CleanupOptions {
  /** The server's temp folder; deleted on exit, by the watchdog, and by {@link ServerCleanup.release}. */
  dir: string;
  /**
   * Stops the server synchronously (exit handlers cannot wait for anything asynchronous) and
   * returns once it is gone or can no longer write into the folder. May run before the server
   * was ever started, so it must cope with that; whatever it throws is ignored.
   */
  stopNow: () => void;
}

/** The shell a watchdog runs once the Node process is gone: {@link ServerCleanup.watch}. */
export interface WatchdogOptions {
  /**
   * POSIX sh commands that stop the server, with {@link WatchdogOptions.args} as `$1`, `$2`, ...
   * They should make sure they stop this server, not whatever reuses its pid, and must not
   * `exit`: the watchdog deletes the folder after them.
   */
  stopScript: string;
  /** Positional parameters of `stopScript` (paths, pids), so nothing needs quoting. */
  args: string[];
  /** The shell's `$0`, which `ps` shows, e.g. "pg-watchdog". */
  name: string;
  /** Working folder of the shell (default: the system temp folder). */
  cwd?: string;
  /** Run the shell as this user, e.g. the one the server runs as (default: ourselves). */
  runAs?: RunAs;
}

/** The handle {@link registerCleanup} returns. */
export interface ServerCleanup {
  /**
   * Starts a detached watchdog shell that outlives a SIGKILLed Node process: once that process is
   * gone it runs `opts.stopScript` and deletes the folder. Replaces (stops) the previous watchdog
   * of this registration, e.g. when the server was spawned again under a new pid. Without
   * /bin/sh there is no watchdog; the exit handlers still cover ordinary exits.
   */
  watch(opts: WatchdogOptions): void;
  /**
   * For when the harness has stopped the server itself: stops the watchdog, drops the exit
   * cleanup and deletes the folder. Idempotent.
   */
  release(): void;
}

interface Registration {
  dir: string;
  stopNow: () => void;
  watchdogPid: number | undefined;
}

/** Live registrations, cleaned up synchronously if the process ends before their harnesses release them. */
const live = new Set<Registration>();
let exitHandlersInstalled = false;

/**
 * Registers a server and its temp folder for cleanup on exit, on SIGINT/SIGTERM/SIGHUP and (once
 * {@link ServerCleanup.watch} started a watchdog) on SIGKILL of the Node process. Call it as soon
 * as the folder exists; call `release()` on the result after stopping the server normally.
 */
export function registerCleanup(opts: CleanupOptions): ServerCleanup {
  installExitHandlers();
  const registration: Registration = { dir: opts.dir, stopNow: opts.stopNow, watchdogPid: undefined };
  live.add(registration);
  return {
    watch(watchdog) {
      stopWatchdog(registration.watchdogPid);
      registration.watchdogPid = startWatchdog(opts.dir, watchdog);
    },
    release() {
      stopWatchdog(registration.watchdogPid);
      registration.watchdogPid = undefined;
      live.delete(registration);
      rmSync(opts.dir, { recursive: true, force: true });
    },
  };
}

function emergencyCleanupAll(): void {
  for (const { dir, stopNow, watchdogPid } of live) {
    try {
      stopNow();
    } catch {
      // Nothing more we can do while exiting; the folder goes anyway.
    }
    stopWatchdog(watchdogPid);
    rmSync(dir, { recursive: true, force: true });
  }
  live.clear();
}

function installExitHandlers(): void {
  if (exitHandlersInstalled) return;
  exitHandlersInstalled = true;
  process.on('exit', emergencyCleanupAll);
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.once(signal, () => {
      emergencyCleanupAll();
      // Our listener suppressed the default action; restore it unless someone else handles the signal.
      if (process.listenerCount(signal) === 0) process.kill(process.pid, signal);
    });
  }
}

/** Spawns the watchdog shell for `dir` (see {@link ServerCleanup.watch}) and returns its pid. */
function startWatchdog(dir: string, opts: WatchdogOptions): number | undefined {
  // `kill -0` fails with EPERM across users (a watchdog running as another user), so /proc is
  // checked too (Linux); either means alive. Polling every second bounds the delay to about 1 s.
  const script = [
    'watchdog_node_pid=$1; watchdog_dir=$2; shift 2',
    'while kill -0 "$watchdog_node_pid" 2>/dev/null || [ -d "/proc/$watchdog_node_pid" ]; do sleep 1; done',
    opts.stopScript,
    'rm -rf "$watchdog_dir"',
  ].join('\n');
  const child = spawn('/bin/sh', ['-c', script, opts.name, String(process.pid), dir, ...opts.args], {
    cwd: opts.cwd ?? tmpdir(),
    detached: true,
    stdio: 'ignore',
    ...(opts.runAs ?? {}),
  });
  child.on('error', () => {
    // Without /bin/sh there is no watchdog; the exit handlers still cover ordinary exits.
  });
  child.unref();
  return child.pid;
}

function stopWatchdog(pid: number | undefined): void {
  if (pid === undefined) return;
  try {
    // Negative pid: the watchdog is a process-group leader (detached); this also ends its `sleep`.
    process.kill(-pid, 'SIGKILL');
  } catch {
    // Already gone.
  }
}
