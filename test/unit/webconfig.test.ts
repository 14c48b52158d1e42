import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebConfigSource, loadWebConfig, matchesAllowedSans, type WebConfigReload } from '../../src/serve/web/webconfig.js';
import { DEFAULT_TLS12_CIPHER_SUITES, TLS12_CIPHER_SUITES, TLS13_CIPHER_SUITES, cipherList, unservableTlsVersion } from '../../src/serve/web/tls-suites.js';

// Valid bcrypt hashes' shape; nothing here compares passwords.
const HASH_A = `$2b$04$${'a'.repeat(53)}`;
const HASH_B = `$2b$04$${'b'.repeat(53)}`;

describe('matchesAllowedSans (client_allowed_sans)', () => {
  const san = 'DNS:scraper.example, IP Address:10.0.0.7, IP Address:::1, email:ops@example.com, URI:spiffe://cluster/ns/monitoring/sa/prometheus';

  it.each([
    ['a DNS name', ['scraper.example'], true],
    ['an IPv4 address', ['10.0.0.7'], true],
    ['an IPv6 address written another way', ['0:0:0:0:0:0:0:1'], true],
    ['an e-mail address', ['ops@example.com'], true],
    ['a URI', ['spiffe://cluster/ns/monitoring/sa/prometheus'], true],
    ['one of several', ['nope.example', 'scraper.example'], true],
    ['no listed name', ['other.example', '10.0.0.8'], false],
    ['a prefix of a name only', ['scraper'], false],
  ])('%s', (_name, allowed, expected) => {
    expect(matchesAllowedSans(san, allowed)).toBe(expected);
  });

  it('reads values Node quotes (a comma inside), and refuses a certificate without SANs', () => {
    expect(matchesAllowedSans('DNS:"a,b.example", DNS:c.example', ['a,b.example'])).toBe(true);
    expect(matchesAllowedSans('DNS:"a,b.example"', ['a'])).toBe(false);
    expect(matchesAllowedSans(undefined, ['a.example'])).toBe(false);
  });
});

describe('WebConfigSource', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'ae-webconfig-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  function source(name: string, yaml: string): { file: string; web: WebConfigSource; reloads: WebConfigReload[] } {
    const file = join(dir, name);
    writeFileSync(file, yaml);
    const reloads: WebConfigReload[] = [];
    return { file, web: new WebConfigSource(loadWebConfig(file), (r) => reloads.push(r)), reloads };
  }

  it('keeps the configuration and reads nothing while the file is unchanged', () => {
    const { web, reloads } = source('same.yml', `basic_auth_users:\n  a: '${HASH_A}'\n`);
    const first = web.current;
    for (let i = 0; i < 5; i++) expect(web.refresh()).toBe(first);
    expect(reloads).toEqual([]);
  });

  it('takes up a changed file; keeps the last good one for a broken file, reporting each change once', () => {
    const { file, web, reloads } = source('change.yml', `basic_auth_users:\n  a: '${HASH_A}'\n`);
    writeFileSync(file, `basic_auth_users:\n  a: '${HASH_A}'\n  b: '${HASH_B}'\n`);
    expect(Object.keys(web.refresh().users)).toEqual(['a', 'b']);
    expect(reloads.map((r) => r.ok)).toEqual([true]);

    writeFileSync(file, 'basic_auth_users: [\n');
    for (let i = 0; i < 3; i++) expect(Object.keys(web.refresh().users)).toEqual(['a', 'b']);
    expect(reloads.map((r) => r.ok)).toEqual([true, false]);
    const failure = reloads[1] as Extract<WebConfigReload, { ok: false }>;
    expect(failure.error.message.startsWith(`${file} is not valid YAML: `)).toBe(true);

    writeFileSync(file, `basic_auth_users:\n  b: '${HASH_B}'\n`);
    expect(Object.keys(web.refresh().users)).toEqual(['b']);
    expect(reloads.map((r) => r.ok)).toEqual([true, false, true]);
  });

  it('reports a missing file as a failed reload and takes it up when it is back', () => {
    const { file, web, reloads } = source('gone.yml', `basic_auth_users:\n  a: '${HASH_A}'\n`);
    rmSync(file);
    expect(Object.keys(web.refresh().users)).toEqual(['a']);
    expect(reloads).toHaveLength(1);
    expect(reloads[0]).toMatchObject({ ok: false, error: { message: `cannot read ${file} (ENOENT)` } });
    writeFileSync(file, `basic_auth_users:\n  b: '${HASH_B}'\n`);
    expect(Object.keys(web.refresh().users)).toEqual(['b']);
  });
});

describe('TLS suites and versions (tls_server_config)', () => {
  const tls12 = (list: string) => list.split(':').filter((c) => !c.startsWith('TLS_'));
  const tls13 = (list: string) => list.split(':').filter((c) => c.startsWith('TLS_'));

  it('offers, without cipher_suites, the TLS 1.3 suites and the forward-secret AEAD TLS 1.2 suites only', () => {
    const list = cipherList(undefined);
    expect(tls13(list).sort()).toEqual([...TLS13_CIPHER_SUITES].sort());
    expect(tls12(list)).toEqual([
      'ECDHE-ECDSA-AES128-GCM-SHA256',
      'ECDHE-RSA-AES128-GCM-SHA256',
      'ECDHE-ECDSA-AES256-GCM-SHA384',
      'ECDHE-RSA-AES256-GCM-SHA384',
      'ECDHE-ECDSA-CHACHA20-POLY1305',
      'ECDHE-RSA-CHACHA20-POLY1305',
    ]);
    expect(DEFAULT_TLS12_CIPHER_SUITES.map((n) => TLS12_CIPHER_SUITES[n])).toEqual(tls12(list));
  });

  it('maps cipher_suites to OpenSSL names in the order given, without duplicates, the TLS 1.3 suites always on', () => {
    const list = cipherList([
      'TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA',
      'TLS_AES_128_GCM_SHA256',
      'TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305',
      'TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256',
    ]);
    expect(tls12(list)).toEqual(['ECDHE-RSA-AES128-SHA', 'ECDHE-RSA-CHACHA20-POLY1305']);
    expect(tls13(list).sort()).toEqual([...TLS13_CIPHER_SUITES].sort());
  });

  it('says TLS 1.0 and 1.1 cannot be served, and 1.2 and 1.3 can', () => {
    expect(unservableTlsVersion('TLS10')).toMatch(
      /^TLS10 cannot be served here: Node v\d+.* with OpenSSL \S+ refuses TLS 1\.0 and 1\.1 handshakes; use TLS12 or TLS13$/,
    );
    expect(unservableTlsVersion('TLS11')).toMatch(/^TLS11 cannot be served here/);
    expect(unservableTlsVersion('TLS12')).toBeUndefined();
    expect(unservableTlsVersion('TLS13')).toBeUndefined();
  });

  it.each([
    ['min_version: TLS10', 'min_version', 'TLS10'],
    ['min_version: TLS11\n  max_version: TLS11', 'min_version', 'TLS11'],
    ['max_version: TLS11', 'max_version', 'TLS11'],
  ])('refuses %s naming the key', (keys, key, version) => {
    const dir = mkdtempSync(join(tmpdir(), 'ae-webconfig-tls-'));
    try {
      const file = join(dir, 'web.yml');
      writeFileSync(file, `tls_server_config:\n  cert_file: web.crt\n  key_file: web.key\n  ${keys}\n`);
      expect(() => loadWebConfig(file)).toThrow(new RegExp(`^${file}: tls_server_config\\.${key}: ${version} cannot be served here: `));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
