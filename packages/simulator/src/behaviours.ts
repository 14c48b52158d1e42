/**
 * The upstream behaviours a simulator can be started with, beyond what the reference describes
 * and each off by default: a page size cap (honest or lying), a hidden filter time, admin
 * requests, gzip, out-of-range numbers. Checked once at start.
 */
import { BANDWIDTH_RULE, bandwidthSchema } from './bandwidth.js';
import { InvalidArgumentError } from './errors.js';
import { GZIP_MODES, type GzipMode } from './gzip.js';
import { DEFAULT_OUT_OF_RANGE_VALUES } from './out-of-range.js';

/** What E6's `pageSize` says under a page size cap: the size served (honest) or the size asked for (a lying envelope). */
export const PAGE_SIZE_ECHOES = ['served', 'asked'] as const;
export type PageSizeEcho = (typeof PAGE_SIZE_ECHOES)[number];

/** Largest `filterTimeLagMs`: a week, far beyond any ingestion delay worth testing. */
export const MAX_FILTER_TIME_LAG_MS = 7 * 86_400_000;

/** The behaviour options of `SimulatorOptions`, each off by default. */
export interface BehaviourOptions {
  /**
   * E6 serves at most this many records a page, whatever `pageSize` asks, and cuts pages at
   * multiples of it (page n holds records [(n-1) × served, n × served)). 0 (default) = no cap.
   */
  pageSizeCap?: number;
  /**
   * What the envelope's `pageSize` says under a cap: `served` (default, an honest clamp) or `asked`
   * (the size asked for: the envelope lies). `totalPages` follows the size said; `totalRecords` is true.
   */
  pageSizeCapEcho?: PageSizeEcho;
  /**
   * E6 filters `startDate`/`toDate` on a hidden time that differs from each record's `timestamp`
   * by a fixed per-record offset in [-lag, +lag] ms, either sign (from the seed). The record's
   * `timestamp` is unchanged; E7 still filters on it. 0 (default) = E6 filters on the timestamp.
   */
  filterTimeLagMs?: number;
  /** Serve `POST /admin/records` and `POST /admin/delete` (see admin.ts); default false: 404. */
  admin?: boolean;
  /** gzip of E6 and E7 bodies: `off` (default), `on` (always, asked or not), `auto` (when `Accept-Encoding` allows gzip). */
  gzip?: GzipMode;
  /**
   * The bodies of E6 and E7 answers share one link of this rate (see bandwidth.ts): text as the
   * flag takes it (`100mbit`, `12.5MB`) or a number of bytes per second. Bodies are compressed
   * first. Undefined (default) = as fast as the connection goes.
   */
  bandwidth?: string | number;
  /** Every Nth base record (1-based) carries `"amount": <number numeric cannot hold>` in E6. 0 (default) = none. */
  outOfRangeEvery?: number;
  /** The numbers used in turn, as JSON texts. Default `1e200000`, `-1e200000`, `1e-20000`. */
  outOfRangeValues?: readonly string[];
}

/** The behaviours, defaults filled in: 0, `served`, false and `off` are "as the reference describes". */
export interface Behaviours {
  /** 0 = no cap. */
  pageSizeCap: number;
  pageSizeCapEcho: PageSizeEcho;
  filterTimeLagMs: number;
  admin: boolean;
  gzip: GzipMode;
  /** Bytes per second of the shared link; 0 = unlimited. */
  bandwidthBytesPerSecond: number;
  /** 0 = none. */
  outOfRangeEvery: number;
  outOfRangeValues: readonly string[];
}

/**
 * Fills in and checks the behaviour options.
 *
 * @throws {InvalidArgumentError} naming the first option out of range.
 */
export function resolveBehaviours(options: BehaviourOptions): Behaviours {
  const b: Behaviours = {
    pageSizeCap: options.pageSizeCap ?? 0,
    pageSizeCapEcho: options.pageSizeCapEcho ?? 'served',
    filterTimeLagMs: options.filterTimeLagMs ?? 0,
    admin: options.admin === true,
    gzip: options.gzip ?? 'off',
    bandwidthBytesPerSecond: 0,
    outOfRangeEvery: options.outOfRangeEvery ?? 0,
    outOfRangeValues: options.outOfRangeValues ?? DEFAULT_OUT_OF_RANGE_VALUES,
  };
  const whole = (v: number, max: number) => Number.isSafeInteger(v) && v >= 0 && v <= max;
  const problem =
    (!whole(b.pageSizeCap, Number.MAX_SAFE_INTEGER) && `pageSizeCap must be a whole number ≥ 0 (0 = none); got ${b.pageSizeCap}`) ||
    (!(PAGE_SIZE_ECHOES as readonly unknown[]).includes(b.pageSizeCapEcho) && `pageSizeCapEcho must be served or asked; got ${String(b.pageSizeCapEcho)}`) ||
    (!whole(b.filterTimeLagMs, MAX_FILTER_TIME_LAG_MS) &&
      `filterTimeLagMs must be a whole number of milliseconds from 0 to ${MAX_FILTER_TIME_LAG_MS}; got ${b.filterTimeLagMs}`) ||
    (!(GZIP_MODES as readonly unknown[]).includes(b.gzip) && `gzip must be off, on or auto; got ${String(b.gzip)}`) ||
    (!whole(b.outOfRangeEvery, Number.MAX_SAFE_INTEGER) && `outOfRangeEvery must be a whole number ≥ 0; got ${b.outOfRangeEvery}`);
  if (problem) throw new InvalidArgumentError(problem);
  if (options.bandwidth !== undefined) {
    const parsed = bandwidthSchema.safeParse(options.bandwidth);
    if (!parsed.success) throw new InvalidArgumentError(`bandwidth ${BANDWIDTH_RULE}; got ${JSON.stringify(options.bandwidth)}`);
    b.bandwidthBytesPerSecond = parsed.data;
  }
  return b;
}
