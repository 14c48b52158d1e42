/**
 * How far V8 lets the heap grow past what is alive before a full garbage collection.
 *
 * The ETL allocates about a megabyte per page (the body, the parsed records, the insert's
 * parameter) that is dead a few pages later, but pages fetched ahead live across young-generation
 * collections and are promoted. With V8's defaults on a machine with a few GiB of memory the old
 * generation may grow to about four times the live set before it is collected, so a long run's
 * peak RSS rises with its length although what it keeps alive does not (about 25 MB from the first
 * window to the last; see bench/findings.md). A smaller growing factor keeps the peak flat, for the
 * price of more frequent full collections of that small heap.
 */
import { setFlagsFromString } from 'node:v8';

/** Old-generation growth after a full collection, in percent of what survived it. */
export const HEAP_GROWING_PERCENT = 30;

/** Node flags with which an operator sizes V8's heap themselves. */
const OPERATOR_HEAP_FLAGS = /(^|\s)--(heap-growing-percent|max-old-space-size|max_old_space_size|max-heap-size)(=|\s|$)/;

/**
 * Sets V8's heap-growing factor to 1 + {@link HEAP_GROWING_PERCENT}/100 for this process, unless
 * the operator sized the heap themselves in `execArgv` or NODE_OPTIONS (for instance
 * `NODE_OPTIONS=--max-old-space-size=512` or `--heap-growing-percent=0` for V8's own default).
 *
 * V8 reads this flag at every full collection, so setting it at start-up through
 * `v8.setFlagsFromString` applies however the CLI was launched (bin, `node dist/cli.js`, Docker).
 *
 * @returns true when the flag was set.
 */
export function limitHeapGrowth(execArgv: readonly string[] = process.execArgv, nodeOptions: string = process.env.NODE_OPTIONS ?? ''): boolean {
  if (OPERATOR_HEAP_FLAGS.test(execArgv.join(' ')) || OPERATOR_HEAP_FLAGS.test(nodeOptions)) return false;
  setFlagsFromString(`--heap-growing-percent=${HEAP_GROWING_PERCENT}`);
  return true;
}
