/**
 * The API's clock as its answers tell it: each E6 and E7 response's `Date` header (1 s resolution)
 * against the local clock while the response was on its way. The skew is the API's clock minus the
 * local one (negative: the local clock is ahead), an estimate with its uncertainty; a skew surely
 * beyond the bound is logged at warn once per change, its return within at info. Design:
 * docs/design/api-clock.md.
 */
import type { Endpoint } from '../errors.js';
import type { Logger } from '../log.js';
import { parseHttpDate } from '../time.js';
import type { RawResponse } from './http.js';

/** The bound when SYNC_SETTLE is small or 0: well above the estimate's noise (0.5 s and half a round trip). */
export const CLOCK_SKEW_FLOOR_MS = 5_000;

/** API clock minus local clock, in ms: `skewMs` ± `uncertaintyMs` holds the true skew. */
export interface ClockSkew {
  skewMs: number;
  uncertaintyMs: number;
}

/** The skew bound of a source: half of SYNC_SETTLE (ms), at least {@link CLOCK_SKEW_FLOOR_MS}. */
export function clockSkewBoundMs(settleMs: number): number {
  return Math.max(settleMs / 2, CLOCK_SKEW_FLOOR_MS);
}

/**
 * The skew a response's `Date` shows. The API stamped a time in `[date, date + 1 s)` while the local
 * clock was in `[sentAtMs, headersAtMs]`, so the skew lies in `[date − headersAtMs, date + 1000 − sentAtMs]`:
 * its midpoint, ± half its width. Undefined without a readable `Date` header.
 */
export function skewOf(res: Pick<RawResponse, 'headers' | 'sentAtMs' | 'headersAtMs'>): ClockSkew | undefined {
  const header = res.headers.date;
  const date = parseHttpDate(Array.isArray(header) ? (header[0] ?? '') : (header ?? ''));
  if (date === undefined || !(res.headersAtMs >= res.sentAtMs)) return undefined;
  const low = date - res.headersAtMs;
  const high = date + 1000 - res.sentAtMs;
  return { skewMs: (low + high) / 2, uncertaintyMs: (high - low) / 2 };
}

export interface ClockWatchOptions {
  /** ms, from {@link clockSkewBoundMs}. */
  boundMs: number;
  /** Carries `source`. */
  log: Logger;
  /** Every skew read, in seconds (API minus local): the gauge. */
  onSkew?: (skewSeconds: number) => void;
}

/** One source's view of the API's clock, fed every response of E6 and E7. */
export class ClockWatch {
  readonly #o: ClockWatchOptions;
  /** The skew last warned about (ms); undefined while within the bound. */
  #warned: number | undefined;
  #latest: ClockSkew | undefined;
  #reads = 0;

  constructor(options: ClockWatchOptions) {
    this.#o = options;
  }

  /** Responses whose `Date` was read so far. */
  get reads(): number {
    return this.#reads;
  }

  /** The last skew read, if any. */
  get latest(): ClockSkew | undefined {
    return this.#latest;
  }

  /** Reads a response's `Date` header; without one nothing changes. */
  observe(endpoint: Endpoint, res: Pick<RawResponse, 'headers' | 'sentAtMs' | 'headersAtMs'>): void {
    const skew = skewOf(res);
    if (skew === undefined) return;
    this.#latest = skew;
    this.#reads++;
    this.#o.onSkew?.(Math.round(skew.skewMs) / 1000);
    this.#judge(endpoint, skew);
  }

  /** Changes state only when the whole interval is past the bound, or within it: the 1 s resolution never flaps. */
  #judge(endpoint: Endpoint, { skewMs, uncertaintyMs }: ClockSkew): void {
    const { boundMs, log } = this.#o;
    const fields = { endpoint, skewSeconds: Math.round(skewMs) / 1000, boundSeconds: boundMs / 1000 };
    if (Math.abs(skewMs) - uncertaintyMs > boundMs) {
      if (this.#warned !== undefined && Math.abs(skewMs - this.#warned) - uncertaintyMs <= boundMs) return;
      this.#warned = skewMs;
      log.warn(
        fields,
        "the API's clock differs from the local clock by more than the bound (half of SYNC_SETTLE): runs use the API's time, the host's clock needs fixing (NTP)",
      );
    } else if (this.#warned !== undefined && Math.abs(skewMs) + uncertaintyMs <= boundMs) {
      this.#warned = undefined;
      log.info(fields, "the API's clock and the local clock agree again within the bound");
    }
  }
}
