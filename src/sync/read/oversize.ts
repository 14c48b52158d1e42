/**
 * Slices of a window whose E6 answer is over the body cap (UPSTREAM_MAX_BODY: the request fails with
 * a {@link ResponseTooLargeError}). The reader (reader.ts) splits such a slice in time, in halves,
 * like an overflow; a slice that cannot be split (an instant, one SYNC_MIN_SPLIT) is read at smaller pages, the page size halved each time, down to one record a page. Only a
 * single record over the cap is left, and its window fails with the error (park.ts may park it).
 */
import { ResponseTooLargeError } from '../../errors.js';
import { iso, type Window } from '../windows.js';

/**
 * `reading`'s value, or, when it fails with an answer over the cap, what `instead` makes of that
 * error (reader.ts reads the slice split or at smaller pages instead).
 *
 * @throws what `reading` throws otherwise, and what `instead` throws.
 */
export async function whenTooLarge<T>(reading: Promise<T>, instead: (err: unknown) => Promise<void>): Promise<T | undefined> {
  try {
    return await reading;
  } catch (err) {
    if (!(err instanceof ResponseTooLargeError)) throw err;
    await instead(err);
    return undefined;
  }
}

/**
 * The page sizes an instant is tried at after an answer over the cap at `pageSize`: halved each
 * time (rounded down), down to 1.
 *
 * @returns sizes in decreasing order; empty when `pageSize` is 1 already.
 */
export function smallerPageSizes(pageSize: number): number[] {
  const sizes: number[] = [];
  for (let size = Math.floor(pageSize / 2); size >= 1; size = Math.floor(size / 2)) sizes.push(size);
  return sizes;
}

/**
 * Reads an instant at each of {@link smallerPageSizes} in turn until one read is not over the cap.
 *
 * @param read reads the instant at the page size given (reader.ts #readInstant); what it throws
 *   other than an answer over the cap ends the whole read.
 * @param where the instant and its window, named in the error.
 * @throws {ResponseTooLargeError} naming the instant and the window, when even one record a page is
 *   over the cap (its cause the last answer's error);
 *   whatever `read` throws otherwise.
 */
export async function readAtSmallerPages(
  pageSize: number,
  read: (pageSize: number) => Promise<void>,
  where: { instant: Window; window: Window; cause: unknown },
): Promise<void> {
  let cause = where.cause;
  for (const size of smallerPageSizes(pageSize)) {
    try {
      await read(size);
      return;
    } catch (err) {
      if (!(err instanceof ResponseTooLargeError)) throw err;
      cause = err;
    }
  }
  const { instant, window } = where;
  throw new ResponseTooLargeError(
    'analytics',
    `E6's answer for ${iso(instant.start)}..${iso(instant.end)} is over UPSTREAM_MAX_BODY even at one record a page, and that instant ` +
      `cannot be split further (SYNC_MIN_SPLIT): nothing of window ${iso(window.start)}..${iso(window.end)} was committed; raise UPSTREAM_MAX_BODY to load it`,
    { cause },
  );
}
