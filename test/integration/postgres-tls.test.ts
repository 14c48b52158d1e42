/**
 * PostgreSQL TLS as libpq does it, against a real server: one throwaway cluster for this file
 * with `ssl = on`, a certificate from a throwaway CA for the name `localhost` only, and a
 * pg_hba.conf that refuses plain TCP (so a connection that works there is encrypted) and wants
 * a client certificate for the database `mtls`. Plain servers are the run's shared cluster.
 */
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import pg from 'pg';
import { createPool } from '../../src/db/pool.js';
import { DatabaseError, describeError } from '../../src/errors.js';
import { silentLogger } from '../helpers/silent-logger.js';
import { createTestPki, type TestPki } from '../helpers/certs.js';
import { runCli } from '../helpers/cli.js';
import { startThrowawayCluster, type ThrowawayCluster } from '../helpers/postgres.js';

let pki: TestPki;
let cluster: ThrowawayCluster;

beforeAll(async () => {
  pki = createTestPki({ serverAltNames: 'DNS:localhost' });
  cluster = await startThrowawayCluster({
    tls: { certFile: pki.serverCertFile, keyFile: pki.serverKeyFile, caFile: pki.caFile },
    hba: ['hostssl mtls all 127.0.0.1/32 trust clientcert=verify-ca', 'hostssl all all 127.0.0.1/32 trust'],
  });
  const admin = new pg.Client({ connectionString: cluster.url, ssl: { rejectUnauthorized: false } });
  await admin.connect();
  try {
    await admin.query('create database mtls');
    await admin.query('create database cli');
  } finally {
    await admin.end();
  }
}, 60_000);

afterAll(async () => {
  await cluster?.stop();
  pki?.cleanup();
});

/** A URL of the TLS cluster: `host` and `database` given, query parameters from `params`. */
function tlsUrl(host: 'localhost' | '127.0.0.1', params: Record<string, string>, database = 'postgres'): string {
  const url = new URL(`postgres://postgres@${host}:${cluster.port}/${database}`);
  for (const [key, value] of Object.entries(params)) url.searchParams.set(key, value);
  return url.toString();
}

/** The shared plain cluster's URL with `params`. */
function plainUrl(params: Record<string, string>): string {
  const url = new URL(inject('postgresUrl'));
  for (const [key, value] of Object.entries(params)) url.searchParams.set(key, value);
  return url.toString();
}

/** Connects through the exporter's pool and says whether the session is encrypted, as the server sees it. */
async function encrypted(url: string): Promise<boolean> {
  const pool = createPool(url, silentLogger, { max: 1 });
  try {
    const { rows } = await pool.query<{ ssl: boolean }>('select ssl from pg_stat_ssl where pid = pg_backend_pid()');
    return rows[0]!.ssl;
  } finally {
    await pool.end();
  }
}

/** The error a connection through the exporter's pool fails with. */
async function connectError(url: string): Promise<Error> {
  const pool = createPool(url, silentLogger, { max: 1 });
  try {
    await pool.query('select 1');
  } catch (err) {
    return err as Error;
  } finally {
    await pool.end();
  }
  throw new Error(`expected the connection to ${url} to fail`);
}

describe('sslmode against a server with TLS', () => {
  it('require connects encrypted without verifying the certificate', async () => {
    expect(await encrypted(tlsUrl('127.0.0.1', { sslmode: 'require' }))).toBe(true);
  });

  it('verify-full connects with the CA as sslrootcert and the name the certificate holds', async () => {
    expect(await encrypted(tlsUrl('localhost', { sslmode: 'verify-full', sslrootcert: pki.caFile }))).toBe(true);
  });

  it('verify-full without the CA fails, naming the database and the certificate problem', async () => {
    const err = await connectError(tlsUrl('localhost', { sslmode: 'verify-full' }));
    expect(err).toBeInstanceOf(DatabaseError);
    expect(err.message).toBe(
      `TLS to localhost:${cluster.port}/postgres failed (sslmode=verify-full, roots from the system's CA store): ` +
        "the server's certificate does not chain to a trusted root; set sslrootcert (or PGSSLROOTCERT) to the CA that signed it",
    );
    // The server sends its CA along (ssl_ca_file): the chain ends in a root the client does not trust.
    expect(describeError(err)).toContain('← self-signed certificate in certificate chain (SELF_SIGNED_CERT_IN_CHAIN)');
  });

  it('verify-ca accepts a host name the certificate does not hold, verify-full does not', async () => {
    expect(await encrypted(tlsUrl('127.0.0.1', { sslmode: 'verify-ca', sslrootcert: pki.caFile }))).toBe(true);
    const err = await connectError(tlsUrl('127.0.0.1', { sslmode: 'verify-full', sslrootcert: pki.caFile }));
    expect(err.message).toBe(
      `TLS to 127.0.0.1:${cluster.port}/postgres failed (sslmode=verify-full, roots from ${pki.caFile}): ` +
        "the server's certificate does not hold the host name; connect by a name it holds, or use sslmode=verify-ca to check the chain only",
    );
    expect(describeError(err)).toContain('(ERR_TLS_CERT_ALTNAME_INVALID)');
  });

  it('verify-ca refuses a certificate from another CA', async () => {
    const other = createTestPki();
    try {
      const err = await connectError(tlsUrl('localhost', { sslmode: 'verify-ca', sslrootcert: other.caFile }));
      expect(err.message).toContain(`TLS to localhost:${cluster.port}/postgres failed (sslmode=verify-ca, roots from ${other.caFile}): `);
      expect(err.message).toContain('does not chain to a trusted root');
    } finally {
      other.cleanup();
    }
  });

  it('prefer (the default) and allow end up encrypted on a server that refuses plain connections', async () => {
    expect(await encrypted(tlsUrl('127.0.0.1', {}))).toBe(true);
    expect(await encrypted(tlsUrl('127.0.0.1', { sslmode: 'allow' }))).toBe(true);
  });

  it('disable does not encrypt: this server refuses it', async () => {
    const err = await connectError(tlsUrl('127.0.0.1', { sslmode: 'disable' }));
    expect(err.message).toContain('no encryption');
  });

  it('sends the client certificate of sslcert and sslkey (mutual TLS)', async () => {
    const withoutCert = await connectError(tlsUrl('localhost', { sslmode: 'verify-full', sslrootcert: pki.caFile }, 'mtls'));
    expect(withoutCert.message).toMatch(/certificate/i);
    const url = tlsUrl('localhost', { sslmode: 'verify-full', sslrootcert: pki.caFile, sslcert: pki.clientCertFile, sslkey: pki.clientKeyFile }, 'mtls');
    const pool = createPool(url, silentLogger, { max: 1 });
    try {
      const { rows } = await pool.query<{ ssl: boolean; client_dn: string }>('select ssl, client_dn from pg_stat_ssl where pid = pg_backend_pid()');
      expect(rows[0]).toEqual({ ssl: true, client_dn: '/CN=analytics-exporter test client' });
    } finally {
      await pool.end();
    }
  });
});

describe('sslmode against a server without TLS', () => {
  it('prefer falls back to a plain connection', async () => {
    expect(await encrypted(plainUrl({ sslmode: 'prefer' }))).toBe(false);
    expect(await encrypted(plainUrl({}))).toBe(false);
  });

  it('disable is plain', async () => {
    expect(await encrypted(plainUrl({ sslmode: 'disable' }))).toBe(false);
  });

  it('require fails, naming the database', async () => {
    const err = await connectError(plainUrl({ sslmode: 'require' }));
    expect(err.message).toMatch(/^TLS to 127\.0\.0\.1:\d+\/postgres failed \(sslmode=require\): the server does not accept TLS; /);
    expect(describeError(err)).toContain('← The server does not support SSL connections');
  });
});

describe('the CLI with DATABASE_URL …?sslmode=require', () => {
  it('migrates over TLS with only JSON log lines on stderr, the URL winning over PGSSLMODE', async () => {
    // PGSSLMODE=disable would be refused by this server: connecting shows the URL's sslmode won.
    const r = await runCli(['migrate'], {
      DATABASE_URL: `postgres://postgres@localhost:${cluster.port}/cli?sslmode=require`,
      PGSSLMODE: 'disable',
      LOG_LEVEL: 'info',
    });
    expect(r.stdout).toMatch(/^applied: /);
    expect(r.code).toBe(0);
    expect(r.stderr).not.toContain('SECURITY WARNING');
    const lines = r.stderr.split('\n').filter((line) => line !== '');
    for (const line of lines) expect(() => JSON.parse(line) as unknown, line).not.toThrow();
  });
});
