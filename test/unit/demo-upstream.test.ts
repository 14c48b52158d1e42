/**
 * Demo mode (STATISTICS_URL unset): the client of the built-in simulator is made from the same
 * request settings as a platform's (UPSTREAM_TIMEOUT, UPSTREAM_MAX_BODY, UPSTREAM_MAX_ATTEMPTS,
 * UPSTREAM_RETRY_MAX_DELAY, UPSTREAM_RATE_LIMIT, UPSTREAM_RATE_BURST), not from their defaults.
 */
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { startDemoUpstream } from '../../src/demo.js';
import { silentLogger } from '../helpers/silent-logger.js';

const SETTINGS = {
  UPSTREAM_TIMEOUT: '7s',
  UPSTREAM_MAX_BODY: '8MiB',
  UPSTREAM_MAX_ATTEMPTS: '2',
  UPSTREAM_RETRY_MAX_DELAY: '3s',
  UPSTREAM_RATE_LIMIT: '0.5',
  UPSTREAM_RATE_BURST: '3',
};

describe('the demo upstream', () => {
  it("takes the environment's request settings", async () => {
    const source = loadConfig(SETTINGS).sources[0]!;
    expect(source.upstream).toBeUndefined();
    const wanted = { timeoutMs: 7000, maxBodyBytes: 8 * 2 ** 20, maxAttempts: 2, retryMaxDelayMs: 3000, rateLimit: { ratePerSecond: 0.5, burst: 3 } };
    expect(source.demo).toEqual(wanted);
    const demo = await startDemoUpstream(silentLogger, source.demo);
    try {
      expect(demo.config).toMatchObject(wanted);
    } finally {
      await demo.close();
    }
  });

  it('keeps the defaults when none is set, and paces nothing', () => {
    const source = loadConfig({}).sources[0]!;
    expect(source.demo).toEqual({ timeoutMs: 30_000, maxBodyBytes: 64 * 2 ** 20, maxAttempts: 5, retryMaxDelayMs: 30_000 });
  });

  it('is absent for a source with a platform', () => {
    const source = loadConfig({ STATISTICS_URL: 'https://statistics.example.com', AUTH_URL: 'https://id.example.com', CLIENT_ID: 'c', CLIENT_SECRET: 's' })
      .sources[0]!;
    expect(source.demo).toBeUndefined();
    expect(source.upstream).toMatchObject({ timeoutMs: 30_000, maxAttempts: 5 });
  });
});
