/**
 * A bandwidth-limited link (`--bandwidth`): the simulator paces the bodies of its E6 and E7
 * answers so that all connections together never send faster than one shared link would. Bodies
 * are compressed (`--gzip`) before they are paced, so compression saves link time as it does on a
 * real network. Not part of the reference: a test and benchmark device.
 */
import type http from 'node:http';
import { setTimeout as sleepMs } from 'node:timers/promises';
import { z } from 'zod';

/** Largest slice of a body written at once; each slice waits for its bytes of the link. */
export const LINK_CHUNK_BYTES = 16 * 1024;
/** The least a link may carry, bytes per second (8 kbit/s): below it one chunk takes seconds. */
export const MIN_BANDWIDTH_BYTES_PER_SECOND = 1000;
/** The most a link may carry, bytes per second (100 Gbit/s). */
export const MAX_BANDWIDTH_BYTES_PER_SECOND = 12.5e9;
/** Burst after an idle spell: the larger of this and {@link LINK_BURST_MS} at the rate. */
const LINK_BURST_MIN_BYTES = 64 * 1024;
/** Late timers would waste the link's time without a little burst; 10 ms of it keeps it busy. */
const LINK_BURST_MS = 10;

/** Bytes per second of each unit: bit units (decimal, ÷ 8) and byte units (decimal and binary). */
const BIT_UNITS: Record<string, number> = { bit: 1 / 8, kbit: 1e3 / 8, mbit: 1e6 / 8, gbit: 1e9 / 8 };
const BYTE_UNITS: Record<string, number> = { B: 1, kB: 1e3, KB: 1e3, MB: 1e6, GB: 1e9, KiB: 1024, MiB: 1024 ** 2, GiB: 1024 ** 3 };

/**
 * Parses a link rate: a number and a unit, optionally followed by `/s`. Bit units are decimal and
 * case-insensitive (`100mbit`, `10Mbit`, `1gbit`, `512kbit`, `bit`); byte units are case-sensitive
 * so that `B` (bytes) and `b` (bits) are never confused (`12.5MB`, `500kB`, `1MiB`, `B`).
 * Ambiguous spellings (`mbps`, `mb`) are refused.
 *
 * @returns bytes per second, or undefined when the text is no rate or the rate lies outside
 *   [{@link MIN_BANDWIDTH_BYTES_PER_SECOND}, {@link MAX_BANDWIDTH_BYTES_PER_SECOND}].
 */
export function parseBandwidth(text: string): number | undefined {
  const m = /^(\d+(?:\.\d+)?|\.\d+)\s*([A-Za-z]+)(?:\/s)?$/.exec(text.trim());
  if (m === null) return undefined;
  const unit = m[2]!;
  const scale = BYTE_UNITS[unit] ?? BIT_UNITS[unit.toLowerCase()];
  if (scale === undefined) return undefined;
  const bytesPerSecond = Number(m[1]) * scale;
  return bytesPerSecond >= MIN_BANDWIDTH_BYTES_PER_SECOND && bytesPerSecond <= MAX_BANDWIDTH_BYTES_PER_SECOND ? bytesPerSecond : undefined;
}

/** The rule a bandwidth must follow, for error messages. */
export const BANDWIDTH_RULE = 'must be a rate such as 100mbit, 1gbit, 512kbit or 12.5MB (per second; bit or byte units), from 8kbit to 100gbit';

/** A bandwidth as text (`100mbit`) or a number of bytes per second, checked: bytes per second. */
export const bandwidthSchema = z.union([z.string(), z.number()]).transform((value, ctx) => {
  const bytesPerSecond =
    typeof value === 'number'
      ? Number.isFinite(value) && value >= MIN_BANDWIDTH_BYTES_PER_SECOND && value <= MAX_BANDWIDTH_BYTES_PER_SECOND
        ? value
        : undefined
      : parseBandwidth(value);
  if (bytesPerSecond === undefined) {
    ctx.addIssue({ code: 'custom', message: BANDWIDTH_RULE });
    return z.NEVER;
  }
  return bytesPerSecond;
});

/** The clock a link waits on: real time by default, a fake one in tests. */
export interface LinkClock {
  /** Milliseconds from any fixed origin. */
  now: () => number;
  /** Resolves after `ms` milliseconds. */
  sleep: (ms: number) => Promise<unknown>;
}

// Unref'd: a body still waiting for the link when the simulator closes must not hold the process.
const REAL_CLOCK: LinkClock = { now: () => performance.now(), sleep: (ms) => sleepMs(ms, undefined, { ref: false }) };

/**
 * One link shared by every response: a token bucket in bytes that fills at the link's rate up to
 * a small burst. A sender reserves its bytes and waits until the bucket has paid for them; the
 * bucket goes into debt for reservations it cannot pay yet, so senders are served in the order
 * they asked and, over any interval T, at most burst + rate × T bytes are let through.
 */
export class Link {
  readonly bytesPerSecond: number;
  readonly burstBytes: number;
  readonly #clock: LinkClock;
  #tokens: number;
  #atMs: number;

  constructor(bytesPerSecond: number, clock: LinkClock = REAL_CLOCK) {
    this.bytesPerSecond = bytesPerSecond;
    this.burstBytes = Math.max(LINK_BURST_MIN_BYTES, (bytesPerSecond * LINK_BURST_MS) / 1000);
    this.#clock = clock;
    this.#tokens = this.burstBytes;
    this.#atMs = clock.now();
  }

  /** Reserves `bytes` of the link and resolves once they may be sent. */
  async take(bytes: number): Promise<void> {
    const t = this.#clock.now();
    this.#tokens = Math.min(this.burstBytes, this.#tokens + ((t - this.#atMs) / 1000) * this.bytesPerSecond);
    this.#atMs = t;
    this.#tokens -= bytes;
    if (this.#tokens < 0) await this.#clock.sleep((-this.#tokens / this.bytesPerSecond) * 1000);
  }
}

/** Where a paced body is written: an `http.ServerResponse`, or a stand-in in tests. */
export type PacedSink = Pick<http.ServerResponse, 'write' | 'end' | 'once' | 'off' | 'destroyed'>;

/**
 * Writes `bytes` to `sink` in slices of at most {@link LINK_CHUNK_BYTES}, each after `link` has
 * let its bytes through, waiting for `drain` when the socket's buffer is full, then ends it.
 * Stops early, without ending, once the sink is destroyed (the client went away).
 *
 * @param sent called with the size of each slice written.
 * @returns whether the whole body was written.
 */
export async function writePaced(sink: PacedSink, bytes: Uint8Array, link: Link, sent: (n: number) => void = () => undefined): Promise<boolean> {
  for (let offset = 0; offset < bytes.length; offset += LINK_CHUNK_BYTES) {
    const slice = bytes.subarray(offset, Math.min(bytes.length, offset + LINK_CHUNK_BYTES));
    await link.take(slice.length);
    if (sink.destroyed) return false;
    const flushed = sink.write(slice);
    sent(slice.length);
    if (!flushed && !(await drained(sink))) return false;
  }
  if (sink.destroyed) return false;
  sink.end();
  return true;
}

/** Resolves true on `drain`, false on `close` (whichever comes first). */
function drained(sink: PacedSink): Promise<boolean> {
  return new Promise((resolve) => {
    const onDrain = (): void => {
      sink.off('close', onClose);
      resolve(true);
    };
    const onClose = (): void => {
      sink.off('drain', onDrain);
      resolve(false);
    };
    sink.once('drain', onDrain);
    sink.once('close', onClose);
  });
}
