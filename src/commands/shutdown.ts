/**
 * SIGINT/SIGTERM for every long-running command (`sync`, `serve`, `simulate`), one way: the first
 * signal starts a graceful stop and arms a forced exit (unref'd, so it never keeps the process
 * alive by itself); a second signal exits at once with 128 + the signal's number, as shells expect.
 */
import type { Logger } from '../log.js';

type ShutdownSignal = 'SIGINT' | 'SIGTERM';

/** Exit status when a second signal forces the exit: 128 + signal number. */
const SIGNAL_EXIT: Readonly<Record<ShutdownSignal, number>> = { SIGINT: 130, SIGTERM: 143 };

export interface ShutdownOptions {
  log: Logger;
  /** Logged (warn) with the signal when the first one arrives: what stopping means here. */
  stopping: string;
  /** Starts the graceful stop; called once, with the first signal. Must not throw. */
  stop: (signal: ShutdownSignal) => void;
  /**
   * Exits with `exitCode` this long after the first signal if the process is still alive, logging
   * `message` (at `level`) with `{ boundMs }`.
   */
  bound: { ms: number; exitCode: number; message: string; level: 'warn' | 'error' };
  /** Logged (warn) with the signal when a second one forces the exit. */
  forced: string;
}

/** Handle on installed signal handling. */
export interface Shutdown {
  /** The first signal received, if any. */
  received(): ShutdownSignal | undefined;
  /** Removes the handlers and the forced-exit timer. Idempotent. */
  dispose(): void;
}

/**
 * Installs the handlers for SIGINT and SIGTERM (see the module comment).
 *
 * @returns the handle; call {@link Shutdown.dispose} once the command ends by itself.
 */
export function handleShutdownSignals(options: ShutdownOptions): Shutdown {
  const { log } = options;
  let received: ShutdownSignal | undefined;
  let timer: NodeJS.Timeout | undefined;
  const onSignal = (signal: ShutdownSignal) => {
    if (received !== undefined) {
      log.warn({ signal }, options.forced);
      process.exit(SIGNAL_EXIT[signal]);
    }
    received = signal;
    log.warn({ signal }, options.stopping);
    const { ms, exitCode, message, level } = options.bound;
    timer = setTimeout(() => {
      log[level]({ boundMs: ms }, message);
      process.exit(exitCode);
    }, ms);
    timer.unref();
    options.stop(signal);
  };
  const onInt = () => onSignal('SIGINT');
  const onTerm = () => onSignal('SIGTERM');
  process.on('SIGINT', onInt);
  process.on('SIGTERM', onTerm);
  return {
    received: () => received,
    dispose: () => {
      clearTimeout(timer);
      process.off('SIGINT', onInt);
      process.off('SIGTERM', onTerm);
    },
  };
}
