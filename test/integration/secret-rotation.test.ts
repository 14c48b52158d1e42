import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServe, type RunningServer } from '../../src/serve/lifecycle.js';
import { loadConfig } from '../../src/config.js';
import { AnalyticsClient } from '../../src/upstream/analytics.js';
import { silentLogger } from '../helpers/silent-logger.js';
import { startSimulator, type Simulator } from '@analytics-exporter/simulator';
import type { SyncResult } from '../../src/sync/run/run.js';
import { useTestDatabase } from '../helpers/db.js';
import { until } from '../helpers/wait.js';

const db = useTestDatabase();
let sim: Simulator;
let dir: string;
let serve: RunningServer | undefined;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'ae-secret-rotation-'));
  sim = await startSimulator({ port: 0, records: 300, start: new Date(Date.now() - 3 * 3_600_000), end: new Date(), clientSecret: 'first-secret' });
});
afterAll(async () => {
  await serve?.stop();
  await sim?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** Replaces the file in one rename, as the kubelet swaps a Secret volume's contents. */
function writeSecret(file: string, secret: string): void {
  writeFileSync(`${file}.new`, `${secret}\n`);
  renameSync(`${file}.new`, file);
}

const failed = (result: SyncResult | undefined) => (result?.status === 'failed' ? result.error : undefined);

describe('CLIENT_SECRET_FILE rotated under a running serve', () => {
  it('fails the sync while the file holds the old secret, and recovers at the next token request once it holds the new one', async () => {
    const file = join(dir, 'client_secret');
    writeSecret(file, 'first-secret');
    const config = loadConfig({
      STATISTICS_URL: sim.url,
      AUTH_URL: sim.url,
      CLIENT_ID: 'demo-client',
      CLIENT_SECRET_FILE: file,
      DATABASE_URL: db.url,
      DATABASE_SCHEMA: 'rotation',
      METRICS_LISTEN: '127.0.0.1:0',
      SYNC_SCHEDULE: 'off',
      SYNC_START_DATE: '3h',
      SYNC_SETTLE: '0s',
      UPSTREAM_MAX_ATTEMPTS: '1',
    });
    serve = await startServe(config, silentLogger);
    expect((await serve.scheduler.trigger('test'))?.status).toBe('succeeded');

    // The identity host takes the new secret and drops the tokens it issued; the file is not updated yet.
    sim.setClientSecret('second-secret');
    sim.revokeAllTokens();
    const error = failed(await serve.scheduler.trigger('test'));
    expect(error?.message).toMatch(/HTTP 401.*invalid_client/);
    expect(error?.message).not.toContain('first-secret');

    const tokenRequests = sim.stats.tokenRequests;
    writeSecret(file, 'second-secret');
    // Within a second of a failed token request its failure is handed out again without a request.
    const recovered = await until(
      'a sync that succeeds with the rotated secret',
      async () => {
        const result = await serve!.scheduler.trigger('test');
        return result?.status === 'succeeded' ? result : undefined;
      },
      30_000,
      250,
    );
    expect(recovered.status).toBe('succeeded');
    expect(sim.stats.tokenRequests).toBe(tokenRequests + 1);
    const own = await serve.metrics.registry.getSingleMetricAsString('analytics_exporter_token_requests_total');
    expect(own).toMatch(/outcome="failure"} [1-9]/);
  });
});

describe('client_secret_file of a CONFIG_FILE source', () => {
  it('is read again at every token request, as CLIENT_SECRET_FILE is', async () => {
    const secretFile = join(dir, 'production.secret');
    writeSecret(secretFile, 'file-source-first');
    sim.setClientSecret('file-source-first');
    const sources = join(dir, 'sources.yaml');
    // A relative path: read against the file's folder.
    writeFileSync(
      sources,
      `sources:\n  - name: production\n    statistics_url: ${sim.url}\n    auth_url: ${sim.url}\n    client_id: demo-client\n    client_secret_file: production.secret\n`,
    );
    const client = AnalyticsClient.fromConfig(loadConfig({ CONFIG_FILE: sources }).sources[0]!.upstream!, { log: silentLogger });
    try {
      const first = await client.tokens.getToken();
      sim.setClientSecret('file-source-second');
      writeSecret(secretFile, 'file-source-second');
      client.tokens.invalidate(first);
      const requests = sim.stats.tokenRequests;
      await expect(client.tokens.getToken()).resolves.not.toBe(first);
      expect(sim.stats.tokenRequests).toBe(requests + 1);
    } finally {
      await client.close();
    }
  });
});
