import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** PEM files of a throwaway PKI: a CA, a server certificate for 127.0.0.1/localhost, a client certificate. */
export interface TestPki {
  dir: string;
  caFile: string;
  serverCertFile: string;
  serverKeyFile: string;
  clientCertFile: string;
  clientKeyFile: string;
  /** The same files' contents. */
  ca: string;
  serverCert: string;
  serverKey: string;
  clientCert: string;
  clientKey: string;
  cleanup(): void;
}

function openssl(dir: string, args: string[]): void {
  try {
    execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
  } catch (err) {
    const e = err as { code?: string; stderr?: Buffer };
    if (e.code === 'ENOENT') throw new Error('openssl is not installed: apt-get install openssl (the mutual TLS tests need it)');
    throw new Error(`openssl ${args[0]} failed: ${e.stderr?.toString() ?? String(err)}`);
  }
}

/** Options of {@link createTestPki}. */
export interface TestPkiOptions {
  /** subjectAltName of the server certificate; default `DNS:localhost,IP:127.0.0.1`. */
  serverAltNames?: string;
  /** Key of the server certificate: `ec` (P-256, default) or `rsa` (2048 bits: RSA key exchange suites need one). */
  serverKey?: 'ec' | 'rsa';
}

/**
 * Generates a CA and two leaf certificates (server, client) with the openssl CLI, EC P-256 (the
 * server's RSA 2048 when asked), valid for one day. Synchronous; takes well under a second.
 *
 * @throws when openssl is missing or fails, saying how to install it.
 */
export function createTestPki(options: TestPkiOptions = {}): TestPki {
  const dir = mkdtempSync(join(tmpdir(), 'ae-pki-'));
  const key = (name: string, type: 'ec' | 'rsa' = 'ec') =>
    openssl(dir, [
      'genpkey',
      '-algorithm',
      type === 'rsa' ? 'RSA' : 'EC',
      '-pkeyopt',
      type === 'rsa' ? 'rsa_keygen_bits:2048' : 'ec_paramgen_curve:P-256',
      '-out',
      `${name}.key`,
    ]);
  key('ca');
  openssl(dir, ['req', '-x509', '-new', '-key', 'ca.key', '-subj', '/CN=analytics-exporter test CA', '-days', '1', '-out', 'ca.pem']);
  const leaf = (name: string, subject: string, ext: string, type: 'ec' | 'rsa' = 'ec') => {
    key(name, type);
    openssl(dir, ['req', '-new', '-key', `${name}.key`, '-subj', subject, '-out', `${name}.csr`]);
    writeFileSync(join(dir, `${name}.ext`), ext);
    openssl(dir, [
      'x509',
      '-req',
      '-in',
      `${name}.csr`,
      '-CA',
      'ca.pem',
      '-CAkey',
      'ca.key',
      '-CAcreateserial',
      '-days',
      '1',
      '-extfile',
      `${name}.ext`,
      '-out',
      `${name}.pem`,
    ]);
  };
  leaf('server', '/CN=localhost', `subjectAltName=${options.serverAltNames ?? 'DNS:localhost,IP:127.0.0.1'}\nextendedKeyUsage=serverAuth\n`, options.serverKey);
  leaf('client', '/CN=analytics-exporter test client', 'extendedKeyUsage=clientAuth\n');
  const file = (name: string) => join(dir, name);
  const read = (name: string) => readFileSync(file(name), 'utf8');
  return {
    dir,
    caFile: file('ca.pem'),
    serverCertFile: file('server.pem'),
    serverKeyFile: file('server.key'),
    clientCertFile: file('client.pem'),
    clientKeyFile: file('client.key'),
    ca: read('ca.pem'),
    serverCert: read('server.pem'),
    serverKey: read('server.key'),
    clientCert: read('client.pem'),
    clientKey: read('client.key'),
    cleanup: () => rmSync(dir, { recursive: true, force: true }),
  };
}
