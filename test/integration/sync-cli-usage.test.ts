/** `sync` as a user meets it when things are wrong or unset: usage errors, an upstream failure, no DATABASE_URL. */
import { rmSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { startEmbeddedDatabase } from '../../src/db/embedded.js';
import { createPool } from '../../src/db/pool.js';
import { silentLogger } from '../helpers/silent-logger.js';
import { runCli, runCliInProcess } from '../helpers/cli.js';
import { scratchDir } from '../helpers/scratch.js';
import { initialisedDataDir } from '../helpers/embedded.js';
import { expectExactDataset, watermarkOf } from '../helpers/sync.js';
import { SYNC_END, SYNC_START, useSyncCli } from '../helpers/sync-cli.js';

const h = useSyncCli();

describe('analytics-exporter sync: usage, failures, the embedded database', () => {
  // A child process: exit status 1 of a real process.
  it('exits 1 when the upstream fails, with the watermark unchanged for the failed window', async () => {
    const s = await h.sim({ records: 5000 });
    const schema = h.schema();
    const r = await runCli(['sync', '--from', SYNC_START, '--to', SYNC_END], h.env(s, schema, { CLIENT_SECRET: 'wrong-secret-value' }));
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('sync run failed');
    expect(r.stderr).toMatch(/HTTP 401: invalid_client/);
    expect(r.stderr).not.toMatch(/"level":"error".*Can't determine timestamp/);
    expect(r.stderr).not.toContain('wrong-secret-value');
    expect(await watermarkOf(h.pool, schema)).toBeNull();
  });

  it('exits 2 on bad usage, naming what was wrong', async () => {
    const bad = await runCliInProcess(['sync', '--from', 'yesterday']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("option '--from <iso>' argument 'yesterday' is invalid");
    // An impossible date is refused, not rolled over to March 2.
    const impossible = await runCliInProcess(['sync', '--from', '2026-02-30T00:00:00Z']);
    expect(impossible.code).toBe(2);
    expect(impossible.stderr).toContain("option '--from <iso>' argument '2026-02-30T00:00:00Z' is invalid");
    const impossibleEnv = await runCliInProcess(['sync'], { SYNC_START_DATE: '2026-02-30T00:00:00Z' });
    expect(impossibleEnv.code).toBe(2);
    expect(impossibleEnv.stderr).toContain('SYNC_START_DATE must be an ISO 8601 date-time with a zone');
    const reversed = await runCliInProcess(['sync', '--from', '2026-10-05T00:00:00Z', '--to', '2026-10-02T00:00:00Z'], {
      DATA_DIR: scratchDir('ae-usage-'),
    });
    expect(reversed.code).toBe(2);
    expect(reversed.stderr).toContain('--from 2026-10-05T00:00:00.000Z must be before the end of the range 2026-10-02T00:00:00.000Z');
    const future = await runCliInProcess(['sync', '--to', new Date(Date.now() + 3_600_000).toISOString()], { DATA_DIR: scratchDir('ae-usage-') });
    expect(future.code).toBe(2);
    expect(future.stderr).toContain('is later than now minus SYNC_SETTLE');
    const unknownSource = await runCliInProcess(['sync', '--source', 'default', '--source', 'staging']);
    expect(unknownSource.code).toBe(2);
    expect(unknownSource.stderr).toBe('analytics-exporter sync: --source staging is not a configured source; configured: default\n');
    const badEnv = await runCliInProcess(['sync'], { SYNC_PAGE_SIZE: '5000' });
    expect(badEnv.code).toBe(2);
    expect(badEnv.stderr).toContain('SYNC_PAGE_SIZE must be a whole number from 1 to 1000; got "5000"');
  });

  it('uses the embedded PGlite database when DATABASE_URL is unset', async () => {
    const s = await h.sim({ records: 3000 });
    const dataDir = await initialisedDataDir('ae-sync-pglite-');
    h.defer(async () => rmSync(dataDir, { recursive: true, force: true }));
    const { DATABASE_URL: _unset, ...rest } = h.env(s, 'analytics', { DATA_DIR: dataDir, SYNC_WINDOW: '1d' });
    const r = await runCliInProcess(['sync', '--from', SYNC_START, '--to', SYNC_END], rest);
    expect(r.stderr).toContain('using the embedded PGlite database');
    expect(r.code).toBe(0);

    const embedded = await startEmbeddedDatabase(dataDir, silentLogger);
    const epool = createPool(embedded.url, silentLogger, { max: 1 });
    try {
      await expectExactDataset(epool, 'analytics', s, new Date(SYNC_START), new Date(SYNC_END));
    } finally {
      await epool.end();
      await embedded.close();
    }
  }, 120_000);
});
