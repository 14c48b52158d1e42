/**
 * The web configuration of `serve` (WEB_CONFIG_FILE), in the format of prometheus/exporter-toolkit
 * so Prometheus users reuse what they know: `tls_server_config` (certificate, key, client CA and
 * `client_auth_type`), `basic_auth_users` (bcrypt hashes) and `http_server_config.headers`.
 *
 * As in exporter-toolkit, unknown keys are errors, and relative file paths are relative to the
 * configuration file's folder. Keys exporter-toolkit has that we do not implement (cipher
 * suites, curve preferences, inline certificates, HTTP/2 switches) are refused by name.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { WebConfigError } from './errors.js';

/** exporter-toolkit's client authentication modes (Go's tls.ClientAuthType names). */
export const CLIENT_AUTH_TYPES = [
  'NoClientCert',
  'RequestClientCert',
  'RequireAnyClientCert',
  'VerifyClientCertIfGiven',
  'RequireAndVerifyClientCert',
] as const;
export type ClientAuthType = (typeof CLIENT_AUTH_TYPES)[number];

const TLS_VERSIONS = { TLS10: 'TLSv1', TLS11: 'TLSv1.1', TLS12: 'TLSv1.2', TLS13: 'TLSv1.3' } as const;

const webConfigSchema = z
  .object({
    tls_server_config: z
      .object({
        cert_file: z.string().min(1),
        key_file: z.string().min(1),
        client_auth_type: z.enum(CLIENT_AUTH_TYPES).default('NoClientCert'),
        client_ca_file: z.string().min(1).optional(),
        min_version: z.enum(['TLS10', 'TLS11', 'TLS12', 'TLS13']).default('TLS12'),
        max_version: z.enum(['TLS10', 'TLS11', 'TLS12', 'TLS13']).optional(),
      })
      .strict()
      .refine((t) => !t.client_auth_type.includes('Verify') || t.client_ca_file !== undefined, {
        message: 'client_ca_file is required when client_auth_type verifies client certificates',
        path: ['client_ca_file'],
      })
      .optional(),
    http_server_config: z
      .object({ headers: z.record(z.string(), z.string()).optional() })
      .strict()
      .optional(),
    basic_auth_users: z
      .record(
        z
          .string()
          .min(1)
          .regex(/^[^:]*$/, 'user names cannot contain ":"'),
        z.string().regex(/^\$2[aby]\$\d{2}\$.{53}$/, 'must be a bcrypt hash ($2a$, $2b$ or $2y$)'),
      )
      .optional(),
  })
  .strict();

/** The validated web configuration, with file contents read. */
export interface WebConfig {
  tls?: {
    cert: string;
    key: string;
    ca?: string;
    clientAuth: ClientAuthType;
    minVersion: (typeof TLS_VERSIONS)[keyof typeof TLS_VERSIONS];
    maxVersion?: (typeof TLS_VERSIONS)[keyof typeof TLS_VERSIONS];
  };
  /** Extra response headers (exporter-toolkit's http_server_config.headers). */
  headers: Record<string, string>;
  /** User name → bcrypt hash; empty means no authentication. */
  users: Record<string, string>;
}

/**
 * Reads and validates a web configuration file.
 *
 * @throws {WebConfigError} naming the key and what is wrong: YAML syntax, an unknown key, a bad
 *   value, or a file it names that cannot be read.
 */
export function loadWebConfig(file: string): WebConfig {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new WebConfigError('', `cannot read ${file} (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
  }
  let raw: unknown;
  try {
    raw = parseYaml(text) ?? {};
  } catch (err) {
    throw new WebConfigError('', `${file} is not valid YAML: ${(err as Error).message.split('\n')[0]}`);
  }
  const parsed = webConfigSchema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const path = issue.path.join('.');
    const message =
      issue.code === 'unrecognized_keys'
        ? `unknown or unsupported key ${issue.keys.map((k) => `${path ? `${path}.` : ''}${k}`).join(', ')}`
        : `${path}: ${issue.message}`;
    throw new WebConfigError(path, `${file}: ${message}`);
  }
  const base = dirname(resolve(file));
  const read = (key: string, value: string) => {
    try {
      return readFileSync(resolve(base, value), 'utf8');
    } catch (err) {
      throw new WebConfigError(key, `${file}: ${key} ${JSON.stringify(value)} cannot be read (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
    }
  };
  const t = parsed.data.tls_server_config;
  return {
    ...(t
      ? {
          tls: {
            cert: read('tls_server_config.cert_file', t.cert_file),
            key: read('tls_server_config.key_file', t.key_file),
            ...(t.client_ca_file ? { ca: read('tls_server_config.client_ca_file', t.client_ca_file) } : {}),
            clientAuth: t.client_auth_type,
            minVersion: TLS_VERSIONS[t.min_version],
            ...(t.max_version ? { maxVersion: TLS_VERSIONS[t.max_version] } : {}),
          },
        }
      : {}),
    headers: parsed.data.http_server_config?.headers ?? {},
    users: parsed.data.basic_auth_users ?? {},
  };
}

/** Results of bcrypt comparisons kept, so a scrape does not pay bcrypt's cost every time. */
const AUTH_CACHE_ENTRIES = 256;
/** Compared when the user is unknown, so a wrong user name takes as long as a wrong password. */
const DUMMY_HASH = '$2b$10$S2UvWuugHkM/T8R8VjAEY.C5RniJMGv/5ZaGwd4mwRUIN1DTDn9YO';

/** Checks HTTP Basic credentials against `basic_auth_users`, caching results by a hash of the password. */
export class BasicAuth {
  readonly #users: Record<string, string>;
  readonly #cache = new Map<string, boolean>();

  constructor(users: Record<string, string>) {
    this.#users = users;
  }

  /** Whether any user is configured (authentication required). */
  get enabled(): boolean {
    return Object.keys(this.#users).length > 0;
  }

  /**
   * Verifies an `Authorization` header value.
   *
   * @returns true for `Basic base64(user:password)` matching a configured user's bcrypt hash.
   */
  async verify(header: string | undefined): Promise<boolean> {
    const match = /^Basic ([A-Za-z0-9+/=]+)$/i.exec(header?.trim() ?? '');
    if (!match) return false;
    const decoded = Buffer.from(match[1]!, 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    if (colon < 0) return false;
    const user = decoded.slice(0, colon);
    const password = decoded.slice(colon + 1);
    const hash = Object.hasOwn(this.#users, user) ? this.#users[user]! : undefined;
    const key = `${user}\u0000${createHash('sha256').update(password).digest('base64')}`;
    const cached = this.#cache.get(key);
    if (cached !== undefined) return cached && hash !== undefined;
    // Loaded on the first request that needs it: only servers with basic_auth_users do.
    const { default: bcrypt } = await import('bcryptjs');
    const ok = (await bcrypt.compare(password, hash ?? DUMMY_HASH)) && hash !== undefined;
    if (this.#cache.size >= AUTH_CACHE_ENTRIES) this.#cache.delete(this.#cache.keys().next().value!);
    this.#cache.set(key, ok);
    return ok;
  }
}
