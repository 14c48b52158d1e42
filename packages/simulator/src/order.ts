/**
 * Orders of records within one E6 response, which the reference leaves open, and the draws behind
 * them: a shuffle of a run of ties, and a random ordered sample of positions.
 */

/**
 * The orders of records within an E6 response the simulator can serve; the reference promises
 * none. `stable`: timestamp, then a fixed tie order. `ties`: timestamp, ties in an order drawn per
 * request. `random`: an order drawn per request. See `Dataset.pageJsonOrdered`.
 */
export const RECORD_ORDERS = ['stable', 'ties', 'random'] as const;
export type RecordOrder = (typeof RECORD_ORDERS)[number];

/** Fisher–Yates of `items[from … to)`, in place. */
export function shuffleRange<T>(items: T[], from: number, to: number, random: () => number): void {
  for (let i = to - 1; i > from; i--) {
    const j = from + Math.floor(random() * (i - from + 1));
    const swap = items[i]!;
    items[i] = items[j]!;
    items[j] = swap;
  }
}

/**
 * The first `k` entries of a uniformly random permutation of 0 … n-1 (a random ordered sample
 * without replacement), by a Fisher–Yates stopped after `k` steps that keeps only the cells it
 * moved: O(k) time and memory whatever `n`.
 *
 * One request shows positions [s, s + k) of its own permutation and no other position of it;
 * those are distributed exactly as positions [0, k), so drawing only the part served is the same
 * as shuffling everything and cutting the page out.
 */
export function samplePermutation(n: number, k: number, random: () => number): number[] {
  const moved = new Map<number, number>();
  const out = new Array<number>(k);
  for (let i = 0; i < k; i++) {
    const j = i + Math.floor(random() * (n - i));
    out[i] = moved.get(j) ?? j;
    moved.set(j, moved.get(i) ?? i);
  }
  return out;
}
