/**
 * The lifecycle of serve (src/serve/lifecycle.ts) against real PostgreSQL: its states in order,
 * the resources it holds as it goes, and a stop at any moment (while starting, while migrating,
 * after a start that failed) releasing all of them.
 */
import { createServer, type Server } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '../helpers/silent-logger.js';
import { Serve } from '../../src/serve/lifecycle.js';
import { startSimulator, type Simulator } from '@analytics-exporter/simulator';
import { useTestDatabase } from '../helpers/db.js';
import { serveTestConfig } from '../helpers/serve-config.js';
import { until } from '../helpers/wait.js';

const db = useTestDatabase();
let sim: Simulator;
let schemaCounter = 0;

beforeAll(async () => {
  sim = await startSimulator({ port: 0, records: 500, end: new Date(), start: new Date(Date.now() - 86_400_000) });
});
afterAll(async () => {
  await sim.close();
});

function serve(env: Record<string, string> = {}): Serve {
  const config = serveTestConfig(sim, db.url, `lifecycle_${++schemaCounter}`, env);
  return new Serve(config, silentLogger);
}

describe('serve lifecycle', () => {
  it('goes starting, migrating, ready, stopping, stopped, holding its resources in the order acquired', async () => {
    const s = serve();
    expect(s.state).toBe('starting');
    await s.start();
    expect(['migrating', 'ready']).toContain(s.state);
    expect(s.held).toEqual(['upstream clients', 'database', 'database health', 'reloaded upstream clients', 'http server and sync schedules']);
    await until('migrated', async () => (s.state === 'ready' ? true : undefined), 10_000, 20);
    const stopping = s.stop();
    expect(s.state).toBe('stopping');
    expect(await stopping).toEqual({ drained: true });
    expect(s.state).toBe('stopped');
    expect(s.held).toEqual([]);
    // Idempotent.
    expect(await s.stop()).toEqual({ drained: true });
  });

  it('a stop while starting releases what was acquired, and the start ends with an error', async () => {
    const s = serve();
    const starting = s.start();
    const stopped = s.stop();
    await expect(starting).rejects.toThrow('serve was stopped while starting');
    expect(await stopped).toEqual({ drained: true });
    expect(s.state).toBe('stopped');
    expect(s.held).toEqual([]);
    expect(() => s.url).toThrow();
  });

  it('a stop while the database migrates ends stopped, leaving the migration to the next start', async () => {
    const s = serve();
    await s.start();
    expect(await s.stop()).toEqual({ drained: true });
    expect(s.state).toBe('stopped');
    const next = serve({ DATABASE_SCHEMA: `lifecycle_${schemaCounter}` });
    await next.start();
    await until('migrated by the next start', async () => (next.state === 'ready' ? true : undefined), 10_000, 20);
    await next.stop();
  });

  it('a start that cannot bind its port releases everything it had acquired', async () => {
    const taken: Server = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const port = (taken.address() as { port: number }).port;
    try {
      const s = serve({ METRICS_LISTEN: `127.0.0.1:${port}` });
      await expect(s.start()).rejects.toThrow(/EADDRINUSE/);
      expect(s.state).toBe('stopped');
      expect(s.held).toEqual([]);
    } finally {
      await new Promise((resolve) => taken.close(resolve));
    }
  });
});
