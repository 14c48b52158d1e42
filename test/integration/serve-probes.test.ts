/**
 * Issue 38, probes behind auth: with WEB_CONFIG_FILE turning basic auth on, over plain HTTP and
 * over TLS, `/healthz` and `/readyz` answer 200 without credentials while `/metrics`, `/probe`, `/`
 * and `POST /-/reload` answer 401; a probe with wrong credentials is answered too and spends
 * nothing of AUTH_FAILURE_BUDGET; WEB_HEALTH_WITHOUT_AUTH=off puts the probes behind auth again;
 * the image's HEALTHCHECK (its script, taken from the Dockerfile) passes against such a server at
 * METRICS_LISTEN's port, over TLS too. A real serve on the test database and the simulator.
 */
import { execFile } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import bcrypt from 'bcryptjs';
import { Agent, request } from 'undici';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator, type Simulator } from '@analytics-exporter/simulator';
import { startServe, type RunningServer } from '../../src/serve/lifecycle.js';
import { silentLogger } from '../helpers/silent-logger.js';
import { createTestPki, type TestPki } from '../helpers/certs.js';
import { runCliInProcess } from '../helpers/cli.js';
import { useTestDatabase } from '../helpers/db.js';
import { serveTestConfig } from '../helpers/serve-config.js';
import { simulatorEnv } from '../helpers/sync.js';
import { until } from '../helpers/wait.js';

const db = useTestDatabase();
let pki: TestPki;
let sim: Simulator;
let agent: Agent;
const running: RunningServer[] = [];
const PASSWORD = 'probe-pass-3';
const HASH = bcrypt.hashSync(PASSWORD, 4);

beforeAll(async () => {
  pki = createTestPki();
  agent = new Agent({ connect: { ca: pki.ca } });
  sim = await startSimulator({ port: 0, records: 200, end: new Date(), start: new Date(Date.now() - 3_600_000) });
});
afterEach(async () => {
  while (running.length) await running.pop()!.stop();
});
afterAll(async () => {
  await agent?.close();
  await sim?.close();
  pki?.cleanup();
});

const basic = (user: string, password: string) => `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;
const RIGHT = basic('prometheus', PASSWORD);

type Transport = 'plain HTTP' | 'TLS';

/** A web configuration with basic auth, and TLS for `transport`. */
function webConfig(transport: Transport): string {
  const tls = transport === 'TLS' ? `tls_server_config:\n  cert_file: ${pki.serverCertFile}\n  key_file: ${pki.serverKeyFile}\n` : '';
  const file = join(pki.dir, `web-${transport === 'TLS' ? 'tls' : 'plain'}.yml`);
  writeFileSync(file, `${tls}basic_auth_users:\n  prometheus: '${HASH}'\n`);
  return file;
}

/** serve with `file` as WEB_CONFIG_FILE, once `/readyz` answers 200 to the right credentials. */
async function serve(schema: string, file: string, env: Record<string, string> = {}): Promise<RunningServer> {
  const s = await startServe(serveTestConfig(sim, db.url, schema, { WEB_CONFIG_FILE: file, ...env }), silentLogger);
  running.push(s);
  await until('/readyz 200', async () => ((await get(s, '/readyz', RIGHT)).status === 200 ? true : undefined));
  return s;
}

async function get(s: RunningServer, path: string, authorization?: string, method = 'GET'): Promise<{ status: number; body: string }> {
  const res = await request(`${s.url}${path}`, { method, dispatcher: agent, ...(authorization ? { headers: { authorization } } : {}) });
  return { status: res.statusCode, body: await res.body.text() };
}

/** The status of each request, as `METHOD path status`. */
async function statuses(s: RunningServer, requests: string[], authorization?: string): Promise<string[]> {
  const out: string[] = [];
  for (const line of requests) {
    const [method, path] = line.split(' ') as [string, string];
    out.push(`${line} ${(await get(s, path, authorization, method)).status}`);
  }
  return out;
}

const PROBES = ['GET /healthz', 'HEAD /healthz', 'GET /readyz', 'HEAD /readyz'];
const GUARDED = ['GET /metrics', 'GET /probe?source=default', 'GET /', 'POST /-/reload', 'GET /nope'];

/** The image's HEALTHCHECK script, run as Docker would with `env`: its exit status. */
function healthcheck(env: Record<string, string>): Promise<number> {
  const dockerfile = readFileSync(new URL('../../Dockerfile', import.meta.url), 'utf8');
  const argv = JSON.parse(/^HEALTHCHECK .*\\\n\s*CMD (\[.*\])$/m.exec(dockerfile)![1]!) as string[];
  expect(argv.slice(0, 2)).toEqual(['node', '-e']);
  return new Promise((resolve) => {
    const child = execFile(process.execPath, ['-e', argv[2]!], { env: { PATH: process.env.PATH ?? '', ...env }, timeout: 10_000 });
    child.on('exit', (code) => resolve(code ?? -1));
  });
}

describe('health probes behind basic auth (WEB_CONFIG_FILE)', () => {
  it.each<Transport>(['plain HTTP', 'TLS'])(
    'over %s, /healthz and /readyz answer 200 without credentials and with wrong ones; the other paths 401',
    async (transport) => {
      const s = await serve(transport === 'TLS' ? 'probes_tls' : 'probes_plain', webConfig(transport));
      expect(s.url.startsWith(transport === 'TLS' ? 'https:' : 'http:')).toBe(true);
      const ok = (lines: string[], status: number) => lines.map((line) => `${line} ${status}`);
      expect(await statuses(s, [...PROBES, ...GUARDED])).toEqual([...ok(PROBES, 200), ...ok(GUARDED, 401)]);
      expect(await statuses(s, [...PROBES, ...GUARDED], basic('prometheus', 'wrong'))).toEqual([...ok(PROBES, 200), ...ok(GUARDED, 401)]);
      expect(await get(s, '/healthz')).toEqual({ status: 200, body: 'ok\n' });
      // Without checking credentials, /readyz does not tell the database's address or error.
      expect(await get(s, '/readyz')).toEqual({ status: 200, body: 'ready\n' });
      expect(await statuses(s, ['GET /metrics', 'GET /probe?source=default', 'GET /'], RIGHT)).toEqual(
        ok(['GET /metrics', 'GET /probe?source=default', 'GET /'], 200),
      );
    },
  );

  it('probes with wrong passwords spend nothing of AUTH_FAILURE_BUDGET', async () => {
    const s = await serve('probes_budget', webConfig('plain HTTP'), { AUTH_FAILURE_BUDGET: '2' });
    // Each password new, so that none is answered from the cache of failures.
    const probes = [];
    for (let i = 0; i < 6; i++) probes.push((await get(s, i % 2 ? '/readyz' : '/healthz', basic('prometheus', `wrong-probe-${i}`))).status);
    expect(probes).toEqual(Array<number>(6).fill(200));
    // The budget is whole: two failed logins, then 429.
    const guarded = [];
    for (let i = 0; i < 3; i++) guarded.push((await get(s, '/metrics', basic('prometheus', `wrong-scrape-${i}`))).status);
    expect(guarded).toEqual([401, 401, 429]);
  });

  it.each<Transport>(['plain HTTP', 'TLS'])(
    'over %s, WEB_HEALTH_WITHOUT_AUTH decides: on, the probes answer anyone; off, only the right credentials',
    async (transport) => {
      const schema = transport === 'TLS' ? 'probes_switch_tls' : 'probes_switch_plain';
      const wanted = (status: number) => PROBES.map((line) => `${line} ${status}`);
      const on = await serve(schema, webConfig(transport), { WEB_HEALTH_WITHOUT_AUTH: 'on' });
      expect(await statuses(on, PROBES)).toEqual(wanted(200));
      await on.stop();
      const off = await serve(schema, webConfig(transport), { WEB_HEALTH_WITHOUT_AUTH: 'off' });
      expect(await statuses(off, PROBES)).toEqual(wanted(401));
      expect(await statuses(off, PROBES, basic('prometheus', 'wrong'))).toEqual(wanted(401));
      expect(await statuses(off, PROBES, RIGHT)).toEqual(wanted(200));
      // To a client with the right credentials, /readyz says why.
      expect(await get(off, '/readyz', RIGHT)).toEqual({ status: 200, body: `ready: database reachable, schema ${schema} migrated\n` });
    },
  );

  it('a WEB_HEALTH_WITHOUT_AUTH other than on or off is a configuration error: exit 2 naming it', async () => {
    const checked = await runCliInProcess(['check'], { ...simulatorEnv(sim), DATABASE_URL: db.url, WEB_HEALTH_WITHOUT_AUTH: 'yes' });
    expect(checked.code).toBe(2);
    expect(checked.stdout + checked.stderr).toMatch(/WEB_HEALTH_WITHOUT_AUTH.*must be 'on' or 'off'/);
  });
});

describe("the image's HEALTHCHECK", () => {
  it.each<Transport>(['plain HTTP', 'TLS'])(
    'passes against serve with basic auth over %s at the METRICS_LISTEN port, and fails where nothing answers',
    async (transport) => {
      const file = webConfig(transport);
      const s = await serve(transport === 'TLS' ? 'healthcheck_tls' : 'healthcheck_plain', file);
      const port = new URL(s.url).port;
      expect(await healthcheck({ METRICS_LISTEN: `127.0.0.1:${port}`, WEB_CONFIG_FILE: file })).toBe(0);
      // A wildcard host is checked on loopback.
      expect(await healthcheck({ METRICS_LISTEN: `0.0.0.0:${port}`, WEB_CONFIG_FILE: file })).toBe(0);
      // The other scheme, or another port, fails.
      const other = webConfig(transport === 'TLS' ? 'plain HTTP' : 'TLS');
      expect(await healthcheck({ METRICS_LISTEN: `127.0.0.1:${port}`, WEB_CONFIG_FILE: other })).toBe(1);
      await s.stop();
      expect(await healthcheck({ METRICS_LISTEN: `127.0.0.1:${port}`, WEB_CONFIG_FILE: file })).toBe(1);
    },
  );
});
