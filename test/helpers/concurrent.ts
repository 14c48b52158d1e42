/** Running the same request many times over a few connections at once. */

/**
 * Calls `task` `count` times, at most `concurrency` calls at a time, and returns the results in
 * the order they settled. A task that throws rejects the whole (catch inside `task` to count failures).
 */
export async function runConcurrently<T>(count: number, concurrency: number, task: () => Promise<T>): Promise<T[]> {
  const results: T[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < count) {
        next += 1;
        results.push(await task());
      }
    }),
  );
  return results;
}
