/**
 * E6 answers over UPSTREAM_MAX_BODY ({@link ResponseTooLargeError}): the reader splits their slice
 * in halves (reader.ts), and reads an instant at halved page sizes down to one record a page; past
 * that the window fails, and is parked (park.ts). See docs/design/oversize-split.md.
 */
import { ResponseTooLargeError } from '../../errors.js';
import { iso, type Window } from '../windows.js';

/** `reading`'s value; undefined once `instead` handled its failing over the cap (else rethrown). */
export async function whenTooLarge<T>(reading: Promise<T>, instead: (err: unknown) => Promise<void>): Promise<T | undefined> {
  try {
    return await reading;
  } catch (err) {
    if (!(err instanceof ResponseTooLargeError)) throw err;
    await instead(err);
    return undefined;
  }
}

/** The page sizes below `pageSize`, halved each time (rounded down) down to 1; empty for 1. */
export function smallerPageSizes(pageSize: number): number[] {
  const sizes: number[] = [];
  for (let size = Math.floor(pageSize / 2); size >= 1; size = Math.floor(size / 2)) sizes.push(size);
  return sizes;
}

/**
 * Reads an instant at each of {@link smallerPageSizes} until a read is not over the cap.
 *
 * @throws {ResponseTooLargeError} when one record a page still is; what `read` throws.
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
