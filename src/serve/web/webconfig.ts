/**
 * The web configuration of `serve` (WEB_CONFIG_FILE) in prometheus/exporter-toolkit's format:
 * `tls_server_config`, `basic_auth_users`, `http_server_config.headers`. As there, unknown keys are
 * errors and relative paths are relative to the file's folder; `rate_limit` is refused, `http2:
 * true` only warned about. The file and those it names are read again when they change
 * ({@link WebConfigSource}). See docs/design/http-hardening.md, The web configuration.
 */
import { createRequire } from 'node:module';
import { readFileSync, statSync } from 'node:fs';
import { isIP } from 'node:net';
import { dirname, resolve } from 'node:path';
import { createSecureContext, type SecureContextOptions } from 'node:tls';
import { z } from 'zod';
import { ConfigError, WebConfigError } from '../../errors.js';
import { CURVES, TLS12_CIPHER_SUITES, TLS13_CIPHER_SUITES, cipherList, unservableTlsVersion } from './tls-suites.js';

/** Go's tls.ClientAuthType names. */
const CLIENT_AUTH_TYPES = ['NoClientCert', 'RequestClientCert', 'RequireAnyClientCert', 'VerifyClientCertIfGiven', 'RequireAndVerifyClientCert'] as const;
type ClientAuthType = (typeof CLIENT_AUTH_TYPES)[number];

const TLS_VERSIONS = { TLS10: 'TLSv1', TLS11: 'TLSv1.1', TLS12: 'TLSv1.2', TLS13: 'TLSv1.3' } as const;
const TLS_VERSION_NAMES = ['TLS10', 'TLS11', 'TLS12', 'TLS13'] as const;

/** The only headers exporter-toolkit lets one set; a blank value leaves the header unset. */
const headerValue = z.string().regex(/^[\t\x20-\x7e\x80-\xff]*$/, 'must be one line of printable characters');
const headersSchema = z
  .object({
    'Content-Security-Policy': headerValue.optional(),
    'X-Frame-Options': headerValue.regex(/^(|deny|sameorigin)$/i, 'must be deny or sameorigin').optional(),
    'X-Content-Type-Options': headerValue.regex(/^(|nosniff)$/i, 'must be nosniff').optional(),
    'X-XSS-Protection': headerValue.optional(),
    'Strict-Transport-Security': headerValue.optional(),
  })
  .strict();

const pem = z.string().min(1);
const tlsSchema = z
  .object({
    cert: pem.optional(),
    key: pem.optional(),
    client_ca: pem.optional(),
    cert_file: z.string().min(1).optional(),
    key_file: z.string().min(1).optional(),
    client_auth_type: z.enum(CLIENT_AUTH_TYPES).default('NoClientCert'),
    client_ca_file: z.string().min(1).optional(),
    client_allowed_sans: z.array(z.string().min(1)).min(1).optional(),
    min_version: z.enum(TLS_VERSION_NAMES).default('TLS12'),
    max_version: z.enum(TLS_VERSION_NAMES).default('TLS13'),
    cipher_suites: z.array(z.string()).optional(),
    prefer_server_cipher_suites: z.boolean().default(true),
    curve_preferences: z.array(z.string()).optional(),
  })
  .strict()
  .superRefine((t, ctx) => {
    const issue = (path: string, message: string) => ctx.addIssue({ code: 'custom', path: [path], message });
    for (const [inline, file] of [
      ['cert', 'cert_file'],
      ['key', 'key_file'],
    ] as const) {
      if (t[inline] !== undefined && t[file] !== undefined) issue(file, `set ${file} or ${inline} (inline), not both`);
      if (t[inline] === undefined && t[file] === undefined) issue(file, `${file} (or ${inline}, inline) is required`);
    }
    if (t.client_ca !== undefined && t.client_ca_file !== undefined) issue('client_ca_file', 'set client_ca_file or client_ca (inline), not both');
    if (t.client_auth_type.includes('Verify') && t.client_ca === undefined && t.client_ca_file === undefined) {
      issue('client_ca_file', 'client_ca_file is required when client_auth_type verifies client certificates');
    }
    if (t.client_allowed_sans !== undefined && t.client_auth_type !== 'RequireAnyClientCert' && t.client_auth_type !== 'RequireAndVerifyClientCert') {
      issue(
        'client_allowed_sans',
        'needs client_auth_type RequireAnyClientCert or RequireAndVerifyClientCert (the other modes admit clients without a certificate)',
      );
    }
    for (const key of ['min_version', 'max_version'] as const) {
      const why = unservableTlsVersion(t[key]);
      if (why !== undefined) issue(key, why);
    }
    if (TLS_VERSION_NAMES.indexOf(t.min_version) > TLS_VERSION_NAMES.indexOf(t.max_version)) issue('max_version', 'must not be below min_version');
    for (const name of t.cipher_suites ?? []) {
      if (!Object.hasOwn(TLS12_CIPHER_SUITES, name) && !TLS13_CIPHER_SUITES.has(name)) {
        issue('cipher_suites', `${JSON.stringify(name)} is not a cipher suite exporter-toolkit accepts (${Object.keys(TLS12_CIPHER_SUITES).join(', ')})`);
      }
    }
    for (const name of t.curve_preferences ?? []) {
      if (!Object.hasOwn(CURVES, name)) issue('curve_preferences', `${JSON.stringify(name)} is not one of ${Object.keys(CURVES).join(', ')}`);
    }
  });

const webConfigSchema = z
  .object({
    tls_server_config: tlsSchema.optional(),
    http_server_config: z.object({ http2: z.boolean().optional(), headers: headersSchema.optional() }).strict().optional(),
    basic_auth_users: z
      .record(
        z
          .string()
          .min(1)
          .regex(/^[^:]*$/, 'user names cannot contain ":"'),
        z.string().regex(/^\$2[aby]\$\d{2}\$.{53}$/, 'must be a bcrypt hash ($2a$, $2b$ or $2y$)'),
      )
      .optional(),
    rate_limit: z.unknown().optional(),
  })
  .strict()
  .superRefine((c, ctx) => {
    if (c.rate_limit !== undefined) {
      ctx.addIssue({ code: 'custom', path: ['rate_limit'], message: 'is not supported here: rate-limit in a proxy in front of the exporter instead' });
    }
  });

type TlsVersion = (typeof TLS_VERSIONS)[keyof typeof TLS_VERSIONS];

/** The validated web configuration, with file contents read. */
export interface WebConfig {
  tls?: {
    cert: string;
    key: string;
    ca?: string;
    clientAuth: ClientAuthType;
    /** client_allowed_sans. */
    allowedSans?: string[];
    minVersion: TlsVersion;
    maxVersion: TlsVersion;
    /** An OpenSSL cipher list. */
    ciphers: string;
    /** prefer_server_cipher_suites. */
    honorCipherOrder: boolean;
    /** From curve_preferences (`X25519:prime256v1`); undefined for Node's default. */
    ecdhCurve?: string;
  };
  /** Blank ones left out. */
  headers: Record<string, string>;
  /** User name → bcrypt hash; empty: no authentication. */
  users: Record<string, string>;
  /** One line each, for the log. */
  warnings: string[];
  origin: WebConfigOrigin;
}

/** The files a web configuration was read from, and their state when they were read. */
interface WebConfigOrigin {
  /** As given. */
  file: string;
  /** It and the files it names, absolute. */
  files: string[];
  /** {@link fileSignature}, each taken before the file was read. */
  signature: string;
}

/** Node's TLS server options for `tls_server_config`. Never throws; Node throws on what OpenSSL refuses. */
export function secureContextOptions(tls: NonNullable<WebConfig['tls']>): SecureContextOptions {
  return {
    cert: tls.cert,
    key: tls.key,
    ...(tls.ca !== undefined ? { ca: tls.ca } : {}),
    minVersion: tls.minVersion,
    maxVersion: tls.maxVersion,
    ciphers: tls.ciphers,
    honorCipherOrder: tls.honorCipherOrder,
    ...(tls.ecdhCurve !== undefined ? { ecdhCurve: tls.ecdhCurve } : {}),
  };
}

/** Inode, size, mtime and ctime of each file (links followed), or why it could not be seen. Never throws. */
function fileSignature(files: readonly string[]): string {
  return files
    .map((file) => {
      try {
        const s = statSync(file, { bigint: true, throwIfNoEntry: false });
        return s === undefined ? 'absent' : `${s.dev}:${s.ino}:${s.size}:${s.mtimeNs}:${s.ctimeNs}`;
      } catch (err) {
        return `error:${(err as NodeJS.ErrnoException).code ?? 'unknown'}`;
      }
    })
    .join('|');
}

/** One attempt at reading a web configuration: the files involved, and the result or the error. */
type Attempt = { files: string[]; signature: string } & ({ config: WebConfig; error?: undefined } | { error: WebConfigError; config?: undefined });

function attempt(file: string): Attempt {
  const configPath = resolve(file);
  const files = [configPath];
  // Taken before each file is read: a change after that shows at the next check.
  const signatures = [fileSignature([configPath])];
  try {
    const data = readWebConfigFile(file);
    // Watched even while they cannot be read, so their arrival shows.
    const named = namedFiles(data.tls_server_config, dirname(configPath));
    files.push(...named);
    signatures.push(...named.map((f) => fileSignature([f])));
    const signature = signatures.join('|');
    return { files, signature, config: webConfigOf(data, { file, files, signature }) };
  } catch (err) {
    if (err instanceof WebConfigError) return { files, signature: signatures.join('|'), error: err };
    throw err;
  }
}

/** The file's keys, validated; the files they name not read. */
type WebConfigFile = z.infer<typeof webConfigSchema>;

/** @throws {WebConfigError} for a file that cannot be read, bad YAML, or the first key that breaks its rule. */
function readWebConfigFile(file: string): WebConfigFile {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new WebConfigError('', `cannot read ${file} (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
  }
  let raw: unknown;
  try {
    // Loaded only here (70 modules), synchronously as this reader is.
    const { parse: parseYaml } = createRequire(import.meta.url)('yaml') as typeof import('yaml');
    raw = parseYaml(text) ?? {};
  } catch (err) {
    throw new WebConfigError('', `${file} is not valid YAML: ${(err as Error).message.split('\n')[0]}`);
  }
  const parsed = webConfigSchema.safeParse(raw);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0]!;
  const path = issue.path.join('.');
  const message =
    issue.code === 'unrecognized_keys'
      ? `unknown or unsupported key ${issue.keys.map((k) => `${path ? `${path}.` : ''}${k}`).join(', ')}`
      : `${path}: ${issue.message}`;
  throw new WebConfigError(path, `${file}: ${message}`);
}

/** The files `tls_server_config` names, resolved against `base`. */
function namedFiles(t: WebConfigFile['tls_server_config'], base: string): string[] {
  return (t ? [t.cert_file, t.key_file, t.client_ca_file] : []).filter((f) => f !== undefined).map((f) => resolve(base, f));
}

/** @throws {WebConfigError} for a named file that cannot be read, or TLS settings OpenSSL refuses. */
function webConfigOf(data: WebConfigFile, origin: WebConfigOrigin): WebConfig {
  const { file } = origin;
  const tls = data.tls_server_config && tlsOf(data.tls_server_config, file);
  const warnings: string[] = [];
  if (data.http_server_config?.http2 === true) {
    warnings.push(`${file}: http_server_config.http2 is true, but this server speaks HTTP/1.1 only (set it to false to silence this)`);
  }
  const headers = Object.fromEntries(
    Object.entries(data.http_server_config?.headers ?? {}).filter((e): e is [string, string] => e[1] !== undefined && e[1] !== ''),
  );
  return { ...(tls !== undefined ? { tls } : {}), headers, users: data.basic_auth_users ?? {}, warnings, origin };
}

/**
 * `tls_server_config` with its files read, tried on a secure context now (a key that does not
 * match its certificate). @throws {WebConfigError} naming the key at fault.
 */
function tlsOf(t: NonNullable<WebConfigFile['tls_server_config']>, file: string): NonNullable<WebConfig['tls']> {
  const base = dirname(resolve(file));
  const read = (key: string, value: string) => {
    try {
      return readFileSync(resolve(base, value), 'utf8');
    } catch (err) {
      throw new WebConfigError(key, `${file}: ${key} ${JSON.stringify(value)} cannot be read (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
    }
  };
  const tls: NonNullable<WebConfig['tls']> = {
    cert: t.cert ?? read('tls_server_config.cert_file', t.cert_file!),
    key: t.key ?? read('tls_server_config.key_file', t.key_file!),
    ...(t.client_ca !== undefined
      ? { ca: t.client_ca }
      : t.client_ca_file !== undefined
        ? { ca: read('tls_server_config.client_ca_file', t.client_ca_file) }
        : {}),
    clientAuth: t.client_auth_type,
    ...(t.client_allowed_sans !== undefined ? { allowedSans: t.client_allowed_sans } : {}),
    minVersion: TLS_VERSIONS[t.min_version],
    maxVersion: TLS_VERSIONS[t.max_version],
    ciphers: cipherList(t.cipher_suites),
    honorCipherOrder: t.prefer_server_cipher_suites,
    ...(t.curve_preferences !== undefined && t.curve_preferences.length > 0 ? { ecdhCurve: t.curve_preferences.map((c) => CURVES[c]!).join(':') } : {}),
  };
  try {
    createSecureContext(secureContextOptions(tls));
  } catch (err) {
    throw new WebConfigError('tls_server_config', `${file}: tls_server_config cannot be used: ${(err as Error).message}`);
  }
  return tls;
}

/** Reads and validates a web configuration file and the files it names. @throws {WebConfigError} naming the key at fault. */
export function loadWebConfig(file: string): WebConfig {
  const result = attempt(file);
  if (result.error !== undefined) throw result.error;
  return result.config;
}

/**
 * Reads the file WEB_CONFIG_FILE names, for `serve` and `check`; undefined when it is unset.
 *
 * @throws {ConfigError} `WEB_CONFIG_FILE <what is wrong>` (exit 2), the {@link WebConfigError} as cause.
 */
export function readWebConfigSetting(file: string | undefined): WebConfig | undefined {
  if (file === undefined) return undefined;
  try {
    return loadWebConfig(file);
  } catch (err) {
    if (err instanceof WebConfigError) throw new ConfigError('WEB_CONFIG_FILE', `WEB_CONFIG_FILE ${err.message}`, { cause: err });
    throw err;
  }
}

/** The new configuration, or why the last good one stays. */
export type WebConfigReload = { ok: true; config: WebConfig } | { ok: false; error: WebConfigError };

/**
 * The web configuration in use, read again when a {@link refresh} finds its files' signature
 * changed. One that cannot be used (a switch between HTTP and HTTPS included) leaves the last good
 * one in use and is reported once per change.
 */
export class WebConfigSource {
  #current: WebConfig;
  /** The last attempt's, good or bad. */
  #files: string[];
  #seen: string;
  readonly #onReload: (result: WebConfigReload) => void;

  /** @param onReload once per change seen; must not throw. */
  constructor(initial: WebConfig, onReload: (result: WebConfigReload) => void = () => undefined) {
    this.#current = initial;
    this.#files = initial.origin.files;
    this.#seen = initial.origin.signature;
    this.#onReload = onReload;
  }

  get current(): WebConfig {
    return this.#current;
  }

  /** Reads the configuration again if its files changed. @returns the one to use now. Never throws. */
  refresh(): WebConfig {
    if (fileSignature(this.#files) === this.#seen) return this.#current;
    const result = attempt(this.#current.origin.file);
    this.#files = result.files;
    this.#seen = result.signature;
    if (result.error === undefined && (result.config.tls === undefined) !== (this.#current.tls === undefined)) {
      const error = new WebConfigError(
        'tls_server_config',
        `${this.#current.origin.file}: tls_server_config was ${this.#current.tls === undefined ? 'added' : 'removed'}; switching between HTTP and HTTPS needs a restart`,
      );
      this.#onReload({ ok: false, error });
    } else if (result.error !== undefined) {
      this.#onReload({ ok: false, error: result.error });
    } else {
      this.#current = result.config;
      this.#onReload({ ok: true, config: result.config });
    }
    return this.#current;
  }
}

/**
 * Whether Node's `subjectaltname` (`DNS:a, IP Address:10.0.0.1, …`) holds one of `allowed`: IP
 * addresses compared as addresses, the rest exactly.
 */
export function matchesAllowedSans(subjectAltName: string | undefined, allowed: readonly string[]): boolean {
  if (subjectAltName === undefined) return false;
  const names: string[] = [];
  // Node quotes a value holding a comma or a quote as a JSON string.
  for (const m of subjectAltName.matchAll(/(?:^|, )(DNS|IP Address|email|URI):("(?:[^"\\]|\\.)*"|[^,]*)/g)) {
    const value = m[2]!.startsWith('"') ? (JSON.parse(m[2]!) as string) : m[2]!;
    names.push(m[1] === 'IP Address' ? normalizeIp(value) : value);
  }
  return allowed.some((a) => names.includes(isIP(a) ? normalizeIp(a) : a));
}

function normalizeIp(ip: string): string {
  return isIP(ip) === 6 ? new URL(`http://[${ip}]/`).hostname : ip;
}
