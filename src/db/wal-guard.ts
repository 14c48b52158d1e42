/**
 * The embedded database's WAL bound. PGlite runs PostgreSQL as a single-user backend: there is no
 * checkpointer, and the backend requests no checkpoint when max_wal_size is passed (PostgreSQL
 * does that only under a postmaster), so WAL would grow with every write until the database is
 * closed (about 150 MB for the 30-day demo sync, 0.75 kB a record). The guard looks at the size of
 * `pg_wal` once a second and runs a CHECKPOINT when it passes {@link EMBEDDED_WAL_LIMIT_BYTES}; with
 * `wal_recycle=off` (embedded.ts) that checkpoint deletes the segments before it.
 *
 * The CHECKPOINT goes through the socket server like any client's statement, so it waits for a
 * transaction another connection has open instead of running inside it.
 */
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import type { Logger } from '../log.js';

/** WAL kept before the guard checkpoints: the max_wal_size PostgreSQL would apply under a postmaster if it were this. */
export const EMBEDDED_WAL_LIMIT_BYTES = 64 * 1024 * 1024;

/** How often the guard reads the size of `pg_wal`: a readdir and a stat per segment. */
export const EMBEDDED_WAL_CHECK_INTERVAL_MS = 1000;

/** A WAL segment's file name: timeline, log and segment, 8 hex digits each. */
const SEGMENT_NAME = /^[0-9A-F]{24}$/;

/**
 * Bytes of the WAL segments in `dataDir`/pg_wal (their apparent size; PostgreSQL writes the whole
 * segment when it creates one, so that is also what they occupy).
 *
 * @throws the file system's error when `pg_wal` cannot be read.
 */
export function walBytes(dataDir: string): number {
  const wal = join(dataDir, 'pg_wal');
  let bytes = 0;
  for (const name of readdirSync(wal)) if (SEGMENT_NAME.test(name)) bytes += statSync(join(wal, name)).size;
  return bytes;
}

export interface WalGuard {
  /**
   * Checkpoints when `pg_wal` holds more than the limit. Never throws: a failure is logged (warn)
   * and the next check tries again. A check while one is running waits for that one.
   *
   * @returns whether it ran a CHECKPOINT.
   */
  check(): Promise<boolean>;
  /** Stops the timer, waits for a check in flight and closes its connection. Idempotent. */
  stop(): Promise<void>;
}

/**
 * Starts the guard of the embedded database in `dataDir`, served at `url`.
 *
 * @param options.limitBytes WAL before a checkpoint (default {@link EMBEDDED_WAL_LIMIT_BYTES});
 *   `options.intervalMs` between checks (default {@link EMBEDDED_WAL_CHECK_INTERVAL_MS}; 0 for no
 *   timer, only explicit {@link WalGuard.check} calls).
 */
export function startWalGuard(dataDir: string, url: string, log: Logger, options: { limitBytes?: number; intervalMs?: number } = {}): WalGuard {
  const limitBytes = options.limitBytes ?? EMBEDDED_WAL_LIMIT_BYTES;
  const intervalMs = options.intervalMs ?? EMBEDDED_WAL_CHECK_INTERVAL_MS;
  let client: pg.Client | undefined;
  let running: Promise<boolean> | undefined;
  let stopped = false;

  async function checkpoint(): Promise<void> {
    if (client === undefined) {
      const fresh = new pg.Client({ connectionString: url });
      // A connection the socket server drops is replaced at the next check.
      fresh.on('error', () => {
        if (client === fresh) client = undefined;
      });
      client = fresh;
      await fresh.connect();
    }
    await client.query('CHECKPOINT');
  }

  async function once(): Promise<boolean> {
    try {
      const before = walBytes(dataDir);
      if (before <= limitBytes || stopped) return false;
      await checkpoint();
      log.debug({ walBytesBefore: before, walBytesAfter: walBytes(dataDir) }, 'embedded database: checkpoint to bound its WAL');
      return true;
    } catch (err) {
      const failed = client;
      client = undefined;
      await failed?.end().catch(() => undefined);
      log.warn({ err }, 'embedded database: the checkpoint that bounds its WAL failed; trying again at the next check');
      return false;
    }
  }

  const check = (): Promise<boolean> =>
    (running ??= once().finally(() => {
      running = undefined;
    }));
  const timer = intervalMs > 0 ? setInterval(() => void check(), intervalMs) : undefined;
  timer?.unref();

  let ended: Promise<void> | undefined;
  return {
    check,
    stop: () =>
      (ended ??= (async () => {
        stopped = true;
        if (timer !== undefined) clearInterval(timer);
        await running;
        await client?.end().catch(() => undefined);
        client = undefined;
      })()),
  };
}
