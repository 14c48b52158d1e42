/**
 * How far V8 lets the heap grow past what is alive before a full collection. Pages fetched ahead
 * are promoted, and with V8's defaults the old generation may grow to four times the live set, so
 * a long run's peak RSS rose with its length (bench/findings.md). A smaller growing factor keeps
 * it flat, for more frequent full collections of a small heap.
 */
import { setFlagsFromString } from 'node:v8';

/** Percent of what survived a full collection. */
const HEAP_GROWING_PERCENT = 30;

const OPERATOR_HEAP_FLAGS = /(^|\s)--(heap-growing-percent|max-old-space-size|max_old_space_size|max-heap-size)(=|\s|$)/;

/**
 * Sets V8's heap-growing factor (read at every full collection) to 1 + {@link HEAP_GROWING_PERCENT}/100,
 * unless the operator sized the heap in `execArgv` or NODE_OPTIONS. Returns whether it did.
 */
export function limitHeapGrowth(execArgv: readonly string[] = process.execArgv, nodeOptions: string = process.env.NODE_OPTIONS ?? ''): boolean {
  if (OPERATOR_HEAP_FLAGS.test(execArgv.join(' ')) || OPERATOR_HEAP_FLAGS.test(nodeOptions)) return false;
  setFlagsFromString(`--heap-growing-percent=${HEAP_GROWING_PERCENT}`);
  return true;
}
