import { X509Certificate } from 'node:crypto';
import { copyFileSync, mkdirSync, renameSync, symlinkSync, writeFileSync } from 'node:fs';
import { request as httpsRequest } from 'node:https';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { connect, type TLSSocket } from 'node:tls';
import bcrypt from 'bcryptjs';
import { Agent, request } from 'undici';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startServe, type RunningServer } from '../../src/serve/lifecycle.js';
import { readWebConfigSetting } from '../../src/serve/web/webconfig.js';
import { loadConfig } from '../../src/config.js';
import { ConfigError } from '../../src/errors.js';
import { createLogger, type Logger } from '../../src/log.js';
import { silentLogger } from '../helpers/silent-logger.js';
import { startSimulator, type Simulator } from '@analytics-exporter/simulator';
import { createTestPki, type TestPki } from '../helpers/certs.js';
import { runCliInProcess } from '../helpers/cli.js';
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

async function serve(webConfigFile: string, log: Logger = silentLogger): Promise<RunningServer> {
  const config = loadConfig({
    ...simulatorEnv(sim),
    DATABASE_URL: db.url,
    METRICS_LISTEN: '127.0.0.1:0',
    SYNC_SCHEDULE: 'off',
    WEB_CONFIG_FILE: webConfigFile,
  });
  const s = await startServe(config, log);
  running.push(s);
  return s;
}

function client(options: { cert?: boolean } = {}): Agent {
  const agent = new Agent({ connect: { ca: pki.ca, ...(options.cert ? { cert: pki.clientCert, key: pki.clientKey } : {}) } });
  agents.push(agent);
  return agent;
}

/** A logger at info whose lines (parsed) the test reads. */
function capturedLogger(): { log: Logger; lines: { level: string; msg: string }[] } {
  const lines: { level: string; msg: string }[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString('utf8').split('\n')) if (line !== '') lines.push(JSON.parse(line) as { level: string; msg: string });
      done();
    },
  });
  return { log: createLogger('info', { format: 'json', destination: sink }), lines };
}

/** One HTTPS request on a new connection (Node's https client): the status, the body and the SHA-256 fingerprint of the certificate served. */
function httpsGet(url: string, ca: string[], authorization?: string): Promise<{ status: number; body: string; fingerprint: string }> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest(url, { agent: false, ca, headers: authorization ? { authorization } : {} }, (res) => {
      const fingerprint = (res.socket as TLSSocket).getPeerCertificate().fingerprint256;
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode!, body, fingerprint }));
    });
    req.on('error', reject);
    req.end();
  });
}

/** A TLS handshake with the server and what was agreed, or the handshake's error. */
function handshake(
  url: string,
  options: { ca: string; ciphers?: string; maxVersion?: 'TLSv1.2' | 'TLSv1.3' },
): Promise<{ cipher: string; protocol: string | null; curve: string | undefined }> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect({ host: hostname, port: Number(port), servername: 'localhost', ...options }, () => {
      const agreed = {
        cipher: socket.getCipher().name,
        protocol: socket.getProtocol(),
        curve: (socket.getEphemeralKeyInfo() as { name?: string } | null)?.name,
      };
      socket.end();
      resolve(agreed);
    });
    socket.on('error', reject);
  });
}

const fingerprintOf = (pem: string) => new X509Certificate(pem).fingerprint256;

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
    ['rate_limit, which nothing here enforces', 'rate_limit:\n  interval: 1s\n  burst: 5\n', /rate_limit: is not supported here/],
    [
      'a cipher suite Go does not offer',
      'tls_server_config:\n  cert_file: web.crt\n  key_file: web.key\n  cipher_suites: [TLS_RSA_WITH_RC4_128_SHA]\n',
      /tls_server_config\.cipher_suites: "TLS_RSA_WITH_RC4_128_SHA" is not a cipher suite exporter-toolkit accepts/,
    ],
    [
      "a curve by OpenSSL's name",
      'tls_server_config:\n  cert_file: web.crt\n  key_file: web.key\n  curve_preferences: [prime256v1]\n',
      /tls_server_config\.curve_preferences: "prime256v1" is not one of X25519, CurveP256, CurveP384, CurveP521/,
    ],
    [
      'a certificate both inline and as a file',
      `tls_server_config:\n  cert: "-----BEGIN CERTIFICATE-----"\n  cert_file: web.crt\n  key_file: web.key\n`,
      /tls_server_config\.cert_file: set cert_file or cert \(inline\), not both/,
    ],
    [
      'client_allowed_sans with a mode that admits clients without a certificate',
      'tls_server_config:\n  cert_file: web.crt\n  key_file: web.key\n  client_ca_file: clients-ca.pem\n  client_auth_type: VerifyClientCertIfGiven\n  client_allowed_sans: [a.example]\n',
      /tls_server_config\.client_allowed_sans: needs client_auth_type RequireAnyClientCert or RequireAndVerifyClientCert/,
    ],
    [
      'a key that does not match the certificate',
      'tls_server_config:\n  cert_file: web.crt\n  key_file: client.key\n',
      /tls_server_config cannot be used: .*key values mismatch/,
    ],
    ['an inline key that is not a key, without showing it', 'tls_server_config:\n  cert_file: web.crt\n  key: hunter2\n', /tls_server_config cannot be used/],
    [
      'a header exporter-toolkit does not set',
      'http_server_config:\n  headers:\n    X-Powered-By: me\n',
      /unknown or unsupported key http_server_config\.headers\.X-Powered-By/,
    ],
    [
      'min_version above max_version',
      'tls_server_config:\n  cert_file: web.crt\n  key_file: web.key\n  min_version: TLS13\n  max_version: TLS12\n',
      /max_version: must not be below min_version/,
    ],
  ])('refuses %s, naming WEB_CONFIG_FILE and the key', (_name, yaml, pattern) => {
    const file = webConfig('bad.yml', yaml);
    let error: unknown;
    try {
      // The configuration holds the path; serve and check read the file through this.
      readWebConfigSetting(loadConfig({ WEB_CONFIG_FILE: file }).serve.webConfigFile);
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).variable).toBe('WEB_CONFIG_FILE');
    expect((error as Error).message).toMatch(pattern);
    expect((error as Error).message).not.toContain('hunter2');
  });

  it('a bad file stops serve and check at start with exit status 2, naming WEB_CONFIG_FILE', async () => {
    const file = webConfig('unreadable.yml', 'tls_server_config:\n  cert_file: missing.crt\n  key_file: web.key\n');
    const expected = `WEB_CONFIG_FILE ${file}: tls_server_config.cert_file "missing.crt" cannot be read (ENOENT)`;
    const env = { ...simulatorEnv(sim), DATABASE_URL: db.url, METRICS_LISTEN: '127.0.0.1:0', SYNC_SCHEDULE: 'off', WEB_CONFIG_FILE: file };
    const served = await runCliInProcess(['serve'], env);
    expect(served.code).toBe(2);
    expect(served.stderr).toBe(`analytics-exporter: invalid configuration: ${expected}\n`);
    const checked = await runCliInProcess(['check'], env);
    expect(checked.code).toBe(2);
    expect(checked.stdout).toBe(`FAIL  configuration  ${expected}\n`);
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
    // /probe is behind the same auth, which is checked before its query: no source names leak.
    const probe = async (query: string, authorization?: string) => {
      const res = await request(`${s.url}/probe${query}`, { dispatcher: client(), ...(authorization ? { headers: { authorization } } : {}) });
      return { status: res.statusCode, body: await res.body.text() };
    };
    expect(await probe('?source=nope')).toEqual({ status: 401, body: 'unauthorized\n' });
    expect((await probe('?source=default')).status).toBe(401);
    expect((await probe('?source=default', basic('prometheus', PASSWORD))).status).toBe(200);
  });

  it('answers 429 with Retry-After when as many password checks run as allowed; a cached login still passes', async () => {
    // Cost 10: each comparison lasts long enough for the other requests to arrive meanwhile.
    const hash = bcrypt.hashSync(PASSWORD, 10);
    const s = await serve(
      webConfig('auth-busy.yml', `tls_server_config:\n  cert_file: web.crt\n  key_file: web.key\nbasic_auth_users:\n  prometheus: '${hash}'\n`),
    );
    const agent = client();
    const get = async (authorization: string) => {
      const res = await request(`${s.url}/`, { dispatcher: agent, headers: { authorization } });
      return { status: res.statusCode, retryAfter: res.headers['retry-after'], body: await res.body.text() };
    };
    expect((await get(basic('prometheus', PASSWORD))).status).toBe(200);
    // Opens the connections first (answered from the cache), so the wrong attempts arrive together
    // rather than each behind TLS handshakes that wait for bcrypt.
    const warm = await Promise.all(Array.from({ length: 12 }, () => get(basic('prometheus', PASSWORD))));
    expect(warm.every((a) => a.status === 200)).toBe(true);
    const [answers, cached] = await Promise.all([
      Promise.all(Array.from({ length: 12 }, (_, i) => get(basic('prometheus', `wrong-${i}`)))),
      new Promise((r) => setTimeout(r, 50)).then(() => get(basic('prometheus', PASSWORD))),
    ]);
    const busy = answers.filter((a) => a.status === 429);
    expect(busy.length).toBeGreaterThan(0);
    expect(busy.every((a) => a.retryAfter === '1')).toBe(true);
    // One client address runs two checks at a time (the rest of the cap is for other addresses).
    expect(answers.filter((a) => a.status === 401).length).toBeGreaterThanOrEqual(2);
    expect(answers.every((a) => a.status === 429 || a.status === 401)).toBe(true);
    expect(cached.status).toBe(200);
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

  it('honours inline cert and key, cipher_suites, curve_preferences and max_version; warns of http2: true', async () => {
    const yaml = [
      'tls_server_config:',
      `  cert: ${JSON.stringify(pki.serverCert)}`,
      `  key: ${JSON.stringify(pki.serverKey)}`,
      '  max_version: TLS12',
      '  cipher_suites: [TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256]',
      '  curve_preferences: [CurveP384]',
      'http_server_config:',
      '  http2: true',
      '  headers:',
      '    X-Frame-Options: deny',
      "    Content-Security-Policy: ''",
      '',
    ].join('\n');
    const { log, lines } = capturedLogger();
    const s = await serve(webConfig('keys.yml', yaml), log);
    expect(await handshake(s.url, { ca: pki.ca })).toEqual({ cipher: 'ECDHE-ECDSA-AES256-GCM-SHA384', protocol: 'TLSv1.2', curve: 'secp384r1' });
    await expect(handshake(s.url, { ca: pki.ca, ciphers: 'ECDHE-ECDSA-AES128-GCM-SHA256', maxVersion: 'TLSv1.2' })).rejects.toThrow();
    const res = await httpsGet(`${s.url}/healthz`, [pki.ca]);
    expect(res.status).toBe(200);
    expect(lines.filter((l) => l.level === 'warn').map((l) => l.msg)).toEqual([expect.stringMatching(/http2 is true, but this server speaks HTTP\/1\.1 only/)]);
  });

  it('client_allowed_sans admits a client certificate naming an allowed SAN and closes others', async () => {
    const s = await serve(
      webConfig(
        'sans.yml',
        'tls_server_config:\n  cert_file: web.crt\n  key_file: web.key\n  client_auth_type: RequireAnyClientCert\n  client_allowed_sans: [localhost]\n',
      ),
    );
    // The server's certificate names localhost; the test client's certificate names nothing.
    const named = new Agent({ connect: { ca: pki.ca, cert: pki.serverCert, key: pki.serverKey } });
    agents.push(named);
    const ok = await request(`${s.url}/healthz`, { dispatcher: named });
    expect(ok.statusCode).toBe(200);
    await ok.body.text();
    await expect(request(`${s.url}/healthz`, { dispatcher: client({ cert: true }) }).then((r) => r.body.text())).rejects.toThrow();
  });

  it('keeps serving plain HTTP when tls_server_config is added, saying that needs a restart', async () => {
    const { log, lines } = capturedLogger();
    const file = webConfig('plain.yml', 'http_server_config:\n  headers:\n    X-Frame-Options: deny\n');
    const s = await serve(file, log);
    writeFileSync(file, 'tls_server_config:\n  cert_file: web.crt\n  key_file: web.key\n');
    const res = await request(`${s.url}/healthz`);
    expect(res.statusCode).toBe(200);
    expect(res.headers['x-frame-options']).toBe('deny');
    await res.body.text();
    const warned = lines.filter((l) => l.level === 'warn').map((l) => l.msg);
    expect(warned).toEqual([expect.stringContaining('tls_server_config was added; switching between HTTP and HTTPS needs a restart')]);
  });

  it('takes up a new client_auth_type for the connections that follow', async () => {
    copyFileSync(pki.caFile, join(pki.dir, 'clients-ca.pem'));
    const file = webConfig('auth-type.yml', 'tls_server_config:\n  cert_file: web.crt\n  key_file: web.key\n');
    const s = await serve(file);
    const healthz = async (dispatcher: Agent) => await request(`${s.url}/healthz`, { dispatcher }).then((r) => r.body.text().then(() => r.statusCode));
    expect(await healthz(client())).toBe(200);
    writeFileSync(
      file,
      'tls_server_config:\n  cert_file: web.crt\n  key_file: web.key\n  client_ca_file: clients-ca.pem\n  client_auth_type: RequireAndVerifyClientCert\n',
    );
    // Every new connection checks the files first, so the very next handshake asks for a certificate.
    await expect(healthz(client())).rejects.toThrow();
    expect(await healthz(client({ cert: true }))).toBe(200);
  });

  it('is scraped by a real Prometheus over TLS with basic auth across a certificate rotation, a new user and broken files', async () => {
    // Laid out as a Kubernetes Secret volume: the files sit behind a link the kubelet swaps in one rename.
    const next = createTestPki();
    const root = join(pki.dir, 'rotation');
    const version = (name: string, cert: string, key: string) => {
      mkdirSync(join(root, name), { recursive: true });
      copyFileSync(cert, join(root, name, 'tls.crt'));
      copyFileSync(key, join(root, name, 'tls.key'));
    };
    version('v1', pki.serverCertFile, pki.serverKeyFile);
    version('v2', next.serverCertFile, next.serverKeyFile);
    version('mismatched', next.serverCertFile, pki.serverKeyFile);
    const point = (name: string) => {
      symlinkSync(name, join(root, 'live.new'));
      renameSync(join(root, 'live.new'), join(root, 'live'));
    };
    point('v1');
    const tlsPart = 'tls_server_config:\n  cert_file: live/tls.crt\n  key_file: live/tls.key\n';
    const users = `basic_auth_users:\n  prometheus: '${bcrypt.hashSync(PASSWORD, 6)}'\n`;
    const file = join(root, 'web.yml');
    const write = (yaml: string) => {
      writeFileSync(`${file}.new`, yaml);
      renameSync(`${file}.new`, file);
    };
    write(tlsPart + users);
    const bothCas = join(root, 'both-cas.pem');
    writeFileSync(bothCas, pki.ca + next.ca);

    const { log, lines } = capturedLogger();
    const s = await serve(file, log);
    const target = new URL(s.url).host;
    const job = (name: string, password: string, caFile: string) => ({
      job_name: name,
      scrape_interval: '1s',
      scrape_timeout: '1s',
      scheme: 'https',
      tls_config: { ca_file: caFile, server_name: 'localhost' },
      basic_auth: { username: 'prometheus', password },
      static_configs: [{ targets: [target] }],
    });
    const prometheus = await startPrometheus({
      scrapeConfigs: [job('secured', PASSWORD, bothCas), job('wrong-password', 'nope', pki.caFile), job('new-ca-only', PASSWORD, next.caFile)],
    });
    const get = (user = 'prometheus', password = PASSWORD) => httpsGet(`${s.url}/metrics`, [pki.ca, next.ca], basic(user, password));
    const reloadGauge = (body: string) => /^analytics_exporter_web_config_last_reload_successful (\d)$/m.exec(body)?.[1];
    const warnings = () => lines.filter((l) => l.level === 'warn').map((l) => l.msg);
    try {
      await prometheus.waitFor('up{job="secured"} == 1', (r) => r.length === 1, 30_000);
      expect((await prometheus.query('analytics_exporter_upstream_up{job="secured"}')).length).toBe(1);
      await prometheus.waitFor('up{job="wrong-password"} == 0', (r) => r.length === 1, 30_000);
      const wrong = (await prometheus.targets()).activeTargets.find((t) => t.labels.job === 'wrong-password');
      expect(wrong?.lastError).toMatch(/401/);
      // A scraper trusting only the next CA fails until the certificate is rotated.
      await prometheus.waitFor('up{job="new-ca-only"} == 0', (r) => r.length === 1, 30_000);
      const before = await get();
      expect(before.fingerprint).toBe(fingerprintOf(pki.serverCert));
      expect(reloadGauge(before.body)).toBe('1');

      point('v2');
      const rotated = await get();
      expect(rotated.status).toBe(200);
      expect(rotated.fingerprint).toBe(fingerprintOf(next.serverCert));
      expect(reloadGauge(rotated.body)).toBe('1');
      await prometheus.waitFor('up{job="new-ca-only"} == 1', (r) => r.length === 1, 30_000);

      expect((await get('alice', 'alice-pass')).status).toBe(401);
      write(`${tlsPart}${users}  alice: '${bcrypt.hashSync('alice-pass', 4)}'\n`);
      expect((await get('alice', 'alice-pass')).status).toBe(200);
      expect((await get()).status).toBe(200);
      expect(warnings()).toEqual([]);

      // Broken files: each keeps the last good configuration (alice, the v2 certificate), says so once, and sets the gauge to 0.
      const broken: [() => void, RegExp][] = [
        [() => write('tls_server_config: [\n'), /web\.yml is not valid YAML/],
        [() => point('mismatched'), /tls_server_config cannot be used: .*key values mismatch/],
        [() => point('missing'), /tls_server_config\.cert_file "live\/tls\.crt" cannot be read \(ENOENT\)/],
      ];
      for (const [i, [breakIt, problem]] of broken.entries()) {
        breakIt();
        for (let n = 0; n < 3; n++) {
          const kept = await get('alice', 'alice-pass');
          expect(kept.status).toBe(200);
          expect(kept.fingerprint).toBe(fingerprintOf(next.serverCert));
          expect(reloadGauge(kept.body)).toBe('0');
        }
        expect(warnings()).toHaveLength(i + 1);
        expect(warnings()[i]).toMatch(problem);
        expect(warnings()[i]).toContain(file);
        expect(warnings()[i]).toContain('the last good configuration stays in use');
        if (i === 0) {
          await prometheus.waitFor('analytics_exporter_web_config_last_reload_successful{job="secured"} == 0', (r) => r.length === 1, 30_000);
          write(`${tlsPart}${users}  alice: '${bcrypt.hashSync('alice-pass', 4)}'\n`);
        }
      }
      point('v2');
      expect(reloadGauge((await get()).body)).toBe('1');
      await prometheus.waitFor('analytics_exporter_web_config_last_reload_successful{job="secured"} == 1', (r) => r.length === 1, 30_000);
      await prometheus.waitFor('up{job="secured"} == 1', (r) => r.length === 1, 30_000);
    } finally {
      await prometheus.stop();
      next.cleanup();
    }
  }, 90_000);
});

describe('TLS as the Go exporters serve it', () => {
  let rsa: TestPki;
  beforeAll(() => {
    // RSA key exchange suites need an RSA certificate: with the EC one they could never be agreed.
    rsa = createTestPki({ serverKey: 'rsa' });
  });
  afterAll(() => rsa?.cleanup());

  const rsaConfig = (name: string, extra = '') =>
    webConfig(name, `tls_server_config:\n  cert: ${JSON.stringify(rsa.serverCert)}\n  key: ${JSON.stringify(rsa.serverKey)}\n${extra}`);

  it('offers TLS 1.2 only forward-secret AEAD suites by default; cipher_suites still chooses', async () => {
    const s = await serve(rsaConfig('default-suites.yml'));
    const tls12 = (ciphers: string) => handshake(s.url, { ca: rsa.ca, ciphers, maxVersion: 'TLSv1.2' });
    // RSA key exchange (no forward secrecy) and CBC suites that Node's own default offers.
    for (const suite of ['AES128-GCM-SHA256', 'AES256-GCM-SHA384', 'AES128-SHA', 'ECDHE-RSA-AES128-SHA256', 'ECDHE-RSA-AES128-SHA']) {
      await expect(tls12(suite), suite).rejects.toThrow(/handshake failure|no shared cipher/);
    }
    for (const suite of ['ECDHE-RSA-AES128-GCM-SHA256', 'ECDHE-RSA-AES256-GCM-SHA384', 'ECDHE-RSA-CHACHA20-POLY1305']) {
      expect(await tls12(suite)).toMatchObject({ cipher: suite, protocol: 'TLSv1.2' });
    }
    // TLS 1.3 is untouched.
    expect(await handshake(s.url, { ca: rsa.ca })).toMatchObject({ protocol: 'TLSv1.3' });

    const chosen = await serve(rsaConfig('chosen-suites.yml', '  cipher_suites: [TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA]\n'));
    expect(await handshake(chosen.url, { ca: rsa.ca, ciphers: 'ECDHE-RSA-AES128-SHA', maxVersion: 'TLSv1.2' })).toMatchObject({
      cipher: 'ECDHE-RSA-AES128-SHA',
    });
    await expect(handshake(chosen.url, { ca: rsa.ca, ciphers: 'ECDHE-RSA-AES128-GCM-SHA256', maxVersion: 'TLSv1.2' })).rejects.toThrow();
  });

  it.each(['TLS10', 'TLS11'])('refuses min_version %s at start (exit 2 naming the key): Node cannot serve it', async (version) => {
    const file = rsaConfig(`min-${version}.yml`, `  min_version: ${version}\n`);
    const env = { ...simulatorEnv(sim), DATABASE_URL: db.url, METRICS_LISTEN: '127.0.0.1:0', SYNC_SCHEDULE: 'off', WEB_CONFIG_FILE: file };
    const served = await runCliInProcess(['serve'], env);
    expect(served.code).toBe(2);
    expect(served.stderr).toMatch(
      new RegExp(
        `^analytics-exporter: invalid configuration: WEB_CONFIG_FILE .*: tls_server_config\\.min_version: ${version} cannot be served here: .*use TLS12 or TLS13\\n$`,
      ),
    );
  });
});
