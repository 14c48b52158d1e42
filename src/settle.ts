/**
 * Bounded waits for shutdown and health checks: wait for a promise at most so long, without
 * cancelling it (what takes no AbortSignal cannot be cancelled, only stopped waiting for).
 */

/**
 * Resolves as `promise` does, or rejects with `Error("<what> took longer than <ms> ms")` after `ms`
 * milliseconds. The timer is cleared either way.
 */
export function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} took longer than ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** Whether `promise` settles (either way) within `ms` milliseconds; it is not cancelled when it does not. */
export function settledWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
  });
  const settled = promise.then(
    () => true,
    () => true,
  );
  return Promise.race([settled, timeout]).finally(() => clearTimeout(timer));
}
