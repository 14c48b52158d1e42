import nodeTls from 'node:tls';
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/errors.js';
import { connectionAttempts, describeTls, fallsBack, isTlsFailure, resolveDatabaseTarget, type SslEnvironment } from '../../src/db/tls.js';

const CA = '-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n';
const CERT = '-----BEGIN CERTIFICATE-----\nCLIENT\n-----END CERTIFICATE-----\n';
const KEY = '-----BEGIN PRIVATE KEY-----\nKEY\n-----END PRIVATE KEY-----\n';
const FILES: Record<string, string> = {
  '/pki/ca.pem': CA,
  '/pki/other-ca.pem': CA.replace('CA', 'OTHER'),
  '/pki/client.pem': CERT,
  '/pki/client.key': KEY,
  '/pki/notes.txt': 'hello',
};

/** Reads the fake files above; any other path fails as a missing file does. */
function readFile(path: string): string {
  const text = FILES[path];
  if (text === undefined) throw Object.assign(new Error(`ENOENT: no such file or directory, open '${path}'`), { code: 'ENOENT' });
  return text;
}

const resolve = (url: string, env: SslEnvironment = {}) => resolveDatabaseTarget(url, env, readFile);

function configError(url: string, env: SslEnvironment = {}): ConfigError {
  try {
    resolve(url, env);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return err as ConfigError;
  }
  throw new Error('expected a ConfigError');
}

describe('resolveDatabaseTarget', () => {
  it("defaults to libpq's prefer, trusting the system store, without a client certificate", () => {
    const target = resolve('postgres://u@db.example.com/analytics');
    expect(target).toEqual({ url: 'postgres://u@db.example.com/analytics', tls: { mode: 'prefer', roots: 'system' } });
  });

  it('takes the ssl* parameters out of the URL pg sees and keeps the others', () => {
    const target = resolve('postgres://u:pw@db.example.com:6543/analytics?sslmode=verify-full&application_name=x&sslrootcert=/pki/ca.pem');
    expect(target.url).toBe('postgres://u:pw@db.example.com:6543/analytics?application_name=x');
    expect(target.tls).toEqual({ mode: 'verify-full', roots: { file: '/pki/ca.pem', pem: CA } });
  });

  it('reads PGSSLMODE, PGSSLROOTCERT, PGSSLCERT and PGSSLKEY when the URL has no such parameter', () => {
    const target = resolve('postgres://u@h/db', {
      PGSSLMODE: 'verify-ca',
      PGSSLROOTCERT: '/pki/ca.pem',
      PGSSLCERT: '/pki/client.pem',
      PGSSLKEY: '/pki/client.key',
    });
    expect(target.tls).toEqual({
      mode: 'verify-ca',
      roots: { file: '/pki/ca.pem', pem: CA },
      client: { cert: { file: '/pki/client.pem', pem: CERT }, key: { file: '/pki/client.key', pem: KEY } },
    });
  });

  it('lets each URL parameter win over its variable, as libpq does', () => {
    const target = resolve('postgres://u@h/db?sslmode=require&sslrootcert=/pki/other-ca.pem', { PGSSLMODE: 'disable', PGSSLROOTCERT: '/pki/ca.pem' });
    expect(target.tls.mode).toBe('require');
    expect(target.tls.roots).toEqual({ file: '/pki/other-ca.pem', pem: FILES['/pki/other-ca.pem'] });
    // An empty parameter counts as absent: the variable applies.
    expect(resolve('postgres://u@h/db?sslmode=', { PGSSLMODE: 'disable' }).tls.mode).toBe('disable');
  });

  it('refuses an unknown sslmode, naming DATABASE_URL or PGSSLMODE and never the password', () => {
    const fromUrl = configError('postgres://u:Pa55word@h/db?sslmode=verify_full');
    expect(fromUrl.variable).toBe('DATABASE_URL');
    expect(fromUrl.message).toBe('DATABASE_URL parameter sslmode must be one of disable, allow, prefer, require, verify-ca, verify-full; got "verify_full"');
    expect(fromUrl.message).not.toContain('Pa55word');
    const fromEnv = configError('postgres://u:Pa55word@h/db', { PGSSLMODE: 'no-verify' });
    expect(fromEnv.variable).toBe('PGSSLMODE');
    expect(fromEnv.message).toContain('PGSSLMODE must be one of');
    expect(fromEnv.message).toContain('got "no-verify"');
    // Case matters, as in libpq.
    expect(configError('postgres://u@h/db?sslmode=REQUIRE').variable).toBe('DATABASE_URL');
  });

  it('refuses ssl* parameters it does not implement instead of ignoring them', () => {
    const err = configError('postgres://u@h/db?ssl=true&sslpassword=x');
    expect(err.variable).toBe('DATABASE_URL');
    expect(err.message).toContain('DATABASE_URL parameter ssl, sslpassword is not supported');
  });

  it('names the file and the parameter of a file it cannot read', () => {
    const missing = configError('postgres://u@h/db?sslmode=verify-full&sslrootcert=/pki/missing.pem');
    expect(missing.variable).toBe('DATABASE_URL');
    expect(missing.message).toBe('DATABASE_URL parameter sslrootcert must name a readable PEM file; cannot read /pki/missing.pem (ENOENT)');
    const notPem = configError('postgres://u@h/db', { PGSSLROOTCERT: '/pki/notes.txt' });
    expect(notPem.variable).toBe('PGSSLROOTCERT');
    expect(notPem.message).toContain('PGSSLROOTCERT must name a PEM file; /pki/notes.txt holds no "-----BEGIN" block');
    const key = configError('postgres://u@h/db?sslcert=/pki/client.pem', { PGSSLKEY: '/pki/nokey' });
    expect(key.variable).toBe('PGSSLKEY');
    expect(key.message).toContain('cannot read /pki/nokey');
  });

  it('wants sslcert and sslkey together', () => {
    const err = configError('postgres://u@h/db?sslcert=/pki/client.pem');
    expect(err.variable).toBe('DATABASE_URL');
    expect(err.message).toContain('DATABASE_URL parameter sslcert needs sslkey (or PGSSLKEY) too');
    expect(configError('postgres://u@h/db', { PGSSLKEY: '/pki/client.key' }).message).toContain('PGSSLKEY needs sslcert (or PGSSLCERT) too');
  });

  it('reads sslrootcert=system as the system store, verify-full by default and required', () => {
    expect(resolve('postgres://u@h/db?sslrootcert=system').tls).toEqual({ mode: 'verify-full', roots: 'system' });
    expect(resolve('postgres://u@h/db', { PGSSLROOTCERT: 'system' }).tls.mode).toBe('verify-full');
    const weak = configError('postgres://u@h/db?sslrootcert=system', { PGSSLMODE: 'require' });
    expect(weak.variable).toBe('PGSSLMODE');
    expect(weak.message).toContain('must be verify-full with DATABASE_URL parameter sslrootcert=system');
  });
});

describe('connectionAttempts', () => {
  const tls = (url: string, env: SslEnvironment = {}) => resolve(url, env).tls;

  it('makes one plain attempt for disable, plain then TLS for allow, TLS then plain for prefer', () => {
    expect(connectionAttempts(tls('postgres://h/d?sslmode=disable'))).toEqual([false]);
    expect(connectionAttempts(tls('postgres://h/d?sslmode=allow'))).toEqual([false, { rejectUnauthorized: false }]);
    expect(connectionAttempts(tls('postgres://h/d'))).toEqual([{ rejectUnauthorized: false }, false]);
  });

  it('encrypts without verifying for require, and verifies the chain when sslrootcert is given (as libpq)', () => {
    expect(connectionAttempts(tls('postgres://h/d?sslmode=require'))).toEqual([{ rejectUnauthorized: false }]);
    const [withRoot] = connectionAttempts(tls('postgres://h/d?sslmode=require&sslrootcert=/pki/ca.pem'));
    expect(withRoot).toMatchObject({ rejectUnauthorized: true, ca: CA });
    expect(typeof (withRoot as { checkServerIdentity?: unknown }).checkServerIdentity).toBe('function');
  });

  it('checks the chain only for verify-ca, the chain and the host name for verify-full', () => {
    const [ca] = connectionAttempts(tls('postgres://h/d?sslmode=verify-ca&sslrootcert=/pki/ca.pem'));
    expect(ca).toMatchObject({ rejectUnauthorized: true, ca: CA });
    // Host name checking is skipped by a checkServerIdentity that accepts any name.
    expect((ca as { checkServerIdentity: (host: string, cert: unknown) => unknown }).checkServerIdentity('other.example', {})).toBeUndefined();
    const [full] = connectionAttempts(tls('postgres://h/d?sslmode=verify-full&sslrootcert=/pki/ca.pem'));
    expect(full).toEqual({ rejectUnauthorized: true, ca: CA });
  });

  it('trusts the system store for verify-* without sslrootcert, and sends the client certificate', () => {
    const [full] = connectionAttempts(tls('postgres://h/d?sslmode=verify-full&sslcert=/pki/client.pem&sslkey=/pki/client.key'));
    const options = full as { ca?: string[]; cert: string; key: string; rejectUnauthorized: boolean; checkServerIdentity?: unknown };
    expect(options).toMatchObject({ rejectUnauthorized: true, cert: CERT, key: KEY });
    expect(options.checkServerIdentity).toBeUndefined();
    const getCACertificates = (nodeTls as { getCACertificates?: (type: string) => string[] }).getCACertificates;
    if (getCACertificates === undefined) {
      // Older Node: no `ca`, so Node's default roots apply (NODE_EXTRA_CA_CERTS included).
      expect(options.ca).toBeUndefined();
    } else {
      // Node's defaults and the system store, none of them dropped.
      expect(options.ca).toEqual(expect.arrayContaining([...getCACertificates('default'), ...getCACertificates('system')]));
    }
  });
});

describe('fallsBack', () => {
  const refused = new Error('The server does not support SSL connections');
  const hba = Object.assign(new Error('no pg_hba.conf entry for host "127.0.0.1", user "u", database "d", no encryption'), { code: '28000' });
  const certificate = Object.assign(new Error('self-signed certificate in certificate chain'), { code: 'SELF_SIGNED_CERT_IN_CHAIN' });

  it('falls back to plain for prefer only when the server refuses TLS', () => {
    expect(fallsBack('prefer', {}, refused)).toBe(true);
    expect(fallsBack('prefer', {}, certificate)).toBe(false);
    expect(fallsBack('prefer', {}, Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }))).toBe(false);
    expect(fallsBack('require', {}, refused)).toBe(false);
  });

  it('falls back to TLS for allow when the server rejects a plain connection', () => {
    expect(fallsBack('allow', false, hba)).toBe(true);
    expect(fallsBack('allow', {}, hba)).toBe(false);
    expect(fallsBack('disable', false, hba)).toBe(false);
  });

  it('tells TLS failures from others', () => {
    expect(isTlsFailure(refused)).toBe(true);
    expect(isTlsFailure(certificate)).toBe(true);
    expect(isTlsFailure(Object.assign(new Error('altnames'), { code: 'ERR_TLS_CERT_ALTNAME_INVALID' }))).toBe(true);
    expect(isTlsFailure(hba)).toBe(false);
    expect(isTlsFailure(Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }))).toBe(false);
  });

  it('describes the settings for messages', () => {
    expect(describeTls({ mode: 'require', roots: 'system' })).toBe('sslmode=require');
    expect(describeTls({ mode: 'verify-full', roots: 'system' })).toBe("sslmode=verify-full, roots from the system's CA store");
    expect(describeTls({ mode: 'verify-ca', roots: { file: '/pki/ca.pem', pem: CA } })).toBe('sslmode=verify-ca, roots from /pki/ca.pem');
  });
});
