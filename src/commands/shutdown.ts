/**
 * SIGINT/SIGTERM for every long-running command: the first signal starts a graceful stop and arms
 * an unref'd forced exit; a second exits at once with 128 + the signal's number.
 */
import type { Logger } from '../log.js';

type ShutdownSignal = 'SIGINT' | 'SIGTERM';

const SIGNAL_EXIT: Readonly<Record<ShutdownSignal, number>> = { SIGINT: 130, SIGTERM: 143 };

export interface ShutdownOptions {
  log: Logger;
  /** Logged at the first signal. */
  stopping: string;
  /** Called once, with the first signal. Must not throw. */
  stop: (signal: ShutdownSignal) => void;
  /** The forced exit, `ms` after the first signal, logging `message`. */
  bound: { ms: number; exitCode: number; message: string; level: 'warn' | 'error' };
  /** Logged at a second signal. */
  forced: string;
}

export interface Shutdown {
  /** The first signal received, if any. */
  received(): ShutdownSignal | undefined;
  /** Removes the handlers and the timer. Idempotent. */
  dispose(): void;
}

/** Installs the handlers; {@link Shutdown.dispose} them once the command ends by itself. */
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
