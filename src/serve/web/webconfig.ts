/**
 * The web configuration of `serve` (WEB_CONFIG_FILE), in the format of prometheus/exporter-toolkit
 * so Prometheus users reuse what they know: `tls_server_config` (certificate, key and client CA as
 * files or inline, `client_auth_type`, `client_allowed_sans`, TLS versions, cipher suites, curves),
 * `basic_auth_users` (bcrypt hashes, checked by BasicAuth in basic-auth.ts) and `http_server_config.headers`.
 *
 * As in exporter-toolkit, unknown keys are errors, and relative file paths are relative to the
 * configuration file's folder. Of exporter-toolkit's keys, `rate_limit` is refused by name (nothing
 * here would enforce it), `http_server_config.http2: true` is accepted with a warning (Node's
 * HTTPS server here speaks HTTP/1.1 only; exporter-toolkit's own default is true), and a
 * `min_version` or `max_version` this runtime cannot serve (TLS10, TLS11) is refused. Without
 * `cipher_suites`, TLS 1.2 offers Go's forward-secret AEAD suites only (see tls-suites.ts).
 *
 * The file and the files it names are read again when they change ({@link WebConfigSource}), so a
 * rotated certificate or a new user applies without a restart.
 */
import { createRequire } from 'node:module';
import { readFileSync, statSync } from 'node:fs';
import { isIP } from 'node:net';
import { dirname, resolve } from 'node:path';
import { createSecureContext, type SecureContextOptions } from 'node:tls';
import { z } from 'zod';
import { ConfigError, WebConfigError } from '../../errors.js';
import { CURVES, TLS12_CIPHER_SUITES, TLS13_CIPHER_SUITES, cipherList, unservableTlsVersion } from './tls-suites.js';

/** exporter-toolkit's client authentication modes (Go's tls.ClientAuthType names). */
const CLIENT_AUTH_TYPES = ['NoClientCert', 'RequestClientCert', 'RequireAnyClientCert', 'VerifyClientCertIfGiven', 'RequireAndVerifyClientCert'] as const;
type ClientAuthType = (typeof CLIENT_AUTH_TYPES)[number];

const TLS_VERSIONS = { TLS10: 'TLSv1', TLS11: 'TLSv1.1', TLS12: 'TLSv1.2', TLS13: 'TLSv1.3' } as const;
const TLS_VERSION_NAMES = ['TLS10', 'TLS11', 'TLS12', 'TLS13'] as const;

/** The only headers exporter-toolkit lets `http_server_config.headers` set; a blank value leaves the header unset. */
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
    /** client_allowed_sans: a client certificate must carry one of these DNS, IP, e-mail or URI names. */
    allowedSans?: string[];
    minVersion: TlsVersion;
    maxVersion: TlsVersion;
    /** OpenSSL cipher list: the TLS 1.3 suites and cipher_suites in OpenSSL's names (default: the forward-secret AEAD suites). */
    ciphers: string;
    /** prefer_server_cipher_suites: the server's order of `ciphers` wins. */
    honorCipherOrder: boolean;
    /** Node's `ecdhCurve` from curve_preferences (`X25519:prime256v1`); undefined for Node's default. */
    ecdhCurve?: string;
  };
  /** Extra response headers (exporter-toolkit's http_server_config.headers), blank ones left out. */
  headers: Record<string, string>;
  /** User name → bcrypt hash; empty means no authentication. */
  users: Record<string, string>;
  /** What is accepted but not done as exporter-toolkit would (http2: true), one line each, for a warn log line. */
  warnings: string[];
  /** Where it was read from: what {@link WebConfigSource} checks for changes. */
  origin: WebConfigOrigin;
}

/** The files a web configuration was read from, and their state when they were read. */
interface WebConfigOrigin {
  /** The configuration file, as given. */
  file: string;
  /** The configuration file and the files it names, as absolute paths. */
  files: string[];
  /** Their inode, size, mtime and ctime, taken before each was read (see {@link fileSignature}). */
  signature: string;
}

/**
 * The options of Node's TLS server (`https.createServer`, `server.setSecureContext`) for a web
 * configuration's `tls_server_config`. Never throws; Node throws on what OpenSSL refuses.
 */
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

/**
 * The state of files, for a cheap change check: inode, size, mtime and ctime (nanoseconds) of each,
 * or why it could not be seen. Follows symbolic links, so a Kubernetes Secret's atomic swap of its
 * `..data` link shows as a change. Never throws.
 */
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

/** One attempt at reading a web configuration: the files it involved, and the result or the error. */
type Attempt = { files: string[]; signature: string } & ({ config: WebConfig; error?: undefined } | { error: WebConfigError; config?: undefined });

function attempt(file: string): Attempt {
  const configPath = resolve(file);
  const files = [configPath];
  // Each file's state is taken before it is read: a change after that shows at the next check.
  const signatures = [fileSignature([configPath])];
  try {
    const data = readWebConfigFile(file);
    // Named files are watched even when they cannot be read yet, so their arrival shows as a change.
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

/** The file's keys, validated; the files they name are not read yet. */
type WebConfigFile = z.infer<typeof webConfigSchema>;

/**
 * Reads the configuration file itself and validates its keys.
 *
 * @throws {WebConfigError} for a file that cannot be read, YAML that does not parse, the first key
 *   that breaks its rule (named with its path).
 */
function readWebConfigFile(file: string): WebConfigFile {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new WebConfigError('', `cannot read ${file} (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
  }
  let raw: unknown;
  try {
    // Loaded when a web configuration is read (the yaml package is 70 modules): a process without
    // WEB_CONFIG_FILE never needs it. Its CommonJS build loads synchronously, as this reader is.
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

/** The files `tls_server_config` names, as absolute paths (relative ones against `base`, the configuration's folder). */
function namedFiles(t: WebConfigFile['tls_server_config'], base: string): string[] {
  return (t ? [t.cert_file, t.key_file, t.client_ca_file] : []).filter((f) => f !== undefined).map((f) => resolve(base, f));
}

/**
 * The web configuration of a validated file: the files it names read, the TLS settings tried on a
 * secure context, blank headers left out.
 *
 * @throws {WebConfigError} for a named file that cannot be read, or TLS settings OpenSSL refuses.
 */
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
 * `tls_server_config` as Node's TLS server takes it, its files read (relative to `file`'s folder)
 * and tried on a secure context now: a key that does not match the certificate, a PEM that is not one.
 *
 * @throws {WebConfigError} naming the key of a file that cannot be read, or `tls_server_config`.
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
    // cipher_suites unset: forward-secret TLS 1.2 suites only, as Go's default (not Node's, which has RSA key exchange).
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

/**
 * Reads and validates a web configuration file, and the files it names.
 *
 * @throws {WebConfigError} naming the key and what is wrong: YAML syntax, an unknown key, a bad
 *   value, a file it names that cannot be read, a certificate and key that do not make a TLS
 *   context (a key that does not match the certificate).
 */
export function loadWebConfig(file: string): WebConfig {
  const result = attempt(file);
  if (result.error !== undefined) throw result.error;
  return result.config;
}

/**
 * Reads the file WEB_CONFIG_FILE names, as `serve` uses it and `check` validates it: the
 * configuration holds only the path, and this module, which owns the format, reads it.
 *
 * @param file the setting's value; undefined (unset) means plain HTTP without auth.
 * @returns the web configuration, or undefined when the setting is unset.
 * @throws {ConfigError} for variable WEB_CONFIG_FILE, its message `WEB_CONFIG_FILE <what is
 *   wrong>` (a command exits 2 on it), with the {@link WebConfigError} as its cause.
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

/** What a {@link WebConfigSource} reports after a change: the new configuration, or why the last good one stays. */
export type WebConfigReload = { ok: true; config: WebConfig } | { ok: false; error: WebConfigError };

/**
 * The web configuration in use, read again when the file or a file it names changes: each
 * {@link refresh} compares their inode, size, mtime and ctime with those at the last read, a few
 * `stat` calls, and reads everything again only when they differ. A configuration that cannot be
 * used (invalid YAML, a missing file, a key that does not match the certificate, a switch between
 * HTTP and HTTPS, which needs a restart) leaves the last good one in use and is reported once per
 * change.
 */
export class WebConfigSource {
  #current: WebConfig;
  /** The files of the last attempt, good or bad, and their state then. */
  #files: string[];
  #seen: string;
  readonly #onReload: (result: WebConfigReload) => void;

  /**
   * @param initial the configuration read at start ({@link loadWebConfig}).
   * @param onReload called once per change seen, with the new configuration or the error; must not throw.
   */
  constructor(initial: WebConfig, onReload: (result: WebConfigReload) => void = () => undefined) {
    this.#current = initial;
    this.#files = initial.origin.files;
    this.#seen = initial.origin.signature;
    this.#onReload = onReload;
  }

  /** The configuration in use. */
  get current(): WebConfig {
    return this.#current;
  }

  /**
   * Reads the configuration again if its files changed since the last attempt.
   *
   * @returns the configuration to use now: the new one, or the last good one. Never throws.
   */
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
 * Whether a client certificate's subject alternative names include one of `allowed`
 * (client_allowed_sans): DNS names, e-mail addresses and URIs compared exactly, IP addresses as
 * addresses (`::1` matches `0:0:0:0:0:0:0:1`).
 *
 * @param subjectAltName Node's `getPeerCertificate().subjectaltname` (`DNS:a, IP Address:10.0.0.1, …`).
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
