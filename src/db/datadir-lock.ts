/**
 * One process per embedded database: DATA_DIR is held with an OS file lock, which the kernel
 * releases when the process ends in any way (`kill -9` included). The lock file also says who holds
 * it. Two processes on one folder would overwrite each other's pages.
 * Design: docs/design/embedded-database.md.
 */
import { closeSync, ftruncateSync, mkdirSync, openSync, readFileSync, writeSync } from 'node:fs';
import { join, resolve } from 'node:path';
import fsx from 'fs-native-extensions';
import { DataDirLockedError, DatabaseOpenError } from '../errors.js';

export const LOCK_FILE = 'analytics-exporter.lock';

/** Who holds a DATA_DIR, as its lock file says. */
export interface DataDirHolder {
  pid: number;
  /** `analytics-exporter serve …`; the CLI takes no secrets as arguments. */
  command: string;
  /** ISO 8601 UTC. */
  since: string;
}

export interface DataDirLock {
  /** Absolute. */
  readonly dir: string;
  /** Idempotent; the process ending releases it too. */
  release(): void;
}

/**
 * Takes DATA_DIR for this process, creating it; synchronous, so a caller knows first.
 * @throws {DataDirLockedError} naming the holder; {@link DatabaseOpenError} naming the errno code.
 */
export function lockDataDir(dataDir: string): DataDirLock {
  const dir = resolve(dataDir);
  const file = join(dir, LOCK_FILE);
  let fd: number;
  try {
    mkdirSync(dir, { recursive: true });
    fd = openSync(file, 'a+');
  } catch (err) {
    throw new DatabaseOpenError(`cannot open the embedded database in ${dir}: ${errnoText(err)}`, { cause: err });
  }
  let locked: boolean;
  try {
    locked = fsx.tryLock(fd);
  } catch (err) {
    closeSync(fd);
    throw new DatabaseOpenError(`cannot lock the embedded database in ${dir} (${file}): ${errnoText(err)}`, { cause: err });
  }
  if (!locked) {
    closeSync(fd);
    throw new DataDirLockedError(dir, readHolder(file));
  }
  const holder: DataDirHolder = { pid: process.pid, command: commandLine(), since: new Date().toISOString() };
  try {
    ftruncateSync(fd, 0);
    writeSync(fd, `${JSON.stringify(holder)}\n`, 0);
  } catch {
    // Who holds it is information only; the lock is what excludes.
  }
  let released = false;
  return {
    dir,
    release() {
      if (released) return;
      released = true;
      try {
        fsx.unlock(fd);
      } finally {
        closeSync(fd);
      }
    },
  };
}

/** Undefined when the lock file says nothing readable. */
export function readHolder(file: string): DataDirHolder | undefined {
  try {
    const parsed = JSON.parse(readFileSync(file, 'utf8')) as Partial<DataDirHolder>;
    if (typeof parsed.pid === 'number' && typeof parsed.command === 'string' && typeof parsed.since === 'string') {
      return { pid: parsed.pid, command: parsed.command, since: parsed.since };
    }
  } catch {
    // Being written at this very moment, or not ours: the lock still holds.
  }
  return undefined;
}

function commandLine(): string {
  const script = process.argv[1] ?? 'node';
  const name = /(?:^|[\\/])(?:dist[\\/])?cli\.[cm]?js$/.test(script) ? 'analytics-exporter' : script;
  return [name, ...process.argv.slice(2)].join(' ');
}

/** `EROFS: read-only file system`: an fs or PGlite error's code and message, whatever its shape. */
export function errnoText(err: unknown): string {
  const e = err as { code?: unknown; message?: unknown };
  const code = typeof e?.code === 'string' ? e.code : undefined;
  const message = typeof e?.message === 'string' && e.message !== '' ? e.message : undefined;
  if (message === undefined) return code ?? String(err);
  if (code === undefined) return message;
  return message.startsWith(code) ? message : `${code}: ${message}`;
}
