/**
 * PostgreSQL TLS the way libpq does it: `sslmode`, `sslrootcert`, `sslcert` and `sslkey` from
 * the DATABASE_URL's query or from libpq's own PGSSLMODE, PGSSLROOTCERT, PGSSLCERT and PGSSLKEY
 * (the URL wins; the configuration resolves which, src/config/database.ts), their files read here,
 * turned into the `ssl` option of each pg connection attempt.
 *
 * pg's own reading of these parameters differs from libpq (`require` verifies the certificate
 * and host name, a warning is printed on stderr), so they are taken out of the URL before pg
 * sees it and pg is always given an explicit `ssl` option (it never falls back to PGSSLMODE).
 *
 * Modes, as libpq documents them:
 * - `disable`: plain only;
 * - `allow`: plain first, TLS (unverified) when the server rejects a plain connection;
 * - `prefer` (the default): TLS (unverified) first, plain when the server refuses TLS;
 * - `require`: TLS, encrypted but not verified (the chain is verified when `sslrootcert` is set);
 * - `verify-ca`: TLS, the certificate chain verified, not the host name;
 * - `verify-full`: TLS, chain and host name verified.
 * Verifying modes trust `sslrootcert`, or the system's CA store when it is unset or `system`.
 */
import { readFileSync } from 'node:fs';
import tls from 'node:tls';
import { databaseTlsSettings, type DatabaseTlsSettings, type SettingFile, type SslEnvironment, type SslMode } from '../config.js';
import { ConfigError } from '../errors.js';

export type { SslEnvironment, SslMode } from '../config.js';

/** A file read for TLS: its path (for messages) and its PEM text. */
export interface PemFile {
  file: string;
  pem: string;
}

/** Resolved TLS settings of a database connection: files already read. */
export interface DatabaseTls {
  mode: SslMode;
  /** Roots trusted when verifying: the `sslrootcert` file, or the system's CA store. */
  roots: PemFile | 'system';
  /** Client certificate and key for mutual TLS (`sslcert` and `sslkey`). */
  client?: { cert: PemFile; key: PemFile };
}

/** Plain connections, as for the embedded database on a loopback port. */
export const PLAIN_TLS: DatabaseTls = { mode: 'disable', roots: 'system' };

/** What to connect to: a URL pg may read as it is (no `ssl*` parameter) and its TLS settings. */
export interface DatabaseTarget {
  url: string;
  tls: DatabaseTls;
}

/**
 * Reads the files of DATABASE_URL's TLS settings (`sslrootcert`, `sslcert`, `sslkey` or their
 * PGSSL* variables), each once: the roots first, then the certificate and its key.
 *
 * @param readFile reads a file's text; tests pass a fake.
 * @throws {ConfigError} naming DATABASE_URL or the PGSSL* variable the file came from, for a file
 *   that cannot be read or holds no PEM block.
 */
export function readDatabaseTls(settings: DatabaseTlsSettings, readFile: (path: string) => string = readPem): DatabaseTls {
  const read = (setting: SettingFile): PemFile => {
    let pem: string;
    try {
      pem = readFile(setting.file);
    } catch (err) {
      const reason = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
      throw new ConfigError(setting.variable, `${setting.key} must name a readable PEM file; cannot read ${setting.file} (${reason})`, { cause: err });
    }
    if (!pem.includes('-----BEGIN ')) {
      throw new ConfigError(setting.variable, `${setting.key} must name a PEM file; ${setting.file} holds no "-----BEGIN" block`);
    }
    return { file: setting.file, pem };
  };
  const result: DatabaseTls = { mode: settings.mode, roots: settings.roots === 'system' ? 'system' : read(settings.roots) };
  if (settings.client !== undefined) result.client = { cert: read(settings.client.cert), key: read(settings.client.key) };
  return result;
}

/**
 * A libpq-style URL's TLS settings ({@link databaseTlsSettings}: its `ssl*` parameters, else
 * libpq's PGSSL* variables, else libpq's defaults) with their files read ({@link readDatabaseTls}).
 *
 * @param url the URL as configured; it must parse with `new URL()`.
 * @param env libpq's variables (usually `process.env`); the URL's parameters win over them.
 * @returns the URL without its `ssl*` parameters (for pg) and the resolved {@link DatabaseTls}.
 * @throws {ConfigError} as {@link databaseTlsSettings} and {@link readDatabaseTls}. Messages never
 *   show the URL (it may hold a password).
 */
export function resolveDatabaseTarget(url: string, env: SslEnvironment = {}, readFile: (path: string) => string = readPem): DatabaseTarget {
  const settings = databaseTlsSettings(url, env);
  return { url: settings.url, tls: readDatabaseTls(settings.tls, readFile) };
}

function readPem(path: string): string {
  return readFileSync(path, 'utf8');
}

/** The `ssl` option of one pg connection attempt: `false` for plain. */
export type SslAttempt = false | tls.ConnectionOptions;

/**
 * The connection attempts of a mode, in order: `prefer` is TLS then plain, `allow` plain then
 * TLS, every other mode one attempt. When the first attempt of a pair is refused (see
 * {@link fallsBack}), the second is made.
 */
export function connectionAttempts(settings: DatabaseTls): SslAttempt[] {
  switch (settings.mode) {
    case 'disable':
      return [false];
    case 'allow':
      return [false, tlsOptions(settings)];
    case 'prefer':
      return [tlsOptions(settings), false];
    default:
      return [tlsOptions(settings)];
  }
}

/**
 * Node TLS options of a TLS attempt. `allow`, `prefer` and `require` encrypt without verifying,
 * unless an `sslrootcert` file is given: then the chain is verified against it (libpq does the
 * same for `require`); `verify-ca` skips only the host name check.
 */
function tlsOptions(settings: DatabaseTls): tls.ConnectionOptions {
  const options: tls.ConnectionOptions = {};
  if (settings.client) {
    options.cert = settings.client.cert.pem;
    options.key = settings.client.key.pem;
  }
  const verifyChain = settings.mode === 'verify-ca' || settings.mode === 'verify-full' || settings.roots !== 'system';
  if (!verifyChain) {
    options.rejectUnauthorized = false;
    return options;
  }
  options.rejectUnauthorized = true;
  const ca = settings.roots === 'system' ? systemRoots() : settings.roots.pem;
  if (ca !== undefined) options.ca = ca;
  if (settings.mode !== 'verify-full') options.checkServerIdentity = () => undefined;
  return options;
}

let cachedSystemRoots: string[] | undefined;

/**
 * The roots verify-* trust without `sslrootcert`, as Node's `ca` option: Node's default CAs (its
 * bundled Mozilla store and NODE_EXTRA_CA_CERTS) plus the operating system's store, where Node
 * can read it (`tls.getCACertificates('system')`, Node 22.15 and later). On older Node it is
 * `undefined`, which leaves Node's default in place (the system store joins it with
 * `--use-openssl-ca` in NODE_OPTIONS).
 */
export function systemRoots(): string[] | undefined {
  const getCACertificates = (tls as { getCACertificates?: (type?: string) => string[] }).getCACertificates;
  if (getCACertificates === undefined) return undefined;
  cachedSystemRoots ??= [...new Set([...getCACertificates('default'), ...getCACertificates('system')])];
  return cachedSystemRoots;
}

/** pg's error when the server answers an SSLRequest with 'N'. */
const TLS_REFUSED_MESSAGE = 'The server does not support SSL connections';
/** SQLSTATE invalid_authorization_specification: pg_hba.conf has no line for this connection (`hostssl`, `hostnossl`). */
const HBA_REJECTED_SQLSTATE = '28000';

/**
 * Whether a failed attempt of `mode` is retried with the next attempt: `prefer` when the
 * server refuses TLS, `allow` when the server rejects a plain connection (pg_hba.conf has only
 * `hostssl` lines for it), as libpq does.
 */
export function fallsBack(mode: SslMode, attempt: SslAttempt, err: unknown): boolean {
  const e = err as { message?: unknown; code?: unknown } | undefined;
  if (mode === 'prefer' && attempt !== false) return e?.message === TLS_REFUSED_MESSAGE;
  if (mode === 'allow' && attempt === false) return e?.code === HBA_REJECTED_SQLSTATE;
  return false;
}

/** Whether `err` is the server refusing TLS or a certificate the client did not accept. */
export function isTlsFailure(err: unknown): boolean {
  const e = err as { message?: unknown; code?: unknown } | undefined;
  if (e?.message === TLS_REFUSED_MESSAGE) return true;
  const code = typeof e?.code === 'string' ? e.code : '';
  return /CERT|SELF_SIGNED|UNABLE_TO_|^ERR_TLS_|^ERR_SSL_/.test(code);
}

/** How messages describe the TLS settings: `sslmode=verify-full, roots from /etc/ca.pem`. */
export function describeTls(settings: DatabaseTls | DatabaseTlsSettings): string {
  const verifying = settings.mode === 'verify-ca' || settings.mode === 'verify-full' || settings.roots !== 'system';
  if (!verifying || settings.mode === 'disable') return `sslmode=${settings.mode}`;
  return `sslmode=${settings.mode}, roots ${settings.roots === 'system' ? "from the system's CA store" : `from ${settings.roots.file}`}`;
}
