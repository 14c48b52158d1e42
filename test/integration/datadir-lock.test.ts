/**
 * One process per embedded database: `serve` holds DATA_DIR; a second `sync`,
 * `check` or `serve` on it exits 1 at once naming the holder; after `kill -9` of the holder the
 * lock is gone with it and a new process starts. A DATA_DIR that cannot be opened shows as
 * `database_up 0` with the errno named. Real processes, the demo simulator, the embedded PGlite.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import { afterAll, afterEach, describe, expect, it, onTestFinished } from 'vitest';
import { LOCK_FILE, lockDataDir, readHolder } from '../../src/db/datadir-lock.js';
import { DataDirLockedError, DatabaseOpenError } from '../../src/errors.js';
import { CLI_PATH, runCli, runCliInProcess } from '../helpers/cli.js';
import { initialisedDataDir } from '../helpers/embedded.js';
import { until } from '../helpers/wait.js';

const scratch = mkdtempSync(join(tmpdir(), 'ae-datadir-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));
const children: ChildProcess[] = [];
afterEach(() => {
  for (const child of children.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
});

/** Starts `serve` on nothing but DATA_DIR (the demo simulator, the embedded database) and waits for its URL. */
async function serve(dataDir: string): Promise<{ child: ChildProcess; url: string; exited: Promise<number | null>; stderr: () => string }> {
  const child = spawn(process.execPath, [CLI_PATH, 'serve'], {
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '',
      DATA_DIR: dataDir,
      METRICS_LISTEN: '127.0.0.1:0',
      SYNC_SCHEDULE: 'off',
      LOG_LEVEL: 'info',
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  children.push(child);
  let stderr = '';
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
  const url = await until('serve listening', async () => /serving (http:\/\/127\.0\.0\.1:\d+)\/metrics/.exec(stderr)?.[1], 30_000);
  return { child, url, exited, stderr: () => stderr };
}

async function get(url: string): Promise<{ status: number; body: string }> {
  const res = await request(url, { reset: true });
  return { status: res.statusCode, body: await res.body.text() };
}

describe('DATA_DIR is held by one process', () => {
  it('refuses a second sync, check and serve at once, naming the holder; after kill -9 of the holder a new process starts', async () => {
    const dataDir = await initialisedDataDir('ae-datadir-held-');
    onTestFinished(() => rmSync(dataDir, { recursive: true, force: true }));
    const holder = await serve(dataDir);
    const pid = holder.child.pid!;
    // Ready once the embedded database is open and migrated.
    await until('serve ready', async () => ((await get(`${holder.url}/readyz`)).status === 200 ? true : undefined), 60_000);

    const secondEnv = { DATA_DIR: dataDir, SYNC_SCHEDULE: 'off', METRICS_LISTEN: '127.0.0.1:0' };
    // sync and check are refused in this process (the lock is the other process's either way); serve as a real one.
    const started = performance.now();
    const sync = await runCliInProcess(['sync', '--from', '2026-10-01T00:00:00Z', '--to', '2026-10-02T00:00:00Z'], secondEnv);
    expect(performance.now() - started).toBeLessThan(10_000);
    expect(sync.code).toBe(1);
    const refusal = new RegExp(
      `the embedded database in ${dataDir.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} is in use by process ${pid} \\(analytics-exporter serve\\), since \\d{4}-\\d\\d-\\d\\dT[\\d:.]+Z, .*stop that process, or set DATABASE_URL to a PostgreSQL server`,
    );
    expect(sync.stderr).toMatch(refusal);

    const check = await runCliInProcess(['check'], secondEnv);
    expect(check.code).toBe(1);
    expect(check.stdout).toMatch(/^FAIL {2}database {7}the embedded database in .* is in use by process \d+/m);

    const otherServe = await runCli(['serve'], secondEnv, 30_000);
    expect(otherServe.code).toBe(1);
    expect(otherServe.stderr).toMatch(refusal);
    // The holder is untouched by all that.
    expect((await get(`${holder.url}/readyz`)).status).toBe(200);

    holder.child.kill('SIGKILL');
    await holder.exited;
    const after = await runCli(['sync', '--from', '2026-10-01T00:00:00Z', '--to', '2026-10-01T01:00:00Z'], { DATA_DIR: dataDir }, 60_000);
    expect(after.stderr).toContain('sync run succeeded');
    expect(after.code).toBe(0);
    expect(readHolder(join(dataDir, LOCK_FILE))?.command).toMatch(/^analytics-exporter sync --from/);
  }, 180_000);

  it('serves database_up 0 and names the errno when DATA_DIR cannot be opened', async () => {
    // A file where the folder should be: mkdir fails with ENOTDIR whoever runs the test (root ignores permissions).
    const blocker = join(scratch, 'not-a-folder');
    writeFileSync(blocker, 'x');
    const server = await serve(join(blocker, 'data'));
    await until(
      'database_up 0',
      async () => ((await get(`${server.url}/metrics`)).body.match(/^analytics_exporter_database_up 0$/m) ? true : undefined),
      10_000,
    );
    const ready = await get(`${server.url}/readyz`);
    expect(ready.status).toBe(503);
    expect(ready.body).toMatch(/the database could not be opened: cannot open the embedded database in .*not-a-folder\/data: ENOTDIR/);
    expect(server.stderr()).toContain('ENOTDIR');
    expect(server.stderr()).not.toContain('undefined');
    // The upstream part is served all the same.
    expect((await get(`${server.url}/metrics`)).body).toMatch(/^analytics_exporter_upstream_up\{source="default"\} 1$/m);
    server.child.kill('SIGTERM');
    expect(await server.exited).toBe(0);
  }, 60_000);
});

describe('lockDataDir', () => {
  it('excludes a second holder in the same process too, and lets go on release', () => {
    const dir = join(scratch, 'unit');
    const first = lockDataDir(dir);
    expect(() => lockDataDir(dir)).toThrow(DataDirLockedError);
    try {
      lockDataDir(dir);
    } catch (err) {
      expect(err).toMatchObject({ code: 'ERR_DATA_DIR_LOCKED', holder: { pid: process.pid } });
    }
    first.release();
    first.release(); // idempotent
    const again = lockDataDir(dir);
    again.release();
  });

  it('names the errno of a folder it cannot create', () => {
    const blocker = join(scratch, 'file');
    writeFileSync(blocker, 'x');
    expect(() => lockDataDir(join(blocker, 'data'))).toThrow(DatabaseOpenError);
    expect(() => lockDataDir(join(blocker, 'data'))).toThrow(/ENOTDIR/);
  });
});
