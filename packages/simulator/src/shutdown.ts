/**
 * SIGINT/SIGTERM for the running simulator: the first signal starts a graceful stop and arms a
 * forced exit (unref'd, so it never keeps the process alive by itself); a second signal exits at
 * once with 128 + the signal's number, as shells expect.
 */
import type { Logger } from './log.js';

type ShutdownSignal = 'SIGINT' | 'SIGTERM';

/** Exit status when a second signal forces the exit: 128 + signal number. */
const SIGNAL_EXIT: Readonly<Record<ShutdownSignal, number>> = { SIGINT: 130, SIGTERM: 143 };

export interface ShutdownOptions {
  log: Logger;
  /** Starts the graceful stop; called once, with the first signal. Must not throw. */
  stop: (signal: ShutdownSignal) => void;
  /** After the first signal, exit with `exitCode` if the process is still alive this long after. */
  forcedExitAfterMs: number;
  exitCode: number;
}

/**
 * Installs the handlers for SIGINT and SIGTERM (see the module comment).
 *
 * @returns `dispose`, which removes the handlers and the forced-exit timer; idempotent.
 */
export function handleShutdownSignals(options: ShutdownOptions): { dispose(): void } {
  const { log } = options;
  let received: ShutdownSignal | undefined;
  let timer: NodeJS.Timeout | undefined;
  const onSignal = (signal: ShutdownSignal) => {
    if (received !== undefined) {
      log.warn({ signal }, 'second signal: exiting at once');
      process.exit(SIGNAL_EXIT[signal]);
    }
    received = signal;
    log.warn({ signal }, 'stopping the simulator (send the signal again to exit at once)');
    timer = setTimeout(() => {
      log.error({ boundMs: options.forcedExitAfterMs }, 'the simulator did not stop in time; exiting');
      process.exit(options.exitCode);
    }, options.forcedExitAfterMs);
    timer.unref();
    options.stop(signal);
  };
  const onInt = () => onSignal('SIGINT');
  const onTerm = () => onSignal('SIGTERM');
  process.on('SIGINT', onInt);
  process.on('SIGTERM', onTerm);
  return {
    dispose: () => {
      clearTimeout(timer);
      process.off('SIGINT', onInt);
      process.off('SIGTERM', onTerm);
    },
  };
}
