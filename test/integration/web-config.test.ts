import { copyFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import bcrypt from 'bcryptjs';
import { Agent, request } from 'undici';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startServe, type RunningServer } from '../../src/app/serve.js';
import { loadConfig } from '../../src/config.js';
import { ConfigError } from '../../src/errors.js';
import { silentLogger } from '../../src/log.js';
import { startSimulator, type Simulator } from '../../src/simulator/index.js';
import { createTestPki, type TestPki } from '../helpers/certs.js';
import { useTestDatabase } from '../helpers/db.js';
import { startPrometheus } from '../helpers/prometheus.js';
import { simulatorEnv } from '../helpers/sync.js';

const db = useTestDatabase();
let pki: TestPki;
let sim: Simulator;
const running: RunningServer[] = [];
const agents: Agent[] = [];
const PASSWORD = 'scrape-pass-7';

beforeAll(async () => {
  pki = createTestPki();
  // The web config refers to its files by paths relative to itself, as exporter-toolkit allows.
  copyFileSync(pki.serverCertFile, join(pki.dir, 'web.crt'));
  copyFileSync(pki.serverKeyFile, join(pki.dir, 'web.key'));
  sim = await startSimulator({ port: 0, records: 2000, end: new Date(), start: new Date(Date.now() - 86_400_000) });
});
afterEach(async () => {
  while (running.length) await running.pop()!.stop();
  while (agents.length) await agents.pop()!.close();
});
afterAll(async () => {
  await sim?.close();
  pki?.cleanup();
});

function webConfig(name: string, yaml: string): string {
  const file = join(pki.dir, name);
  writeFileSync(file, yaml);
  return file;
}

async function serve(webConfigFile: string): Promise<RunningServer> {
  const config = loadConfig({
    ...simulatorEnv(sim),
    DATABASE_URL: db.url,
    METRICS_LISTEN: '127.0.0.1:0',
    SYNC_SCHEDULE: 'off',
    WEB_CONFIG_FILE: webConfigFile,
  });
  const s = await startServe(config, silentLogger);
  running.push(s);
  return s;
}

function client(options: { cert?: boolean } = {}): Agent {
  const agent = new Agent({ connect: { ca: pki.ca, ...(options.cert ? { cert: pki.clientCert, key: pki.clientKey } : {}) } });
  agents.push(agent);
  return agent;
}

const basic = (user: string, password: string) => `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;

describe('WEB_CONFIG_FILE (exporter-toolkit format)', () => {
  it.each([
    [
      'an unknown key',
      'tls_server_config:\n  cert_file: web.crt\n  key_file: web.key\n  session_tickets: false\n',
      /unknown or unsupported key tls_server_config\.session_tickets/,
    ],
    [
      'a missing certificate',
      'tls_server_config:\n  cert_file: missing.crt\n  key_file: web.key\n',
      /tls_server_config\.cert_file "missing\.crt" cannot be read \(ENOENT\)/,
    ],
    [
      'a verify mode without client_ca_file',
      'tls_server_config:\n  cert_file: web.crt\n  key_file: web.key\n  client_auth_type: RequireAndVerifyClientCert\n',
      /client_ca_file is required/,
    ],
    ['a bad client_auth_type', 'tls_server_config:\n  cert_file: web.crt\n  key_file: web.key\n  client_auth_type: Sometimes\n', /client_auth_type/],
    ['a plain-text password', 'basic_auth_users:\n  alice: hunter2\n', /basic_auth_users\.alice: must be a bcrypt hash/],
    ['bad YAML', 'tls_server_config: [\n', /is not valid YAML/],
  ])('refuses %s, naming WEB_CONFIG_FILE and the key', (_name, yaml, pattern) => {
    const file = webConfig('bad.yml', yaml);
    let error: unknown;
    try {
      loadConfig({ WEB_CONFIG_FILE: file });
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).variable).toBe('WEB_CONFIG_FILE');
    expect((error as Error).message).toMatch(pattern);
    expect((error as Error).message).not.toContain('hunter2');
  });

  it('serves HTTPS to a client trusting the CA, and not plain HTTP', async () => {
    const s = await serve(
      webConfig(
        'tls.yml',
        'tls_server_config:\n  cert_file: web.crt\n  key_file: web.key\nhttp_server_config:\n  headers:\n    X-Content-Type-Options: nosniff\n',
      ),
    );
    expect(s.url).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    const res = await request(`${s.url}/metrics`, { dispatcher: client() });
    expect(res.statusCode).toBe(200);
    expect(res.headers['x-content-type-options']).toBe('nosniff');
    expect(await res.body.text()).toContain('analytics_exporter_upstream_up');
    await expect(request(s.url.replace('https:', 'http:') + '/metrics', { reset: true }).then((r) => r.body.text())).rejects.toThrow();
  });

  it('requires basic auth with a bcrypt-hashed password', async () => {
    const hash = bcrypt.hashSync(PASSWORD, 6);
    const s = await serve(webConfig('auth.yml', `tls_server_config:\n  cert_file: web.crt\n  key_file: web.key\nbasic_auth_users:\n  prometheus: '${hash}'\n`));
    const get = async (authorization?: string) => {
      const res = await request(`${s.url}/metrics`, { dispatcher: client(), ...(authorization ? { headers: { authorization } } : {}) });
      await res.body.text();
      return res;
    };
    const none = await get();
    expect(none.statusCode).toBe(401);
    expect(none.headers['www-authenticate']).toContain('Basic realm="analytics-exporter"');
    expect((await get(basic('prometheus', 'wrong'))).statusCode).toBe(401);
    expect((await get(basic('nobody', PASSWORD))).statusCode).toBe(401);
    expect((await get('Bearer x')).statusCode).toBe(401);
    expect((await get(basic('prometheus', PASSWORD))).statusCode).toBe(200);
    expect((await get(basic('prometheus', PASSWORD))).statusCode).toBe(200); // from the cache
  });

  it('RequireAndVerifyClientCert refuses clients without a certificate signed by client_ca_file', async () => {
    copyFileSync(pki.caFile, join(pki.dir, 'clients-ca.pem'));
    const s = await serve(
      webConfig(
        'mtls.yml',
        'tls_server_config:\n  cert_file: web.crt\n  key_file: web.key\n  client_ca_file: clients-ca.pem\n  client_auth_type: RequireAndVerifyClientCert\n',
      ),
    );
    await expect(request(`${s.url}/metrics`, { dispatcher: client() }).then((r) => r.body.text())).rejects.toThrow();
    const ok = await request(`${s.url}/metrics`, { dispatcher: client({ cert: true }) });
    expect(ok.statusCode).toBe(200);
    await ok.body.text();
  });

  it('RequireAnyClientCert needs a certificate but does not verify it; VerifyClientCertIfGiven accepts none', async () => {
    const any = await serve(webConfig('any.yml', 'tls_server_config:\n  cert_file: web.crt\n  key_file: web.key\n  client_auth_type: RequireAnyClientCert\n'));
    await expect(request(`${any.url}/healthz`, { dispatcher: client() }).then((r) => r.body.text())).rejects.toThrow();
    const withCert = await request(`${any.url}/healthz`, { dispatcher: client({ cert: true }) });
    expect(withCert.statusCode).toBe(200);
    await withCert.body.text();

    const ifGiven = await serve(
      webConfig(
        'ifgiven.yml',
        'tls_server_config:\n  cert_file: web.crt\n  key_file: web.key\n  client_ca_file: clients-ca.pem\n  client_auth_type: VerifyClientCertIfGiven\n',
      ),
    );
    const without = await request(`${ifGiven.url}/healthz`, { dispatcher: client() });
    expect(without.statusCode).toBe(200);
    await without.body.text();
  });

  it('is scraped by a real Prometheus over TLS with basic auth; a wrong password shows as a failed scrape', async () => {
    const hash = bcrypt.hashSync(PASSWORD, 6);
    const s = await serve(webConfig('prom.yml', `tls_server_config:\n  cert_file: web.crt\n  key_file: web.key\nbasic_auth_users:\n  prometheus: '${hash}'\n`));
    const target = new URL(s.url).host;
    const job = (name: string, password: string) => ({
      job_name: name,
      scrape_interval: '1s',
      scrape_timeout: '1s',
      scheme: 'https',
      tls_config: { ca_file: pki.caFile, server_name: 'localhost' },
      basic_auth: { username: 'prometheus', password },
      static_configs: [{ targets: [target] }],
    });
    const prometheus = await startPrometheus({ scrapeConfigs: [job('secured', PASSWORD), job('wrong-password', 'nope')] });
    try {
      await prometheus.waitFor('up{job="secured"} == 1', (r) => r.length === 1, 30_000);
      expect((await prometheus.query('analytics_exporter_upstream_up{job="secured"}')).length).toBe(1);
      await prometheus.waitFor('up{job="wrong-password"} == 0', (r) => r.length === 1, 30_000);
      const targets = await prometheus.targets();
      const wrong = targets.activeTargets.find((t) => t.labels.job === 'wrong-password');
      expect(wrong?.lastError).toMatch(/401/);
    } finally {
      await prometheus.stop();
    }
  }, 60_000);
});
