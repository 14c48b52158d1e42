/**
 * The set-up of the `sync` command tests (child processes, real PostgreSQL): a pool on the file's
 * database, simulators and children stopped after each test, a fresh schema per test.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { afterAll, afterEach, beforeAll } from 'vitest';
import { createPool, type Pool } from '../../src/db/pool.js';
import { silentLogger } from './silent-logger.js';
import { startSimulator, type Simulator } from '@analytics-exporter/simulator';
import { CLI_PATH } from './cli.js';
import { useTestDatabase } from './db.js';
import { simulatorEnv } from './sync.js';

export const SYNC_START = '2026-10-02T00:00:00Z';
export const SYNC_END = '2026-11-01T00:00:00Z';

export interface SyncChild {
  child: ChildProcess;
  done: Promise<{ code: number | null; signal: NodeJS.Signals | null; stderr: string }>;
}

export interface SyncCliHarness {
  readonly pool: Pool;
  readonly url: string;
  /** A simulator over [SYNC_START, SYNC_END), closed after the test. */
  sim(options: Parameters<typeof startSimulator>[0]): Promise<Simulator>;
  /** A schema name no other test of the file uses. */
  schema(): string;
  /** The environment of a sync against `s` into `schema`. */
  env(s: Simulator, schema: string, extra?: Record<string, string>): Record<string, string>;
  /** Starts `sync` as a child process without waiting for it; killed after the test if still running. */
  spawnSync(args: string[], childEnv: Record<string, string>): SyncChild;
  /** Windows committed in `schema` so far (0 before its tables exist). */
  committedWindows(schema: string): Promise<number>;
  /** Runs `fn` after the test (cleanup). */
  defer(fn: () => Promise<unknown>): void;
}

/** Registers the hooks of a `sync` command test file; call at the top level. */
export function useSyncCli(): SyncCliHarness {
  const db = useTestDatabase();
  let pool: Pool | undefined;
  const closers: (() => Promise<unknown>)[] = [];
  let schemas = 0;
  beforeAll(() => {
    pool = createPool(db.url, silentLogger);
  });
  afterEach(async () => {
    while (closers.length) await closers.pop()!();
  });
  afterAll(async () => {
    await pool?.end();
  });
  const harness: SyncCliHarness = {
    get pool() {
      return pool!;
    },
    get url() {
      return db.url;
    },
    async sim(options) {
      const s = await startSimulator({ port: 0, start: new Date(SYNC_START), end: new Date(SYNC_END), ...options });
      closers.push(() => s.close());
      return s;
    },
    schema: () => `cli_${++schemas}`,
    env: (s, schema, extra = {}) => ({ ...simulatorEnv(s), DATABASE_URL: db.url, DATABASE_SCHEMA: schema, LOG_LEVEL: 'info', ...extra }),
    spawnSync(args, childEnv) {
      const child = spawn(process.execPath, [CLI_PATH, 'sync', ...args], {
        env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...childEnv },
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      let stderr = '';
      child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
      const done = new Promise<{ code: number | null; signal: NodeJS.Signals | null; stderr: string }>((resolve) =>
        child.on('close', (code, signal) => resolve({ code, signal, stderr })),
      );
      closers.push(async () => {
        if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
        await done;
      });
      return { child, done };
    },
    async committedWindows(schema) {
      const { rows } = await pool!.query<{ n: number }>(`select count(*)::int as n from ${schema}.sync_windows`).catch(() => ({ rows: [{ n: 0 }] }));
      return rows[0]!.n;
    },
    defer: (fn) => closers.push(fn),
  };
  return harness;
}
