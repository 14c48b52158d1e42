/**
 * PostgreSQL TLS the way libpq does it: `sslmode`, `sslrootcert`, `sslcert`, `sslkey` (resolved by
 * src/config/database-url.ts), their files read here, turned into the `ssl` option of each pg
 * connection attempt. pg never sees an `ssl*` parameter, and always gets an explicit `ssl` option.
 * Modes and fallbacks: docs/design/database-tls.md.
 */
import { readFileSync } from 'node:fs';
import tls from 'node:tls';
import { databaseTlsSettings, type DatabaseTlsSettings, type SettingFile, type SslEnvironment, type SslMode } from '../config.js';
import { ConfigError } from '../errors.js';

export type { SslEnvironment, SslMode } from '../config.js';

interface PemFile {
  file: string;
  pem: string;
}

/** A connection's TLS settings, files read. */
export interface DatabaseTls {
  mode: SslMode;
  /** Trusted when verifying. */
  roots: PemFile | 'system';
  /** `sslcert` and `sslkey`. */
  client?: { cert: PemFile; key: PemFile };
}

/** As for the embedded database on a loopback port. */
export const PLAIN_TLS: DatabaseTls = { mode: 'disable', roots: 'system' };

/** A URL without `ssl*` parameters, and its TLS. */
export interface DatabaseTarget {
  url: string;
  tls: DatabaseTls;
}

/** Reads each TLS file once. @throws {ConfigError} naming the setting, for a file unreadable or without PEM. */
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
 * {@link databaseTlsSettings} (the URL's parameters over `env`'s PGSSL*) with their files read.
 * @throws {ConfigError} as {@link databaseTlsSettings} and {@link readDatabaseTls}; never shows the URL.
 */
export function resolveDatabaseTarget(url: string, env: SslEnvironment = {}, readFile: (path: string) => string = readPem): DatabaseTarget {
  const settings = databaseTlsSettings(url, env);
  return { url: settings.url, tls: readDatabaseTls(settings.tls, readFile) };
}

function readPem(path: string): string {
  return readFileSync(path, 'utf8');
}

/** `false` for plain. */
export type SslAttempt = false | tls.ConnectionOptions;

/** In order: `prefer` TLS then plain, `allow` plain then TLS, other modes one attempt. */
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

/** Verifies the chain for verify-* or an `sslrootcert` file (as libpq), the host name for verify-full. */
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

/** Node's default CAs plus the system's store (Node ≥ 22.15); undefined before: Node's default. */
function systemRoots(): string[] | undefined {
  const getCACertificates = (tls as { getCACertificates?: (type?: string) => string[] }).getCACertificates;
  if (getCACertificates === undefined) return undefined;
  cachedSystemRoots ??= [...new Set([...getCACertificates('default'), ...getCACertificates('system')])];
  return cachedSystemRoots;
}

/** The server answered the SSLRequest with 'N'. */
const TLS_REFUSED_MESSAGE = 'The server does not support SSL connections';
/** invalid_authorization_specification: no pg_hba.conf line for this connection. */
const HBA_REJECTED_SQLSTATE = '28000';

/** Whether libpq would make the next attempt: `prefer` after TLS refused, `allow` after plain rejected. */
export function fallsBack(mode: SslMode, attempt: SslAttempt, err: unknown): boolean {
  const e = err as { message?: unknown; code?: unknown } | undefined;
  if (mode === 'prefer' && attempt !== false) return e?.message === TLS_REFUSED_MESSAGE;
  if (mode === 'allow' && attempt === false) return e?.code === HBA_REJECTED_SQLSTATE;
  return false;
}

export function isTlsFailure(err: unknown): boolean {
  const e = err as { message?: unknown; code?: unknown } | undefined;
  if (e?.message === TLS_REFUSED_MESSAGE) return true;
  const code = typeof e?.code === 'string' ? e.code : '';
  return /CERT|SELF_SIGNED|UNABLE_TO_|^ERR_TLS_|^ERR_SSL_/.test(code);
}

/** `sslmode=verify-full, roots from /etc/ca.pem`. */
export function describeTls(settings: DatabaseTls | DatabaseTlsSettings): string {
  const verifying = settings.mode === 'verify-ca' || settings.mode === 'verify-full' || settings.roots !== 'system';
  if (!verifying || settings.mode === 'disable') return `sslmode=${settings.mode}`;
  return `sslmode=${settings.mode}, roots ${settings.roots === 'system' ? "from the system's CA store" : `from ${settings.roots.file}`}`;
}
