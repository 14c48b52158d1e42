/**
 * mulberry32: the simulator's seeded generator (behind `errorRate` and the record order drawn per
 * request), so a run repeats from its seed. Exported for tests that need the same repeatable draws.
 *
 * @param seed any number; its low 32 bits are used.
 * @returns a function giving the next number, uniform in [0, 1).
 */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}
