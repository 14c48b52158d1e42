/**
 * What DATABASE_URL holds beside the address, in either of libpq's forms:
 * - its TLS settings the way libpq reads them: `sslmode`, `sslrootcert`, `sslcert` and `sslkey`
 *   from the URL's query or from libpq's own PGSSLMODE, PGSSLROOTCERT, PGSSLCERT and PGSSLKEY (the
 *   URL wins). The files stay paths here; src/db/tls.ts reads them and turns the settings into
 *   the `ssl` option of each pg connection attempt;
 * - its credentials: masked where the URL is shown, listed to be masked everywhere else.
 */
import { ConfigError } from '../errors.js';
import type { SettingFile } from './setting-file.js';

export const SSL_MODES = ['disable', 'allow', 'prefer', 'require', 'verify-ca', 'verify-full'] as const;
export type SslMode = (typeof SSL_MODES)[number];

/** libpq's default sslmode. */
export const DEFAULT_SSL_MODE: SslMode = 'prefer';

/** The URL query parameters read here; every other `ssl*` parameter is refused by name. */
const SSL_PARAMETERS = ['sslmode', 'sslrootcert', 'sslcert', 'sslkey'] as const;
type SslParameter = (typeof SSL_PARAMETERS)[number];

/** The environment variable standing in for each URL parameter, as in libpq. */
const SSL_VARIABLES: Record<SslParameter, string> = {
  sslmode: 'PGSSLMODE',
  sslrootcert: 'PGSSLROOTCERT',
  sslcert: 'PGSSLCERT',
  sslkey: 'PGSSLKEY',
};

/** TLS settings of a database connection, files not read (src/db/tls.ts `readDatabaseTls` reads them). */
export interface DatabaseTlsSettings {
  mode: SslMode;
  /** Roots trusted when verifying: the `sslrootcert` file, or the system's CA store. */
  roots: SettingFile | 'system';
  /** Client certificate and key for mutual TLS (`sslcert` and `sslkey`). */
  client?: { cert: SettingFile; key: SettingFile };
}

/** libpq's variables, as {@link databaseTlsSettings} reads them; unset or empty means absent. */
export type SslEnvironment = Partial<Record<'PGSSLMODE' | 'PGSSLROOTCERT' | 'PGSSLCERT' | 'PGSSLKEY', string | undefined>>;

/**
 * Resolves the TLS settings of a libpq-style URL: its `sslmode`, `sslrootcert`, `sslcert` and
 * `sslkey` query parameters, each defaulting to libpq's variable (PGSSLMODE …), then to libpq's
 * default (`prefer`, system roots, no client certificate). No file is read.
 *
 * As libpq: `sslrootcert=system` means the system's CA store and requires `verify-full` (it is
 * the default mode then); `require` with an `sslrootcert` file verifies the chain like `verify-ca`.
 * Unlike libpq, no file under `~/.postgresql` is read: roots and client certificates are named
 * explicitly, and `sslcert` and `sslkey` are set together.
 *
 * @param url the URL as configured; it must parse with `new URL()`.
 * @param env libpq's variables (usually `process.env`); the URL's parameters win over them.
 * @returns the URL without its `ssl*` parameters (for pg) and the {@link DatabaseTlsSettings}.
 * @throws {ConfigError} naming DATABASE_URL or the PGSSL* variable: an unknown `sslmode`, an
 *   `ssl*` parameter this module does not implement, `sslcert` without `sslkey` (or the reverse),
 *   `sslrootcert=system` with a mode weaker than `verify-full`. Messages never show the URL (it
 *   may hold a password).
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
    // As libpq: any CA of the system's store can sign a certificate for any name, so only
    // checking the host name makes trusting the store safe.
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

/** Where a value came from, for messages: `DATABASE_URL parameter sslmode` or `PGSSLMODE`. */
interface Sourced {
  value: string;
  /** The variable a config error names. */
  variable: string;
  /** How messages name it. */
  label: string;
}

function fileOf(setting: Sourced): SettingFile {
  return { file: setting.value, variable: setting.variable, at: '', key: setting.label, shown: JSON.stringify(setting.value) };
}

/** libpq's keywords whose value is a secret: the password and the client key's passphrase. */
const SECRET_KEYWORDS = '(?:ssl)?password';

/** A secret keyword's value in libpq's keyword form: single-quoted (`\'` and `\\` escaped, maybe unterminated) or a run of non-spaces (`\` escaping the next character). */
const KEYWORD_SECRET = new RegExp(`(^|\\s)(${SECRET_KEYWORDS}\\s*=\\s*)(?:'(?:[^'\\\\]|\\\\[\\s\\S]?)*'?|(?:[^\\s\\\\]|\\\\[\\s\\S]?)+)`, 'g');

/** A secret parameter in a URL's query. */
const QUERY_SECRET = new RegExp(`([?&]${SECRET_KEYWORDS}=)[^&#]*`, 'g');

/**
 * A DATABASE_URL as error messages show it, in either of libpq's forms: a URL loses its user info
 * (`postgres://***@host/db`, up to the last `@` when the URL does not parse: libpq accepts hosts
 * lists and characters URL() refuses) and the value of a `password` or `sslpassword` parameter;
 * the keyword form (`host=db password='s3 cr\'t' dbname=x`) loses the value of those keywords,
 * quoted or not (`password=***`). Everything else is kept, so the message still shows what is wrong.
 *
 * @param value DATABASE_URL as given.
 * @returns the text with every credential replaced by `***`.
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

/** Undoes libpq's quoting of a keyword value: the surrounding quotes, and `\` before any character. */
function unquoteKeywordValue(value: string): string {
  const inner = value.startsWith("'") ? value.slice(1, value.endsWith("'") && value.length > 1 ? -1 : undefined) : value;
  return inner.replace(/\\([\s\S])/g, '$1');
}

/**
 * The credentials a DATABASE_URL holds, in either of libpq's forms, to be masked wherever they
 * might come back (src/redact.ts): a URL's password (as written and percent-decoded) and its
 * `password` / `sslpassword` parameters; the keyword form's `password` and `sslpassword` values,
 * unquoted.
 *
 * @param value DATABASE_URL as given.
 * @returns the secrets found, none empty; `[]` when there are none.
 */
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
