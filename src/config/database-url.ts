/**
 * What DATABASE_URL holds beside the address, in either of libpq's forms: its TLS settings as libpq
 * reads them (the URL's `ssl*` parameters, else PGSSL*; files stay paths, src/db/tls.ts reads
 * them), and its credentials, masked where the URL is shown and listed to be masked elsewhere. See
 * docs/design/database-tls.md.
 */
import { ConfigError } from '../errors.js';
import type { SettingFile } from './setting-file.js';

export const SSL_MODES = ['disable', 'allow', 'prefer', 'require', 'verify-ca', 'verify-full'] as const;
export type SslMode = (typeof SSL_MODES)[number];

/** libpq's default sslmode. */
export const DEFAULT_SSL_MODE: SslMode = 'prefer';

/** Every other `ssl*` parameter is refused by name. */
const SSL_PARAMETERS = ['sslmode', 'sslrootcert', 'sslcert', 'sslkey'] as const;
type SslParameter = (typeof SSL_PARAMETERS)[number];

const SSL_VARIABLES: Record<SslParameter, string> = {
  sslmode: 'PGSSLMODE',
  sslrootcert: 'PGSSLROOTCERT',
  sslcert: 'PGSSLCERT',
  sslkey: 'PGSSLKEY',
};

/** TLS settings of a database connection, files not read. */
export interface DatabaseTlsSettings {
  mode: SslMode;
  /** Trusted when verifying. */
  roots: SettingFile | 'system';
  /** For mutual TLS. */
  client?: { cert: SettingFile; key: SettingFile };
}

/** libpq's variables; unset or empty means absent. */
export type SslEnvironment = Partial<Record<'PGSSLMODE' | 'PGSSLROOTCERT' | 'PGSSLCERT' | 'PGSSLKEY', string | undefined>>;

/**
 * The TLS settings of a URL that parses with `new URL()`: each `ssl*` parameter, else libpq's
 * variable in `env`, else libpq's default (`prefer`, system roots). No file is read; no message
 * shows the URL.
 *
 * @returns the URL without its `ssl*` parameters, and the settings.
 * @throws {ConfigError} naming DATABASE_URL or the PGSSL* variable at fault.
 */
export function databaseTlsSettings(url: string, env: SslEnvironment = {}): { url: string; tls: DatabaseTlsSettings } {
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
    // Any public CA can vouch for any name: only checking the host name makes trusting them safe.
    throw new ConfigError(
      modeSetting!.variable,
      `${modeSetting!.label} must be verify-full with ${rootSetting.label}=system (any public CA could vouch for another server); got ${JSON.stringify(mode)}`,
    );
  }

  const certSetting = pick('sslcert');
  const keySetting = pick('sslkey');
  if ((certSetting === undefined) !== (keySetting === undefined)) {
    const given = (certSetting ?? keySetting)!;
    const missing = certSetting === undefined ? 'sslcert (or PGSSLCERT)' : 'sslkey (or PGSSLKEY)';
    throw new ConfigError(given.variable, `${given.label} needs ${missing} too: a client certificate and its key are set together`);
  }

  const tls: DatabaseTlsSettings = { mode, roots: rootSetting === undefined || systemRoots ? 'system' : fileOf(rootSetting) };
  if (certSetting !== undefined && keySetting !== undefined) tls.client = { cert: fileOf(certSetting), key: fileOf(keySetting) };

  if (fromUrl.size > 0) for (const parameter of SSL_PARAMETERS) parsed.searchParams.delete(parameter);
  return { url: fromUrl.size > 0 ? parsed.toString() : url, tls };
}

/** A value and where it came from, for messages. */
interface Sourced {
  value: string;
  variable: string;
  /** `DATABASE_URL parameter sslmode` or `PGSSLMODE`. */
  label: string;
}

function fileOf(setting: Sourced): SettingFile {
  return { file: setting.value, variable: setting.variable, at: '', key: setting.label, shown: JSON.stringify(setting.value) };
}

/** The password and the client key's passphrase. */
const SECRET_KEYWORDS = '(?:ssl)?password';

/** A secret keyword's value in libpq's keyword form, quoted or not. */
const KEYWORD_SECRET = new RegExp(`(^|\\s)(${SECRET_KEYWORDS}\\s*=\\s*)(?:'(?:[^'\\\\]|\\\\[\\s\\S]?)*'?|(?:[^\\s\\\\]|\\\\[\\s\\S]?)+)`, 'g');

const QUERY_SECRET = new RegExp(`([?&]${SECRET_KEYWORDS}=)[^&#]*`, 'g');

/**
 * DATABASE_URL as messages show it, every credential `***`: a URL's user info (up to the last `@`
 * when it does not parse) and `password`/`sslpassword`; the keyword form's values of those.
 */
export function maskDatabaseUrl(value: string): string {
  if (!/^[a-z][a-z0-9+.-]*:\/\//i.test(value)) return value.replace(KEYWORD_SECRET, '$1$2***');
  if (URL.canParse(value)) {
    const url = new URL(value);
    if (url.username !== '' || url.password !== '') {
      url.username = '***';
      url.password = '';
    }
    return url.href.replace(QUERY_SECRET, '$1***');
  }
  return value.replace(/^([a-z][a-z0-9+.-]*:\/\/)[\s\S]*@/i, '$1***@').replace(QUERY_SECRET, '$1***');
}

/** Undoes libpq's quoting of a keyword value. */
function unquoteKeywordValue(value: string): string {
  const inner = value.startsWith("'") ? value.slice(1, value.endsWith("'") && value.length > 1 ? -1 : undefined) : value;
  return inner.replace(/\\([\s\S])/g, '$1');
}

/** The credentials DATABASE_URL holds (a password also percent-decoded), none empty, to be masked everywhere. */
export function databaseSecrets(value: string): string[] {
  const secrets: string[] = [];
  const decoded = (text: string) => {
    try {
      return decodeURIComponent(text);
    } catch {
      return text;
    }
  };
  if (!/^[a-z][a-z0-9+.-]*:\/\//i.test(value)) {
    for (const match of value.matchAll(KEYWORD_SECRET)) secrets.push(unquoteKeywordValue(match[0].slice(match[1]!.length + match[2]!.length)));
  } else if (URL.canParse(value)) {
    const url = new URL(value);
    secrets.push(url.password, decoded(url.password));
    for (const parameter of ['password', 'sslpassword']) for (const given of url.searchParams.getAll(parameter)) secrets.push(given);
  } else {
    const userInfo = /^[a-z][a-z0-9+.-]*:\/\/([\s\S]*)@/i.exec(value)?.[1] ?? '';
    const password = userInfo.includes(':') ? userInfo.slice(userInfo.indexOf(':') + 1) : '';
    secrets.push(password, decoded(password));
    for (const match of value.matchAll(QUERY_SECRET)) secrets.push(decoded(match[0].slice(match[1]!.length)));
  }
  return [...new Set(secrets)].filter((s) => s !== '');
}
