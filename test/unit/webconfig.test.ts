import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebConfigSource, loadWebConfig, matchesAllowedSans, type WebConfigReload } from '../../src/serve/webconfig.js';

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
