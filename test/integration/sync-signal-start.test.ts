/**
 * `sync` stopped by a signal before its run started (the embedded database still opening): it
 * exits 0 having loaded nothing, and says so without blaming another sync's lock, which a user
 * pressing Ctrl-C right after the start read as a second process on the database (new-user trial
 * of issue 28).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CLI_PATH } from '../helpers/cli.js';
import { until } from '../helpers/wait.js';

describe('sync stopped while it starts', () => {
  it('exits 0, loads nothing and says it was stopped before the run started', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'ae-sync-start-'));
    const child = spawn(process.execPath, [CLI_PATH, 'sync'], {
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', DATA_DIR: dataDir, LOG_FORMAT: 'json' },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
    try {
      // Logged as the embedded database opens, after the signal handlers are in place and well
      // before migrations and the run.
      await until('the embedded database opening', () => (stderr.includes('embedded PGlite database') ? true : undefined), 30_000, 10);
      child.kill('SIGINT');
      expect(await exited).toBe(0);
    } finally {
      child.kill('SIGKILL');
      rmSync(dataDir, { recursive: true, force: true });
    }
    expect(stderr).toContain('"msg":"stopped by a signal before the run started; nothing was loaded"');
    expect(stderr).not.toContain('another sync');
    expect(stderr).not.toContain('"msg":"sync run started"');
  }, 60_000);
});
