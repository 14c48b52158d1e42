/**
 * OAuth2 client credentials token client (reference: Authentication, E0). A token is cached until
 * `expires_in` minus a margin and shared: concurrent callers wait on one request. A secret file is
 * read at every token request (rotation without restart), never replaced by an older read.
 * Design: docs/design/token-lifecycle.md.
 */
import { readFile } from 'node:fs/promises';
import type { Dispatcher } from 'undici';
import { z } from 'zod';
import type { TokenAuthMethod } from '../config.js';
import {
  ResponseTooLargeError,
  TokenBodyError,
  TokenRequestError,
  TokenResponseError,
  UpstreamBodyError,
  registerSecret,
  type FailureReason,
} from '../errors.js';
import { failureReason } from '../failures.js';
import type { Logger } from '../log.js';
import { secretFromFileText } from './files.js';
import { bodyError, excerpt, send, statusError } from './http.js';
import { logRetry, withRetries, type RetryPolicy } from './retry.js';

/** Without `expires_in` (reference Limits: about one hour). */
const DEFAULT_TOKEN_LIFETIME_MS = 3_600_000;
/** Renewal before expiry (10% of shorter lifetimes), so no token dies in flight. */
const TOKEN_REFRESH_MARGIN_MS = 60_000;
/** After a final failure, callers within this long get the same error without a request. */
const TOKEN_FAILURE_HOLD_MS = 1_000;

/** Shorter secrets are warned about: easy to guess, and masked only where they stand whole. */
export const MIN_CLIENT_SECRET_LENGTH = 8;

const tokenResponseSchema = z.object({
  access_token: z.string({ error: 'access_token is missing or not a string' }).min(1, 'access_token is empty'),
  token_type: z
    .string({ error: 'token_type is missing' })
    .refine((t) => t.toLowerCase() === 'bearer', { error: (issue) => `token_type is ${JSON.stringify(issue.input)}, not Bearer` }),
  expires_in: z.coerce.number({ error: 'expires_in is not a number' }).positive('expires_in is not positive').optional(),
});

const oauthErrorSchema = z.object({ error: z.string(), error_description: z.string().optional() });

export interface TokenClientOptions {
  /** `{auth_url}/connect/token`. */
  tokenUrl: URL;
  clientId: string;
  /** Ignored when `clientSecretFile` is set. */
  clientSecret: string;
  /** CLIENT_SECRET_FILE, read at every token request. */
  clientSecretFile?: string;
  authMethod: TokenAuthMethod;
  /** Space-separated. */
  scope: string;
  dispatcher: Dispatcher;
  retry: RetryPolicy;
  log: Logger;
  /** Milliseconds since the epoch. */
  now?: () => number;
  /** Once per token request sent. */
  onTokenRequest?: (outcome: 'success' | 'failure') => void;
  /** Once per failed attempt, retried or not; `secret_file` when nothing was sent. */
  onAttemptFailed?: (reason: FailureReason) => void;
  /** UPSTREAM_TIMEOUT in milliseconds, for messages (the dispatcher enforces it). */
  timeoutMs?: number;
  /** UPSTREAM_MAX_BODY in bytes, also bounding a decoded body. */
  maxBodyBytes: number;
}

interface CachedToken {
  value: string;
  /** Milliseconds since the epoch. */
  renewAt: number;
}

/** Form-urlencoding of the client id or secret before the Basic header (RFC 6749 §2.3.1). */
export function formUrlEncode(value: string): string {
  return new URLSearchParams({ v: value }).toString().slice(2);
}

/** Fetches and caches OAuth2 client-credentials tokens for one API client. */
export class TokenClient {
  readonly #options: TokenClientOptions;
  readonly #now: () => number;
  #cached: CachedToken | undefined;
  #inflight: Promise<CachedToken> | undefined;
  /** The last final failure, handed out until `until` (ms since the epoch). */
  #failure: { error: unknown; until: number } | undefined;
  /** The secret file's content at the last read, to notice a rotation. */
  #fileSecret: string;

  constructor(options: TokenClientOptions) {
    this.#options = options;
    this.#now = options.now ?? Date.now;
    this.#fileSecret = options.clientSecret;
  }

  /**
   * A bearer token valid for at least the refresh margin; fetched (E0) only when due, once for concurrent callers.
   * @throws {TokenRequestError} when refused or unreachable after the retries, or the secret file is unreadable
   *   or empty (nothing sent); {@link TokenResponseError} when the body is not a Bearer token;
   *   {@link TokenBodyError} when it cannot be read (over UPSTREAM_MAX_BODY, an unknown coding).
   */
  async getToken(): Promise<string> {
    const cached = this.#cached;
    if (cached !== undefined && this.#now() < cached.renewAt) return cached.value;
    const failure = this.#failure;
    if (failure !== undefined && this.#now() < failure.until) throw failure.error;
    this.#inflight ??= this.#fetch().then(
      (token) => {
        this.#failure = undefined;
        this.#inflight = undefined;
        return token;
      },
      (err: unknown) => {
        this.#failure = { error: err, until: this.#now() + TOKEN_FAILURE_HOLD_MS };
        this.#inflight = undefined;
        throw err;
      },
    );
    return (await this.#inflight).value;
  }

  /** Drops the cached token if it is still `token` (answered 401), so a burst of 401s costs one renewal. */
  invalidate(token: string): void {
    if (this.#cached?.value === token) this.#cached = undefined;
  }

  async #fetch(): Promise<CachedToken> {
    const { clientSecretFile, log } = this.#options;
    const secret = await this.#secret();
    const refusal = { invalidClient: false };
    let token: z.infer<typeof tokenResponseSchema>;
    try {
      token = await this.#request(secret, refusal);
    } catch (err) {
      // The secret may have rotated while the request was out: with a new one, try once more.
      if (clientSecretFile === undefined || !refusal.invalidClient) throw err;
      const again = await this.#secret();
      if (again === secret) throw err;
      log.info(
        { endpoint: 'token', file: clientSecretFile },
        'the client secret was refused (invalid_client) and CLIENT_SECRET_FILE has changed since it was read; trying once with the new secret',
      );
      token = await this.#request(again, { invalidClient: false });
    }

    const lifetimeMs = token.expires_in !== undefined ? token.expires_in * 1000 : DEFAULT_TOKEN_LIFETIME_MS;
    const margin = Math.min(TOKEN_REFRESH_MARGIN_MS, lifetimeMs / 10);
    const cached = { value: token.access_token, renewAt: this.#now() + lifetimeMs - margin };
    registerSecret(token.access_token, { transient: true });
    this.#cached = cached;
    log.debug({ expiresInSeconds: lifetimeMs / 1000 }, 'fetched a new access token');
    return cached;
  }

  /** CLIENT_SECRET, or the secret file's content now. */
  async #secret(): Promise<string> {
    const file = this.#options.clientSecretFile;
    if (file === undefined) return this.#options.clientSecret;
    let problem: string;
    try {
      const secret = secretFromFileText(await readFile(file, 'utf8'));
      if (secret !== '') {
        if (secret !== this.#fileSecret && secret.length < MIN_CLIENT_SECRET_LENGTH) {
          this.#options.log.warn(
            { variable: 'CLIENT_SECRET_FILE', minimumLength: MIN_CLIENT_SECRET_LENGTH },
            `CLIENT_SECRET_FILE now holds a client secret shorter than ${MIN_CLIENT_SECRET_LENGTH} characters: it is easy to guess, and messages mask it only where it stands as a whole word`,
          );
        }
        this.#fileSecret = secret;
        return secret;
      }
      problem = 'is empty';
    } catch (err) {
      problem = `cannot be read (${(err as NodeJS.ErrnoException).code ?? 'error'})`;
    }
    this.#options.onAttemptFailed?.('secret_file');
    throw new TokenRequestError(`token request not sent: CLIENT_SECRET_FILE ${file} ${problem}`);
  }

  /** One token request (E0) with its retries; sets `refusal.invalidClient` on `invalid_client`. */
  async #request(clientSecret: string, refusal: { invalidClient: boolean }): Promise<z.infer<typeof tokenResponseSchema>> {
    const { tokenUrl, clientId, authMethod, scope, dispatcher, log, timeoutMs, maxBodyBytes } = this.#options;
    const form: Record<string, string> = { grant_type: 'client_credentials', scope };
    const headers: Record<string, string> = {
      'content-type': 'application/x-www-form-urlencoded',
      accept: 'application/json',
    };
    if (authMethod === 'client_secret_basic') {
      const pair = `${formUrlEncode(clientId)}:${formUrlEncode(clientSecret)}`;
      headers.authorization = `Basic ${Buffer.from(pair, 'utf8').toString('base64')}`;
    } else {
      form.client_id = clientId;
      form.client_secret = clientSecret;
    }
    const body = new URLSearchParams(form).toString();
    // `body` and `headers` carry the secret: never quoted. Registered in case a server echoes it.
    registerSecret(clientSecret, { transient: this.#options.clientSecretFile !== undefined });
    const secretForms = [clientSecret];

    const failed = (reason: FailureReason): void => {
      this.#options.onTokenRequest?.('failure');
      this.#options.onAttemptFailed?.(reason);
    };
    return withRetries(
      async () => {
        const res = await send({
          dispatcher,
          endpoint: 'token',
          method: 'POST',
          url: tokenUrl,
          headers,
          body,
          maxBodyBytes,
          ...(timeoutMs !== undefined ? { timeoutMs } : {}),
        }).catch((err: unknown) => {
          failed(failureReason(err));
          throw err;
        });
        if (res.status < 200 || res.status > 299) {
          failed(`http_${res.status}`);
          const oauth = oauthErrorSchema.safeParse(safeJson(res.body));
          if (oauth.success && oauth.data.error === 'invalid_client') refusal.invalidClient = true;
          const detail = oauth.success
            ? `${oauth.data.error}${oauth.data.error_description ? ` (${excerpt(oauth.data.error_description, 120, secretForms)})` : ''}`
            : excerpt(res.body, 120, secretForms);
          const err = statusError('token', tokenUrl, res, this.#now(), detail);
          throw new TokenRequestError(`token request refused: ${err.message}`, {
            status: res.status,
            retryable: err.retryable,
            ...(err.retryAfterMs !== undefined ? { retryAfterMs: err.retryAfterMs } : {}),
          });
        }
        const json = safeJson(res.body);
        const parsed = tokenResponseSchema.safeParse(json);
        if (!parsed.success) {
          failed('invalid_body');
          const what =
            json === undefined || typeof json !== 'object'
              ? `body is not a JSON object: ${excerpt(res.body, 120, secretForms)}`
              : parsed.error.issues.map((i) => i.message).join('; ');
          const base = bodyError('token', tokenUrl, `not a Bearer token response: ${what}`);
          throw new TokenResponseError(base.message);
        }
        this.#options.onTokenRequest?.('success');
        return parsed.data;
      },
      this.#options.retry,
      {
        onRetry: (event) => logRetry(log, 'token', event, this.#options.retry.maxAttempts),
      },
    ).catch((err: unknown) => {
      // Final, so an API call's retries do not run the token's retries again.
      if (err instanceof TokenRequestError) {
        throw new TokenRequestError(err.message, { ...(err.status !== undefined ? { status: err.status } : {}), cause: err.cause });
      }
      if (err instanceof TokenResponseError) throw new TokenResponseError(err.message, { cause: err.cause });
      // Counted as `invalid_body`, whatever the body's fault was.
      if (err instanceof UpstreamBodyError || err instanceof ResponseTooLargeError) throw new TokenBodyError(err.message, { cause: err.cause });
      throw new TokenRequestError(`token request failed: ${(err as Error).message}`, { cause: err });
    });
  }
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
