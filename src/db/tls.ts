/**
 * PostgreSQL TLS the way libpq does it: `sslmode`, `sslrootcert`, `sslcert` and `sslkey` from
 * the DATABASE_URL's query or from libpq's own PGSSLMODE, PGSSLROOTCERT, PGSSLCERT and PGSSLKEY
 * (the URL wins), turned into the `ssl` option of each pg connection attempt.
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
import { ConfigError } from '../errors.js';

export const SSL_MODES = ['disable', 'allow', 'prefer', 'require', 'verify-ca', 'verify-full'] as const;
export type SslMode = (typeof SSL_MODES)[number];

/** libpq's default sslmode. */
export const DEFAULT_SSL_MODE: SslMode = 'prefer';

/** The URL query parameters read here; every other `ssl*` parameter is refused by name. */
const SSL_PARAMETERS = ['sslmode', 'sslrootcert', 'sslcert', 'sslkey'] as const;
type SslParameter = (typeof SSL_PARAMETERS)[number];

/** The environment variable standing in for each URL parameter, as in libpq. */
export const SSL_VARIABLES: Record<SslParameter, string> = {
  sslmode: 'PGSSLMODE',
  sslrootcert: 'PGSSLROOTCERT',
  sslcert: 'PGSSLCERT',
  sslkey: 'PGSSLKEY',
};

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

/** What to connect to: a URL pg may read as it is (no `ssl*` parameter) and its TLS settings. */
export interface DatabaseTarget {
  url: string;
  tls: DatabaseTls;
}

/** Plain connections, as for the embedded database on a loopback port. */
export const PLAIN_TLS: DatabaseTls = { mode: 'disable', roots: 'system' };

/** libpq's variables, as {@link resolveDatabaseTarget} reads them; unset or empty means absent. */
export type SslEnvironment = Partial<Record<'PGSSLMODE' | 'PGSSLROOTCERT' | 'PGSSLCERT' | 'PGSSLKEY', string | undefined>>;

/** Where a value came from, for messages: `DATABASE_URL parameter sslmode` or `PGSSLMODE`. */
interface Sourced {
  value: string;
  /** The variable named by a config error. */
  variable: string;
  /** How messages name it. */
  label: string;
}

/**
 * Resolves the TLS settings of a libpq-style URL: its `sslmode`, `sslrootcert`, `sslcert` and
 * `sslkey` query parameters, each defaulting to libpq's variable (PGSSLMODE …), then to libpq's
 * default (`prefer`, system roots, no client certificate). Files are read here.
 *
 * As libpq: `sslrootcert=system` means the system's CA store and requires `verify-full` (it is
 * the default mode then); `require` with an `sslrootcert` file verifies the chain like `verify-ca`.
 * Unlike libpq, no file under `~/.postgresql` is read: roots and client certificates are named
 * explicitly, and `sslcert` and `sslkey` are set together.
 *
 * @param url the URL as configured; it must parse with `new URL()`.
 * @param env libpq's variables (usually `process.env`); the URL's parameters win over them.
 * @returns the URL without its `ssl*` parameters (for pg) and the resolved {@link DatabaseTls}.
 * @throws {ConfigError} naming DATABASE_URL or the PGSSL* variable: an unknown `sslmode`, an
 *   `ssl*` parameter this module does not implement, `sslcert` without `sslkey` (or the reverse),
 *   `sslrootcert=system` with a mode weaker than `verify-full`, a file that cannot be read or
 *   holds no PEM block. Messages never show the URL (it may hold a password).
 */
export function resolveDatabaseTarget(url: string, env: SslEnvironment = {}, readFile: (path: string) => string = readPem): DatabaseTarget {
  const parsed = new URL(url);
  const fromUrl = new Map<SslParameter, string>();
  const unsupported: string[] = [];
  for (const [key, value] of parsed.searchParams) {
    if ((SSL_PARAMETERS as readonly string[]).includes(key)) fromUrl.set(key as SslParameter, value);
    else if (/^ssl/i.test(key)) unsupported.push(key);
  }
  if (unsupported.length > 0) {
    throw new ConfigError(
      'DATABASE_URL',
      `DATABASE_URL parameter ${unsupported.join(', ')} is not supported (supported: ${SSL_PARAMETERS.join(', ')}; pg's ssl=true is written sslmode=verify-full)`,
    );
  }

  const pick = (parameter: SslParameter): Sourced | undefined => {
    const inUrl = fromUrl.get(parameter);
    if (inUrl !== undefined && inUrl !== '') return { value: inUrl, variable: 'DATABASE_URL', label: `DATABASE_URL parameter ${parameter}` };
    const variable = SSL_VARIABLES[parameter];
    const inEnv = env[variable as keyof SslEnvironment];
    if (inEnv !== undefined && inEnv !== '') return { value: inEnv, variable, label: variable };
    return undefined;
  };

  const modeSetting = pick('sslmode');
  if (modeSetting !== undefined && !(SSL_MODES as readonly string[]).includes(modeSetting.value)) {
    throw new ConfigError(modeSetting.variable, `${modeSetting.label} must be one of ${SSL_MODES.join(', ')}; got ${JSON.stringify(modeSetting.value)}`);
  }
  const rootSetting = pick('sslrootcert');
  const systemRoots = rootSetting?.value === 'system';
  const mode = (modeSetting?.value as SslMode | undefined) ?? (systemRoots ? 'verify-full' : DEFAULT_SSL_MODE);
  if (systemRoots && mode !== 'verify-full') {
    // As libpq: any CA of the system's store can sign a certificate for any name, so only
    // checking the host name makes trusting the store safe.
    throw new ConfigError(
      modeSetting!.variable,
      `${modeSetting!.label} must be verify-full with ${rootSetting.label}=system (any public CA could vouch for another server); got ${JSON.stringify(mode)}`,
    );
  }

  const read = (setting: Sourced): PemFile => {
    let pem: string;
    try {
      pem = readFile(setting.value);
    } catch (err) {
      const reason = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
      throw new ConfigError(setting.variable, `${setting.label} must name a readable PEM file; cannot read ${setting.value} (${reason})`, { cause: err });
    }
    if (!pem.includes('-----BEGIN ')) {
      throw new ConfigError(setting.variable, `${setting.label} must name a PEM file; ${setting.value} holds no "-----BEGIN" block`);
    }
    return { file: setting.value, pem };
  };

  const certSetting = pick('sslcert');
  const keySetting = pick('sslkey');
  if ((certSetting === undefined) !== (keySetting === undefined)) {
    const given = (certSetting ?? keySetting)!;
    const missing = certSetting === undefined ? 'sslcert (or PGSSLCERT)' : 'sslkey (or PGSSLKEY)';
    throw new ConfigError(given.variable, `${given.label} needs ${missing} too: a client certificate and its key are set together`);
  }

  const result: DatabaseTls = { mode, roots: rootSetting === undefined || systemRoots ? 'system' : read(rootSetting) };
  if (certSetting !== undefined && keySetting !== undefined) result.client = { cert: read(certSetting), key: read(keySetting) };

  if (fromUrl.size > 0) for (const parameter of SSL_PARAMETERS) parsed.searchParams.delete(parameter);
  return { url: fromUrl.size > 0 ? parsed.toString() : url, tls: result };
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
export function describeTls(settings: DatabaseTls): string {
  const verifying = settings.mode === 'verify-ca' || settings.mode === 'verify-full' || settings.roots !== 'system';
  if (!verifying || settings.mode === 'disable') return `sslmode=${settings.mode}`;
  return `sslmode=${settings.mode}, roots ${settings.roots === 'system' ? "from the system's CA store" : `from ${settings.roots.file}`}`;
}
