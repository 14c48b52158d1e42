/**
 * Polling for a condition in tests: a busy 2-core machine makes fixed sleeps flaky, so tests wait
 * for what they need and fail with its name when it does not come.
 */
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * Calls `probe` every `intervalMs` until it resolves to something other than undefined, and
 * returns that. A probe that throws counts as not yet (a server still starting, say).
 *
 * @throws Error naming `what` after `timeoutMs`.
 */
export async function until<T>(what: string, probe: () => Promise<T | undefined> | T | undefined, timeoutMs = 30_000, intervalMs = 20): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await Promise.resolve()
      .then(probe)
      .catch(() => undefined);
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`${what}: not reached within ${timeoutMs} ms`);
    await sleep(intervalMs);
  }
}

/** {@link until} for a yes/no condition: resolves once `condition` is true. */
export async function untilTrue(what: string, condition: () => Promise<boolean> | boolean, timeoutMs = 30_000, intervalMs = 20): Promise<void> {
  await until(what, async () => ((await condition()) ? true : undefined), timeoutMs, intervalMs);
}
