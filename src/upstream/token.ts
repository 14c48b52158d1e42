/**
 * OAuth2 client credentials token client (reference: Authentication, E0).
 *
 * Lifecycle: a token is fetched on first use, cached until `expires_in` minus a
 * margin, and shared: concurrent callers with an empty cache wait on one request.
 * A 401 from an API call invalidates the token it used (see {@link TokenClient.invalidate}).
 *
 * With a secret file (CLIENT_SECRET_FILE) the secret is read again for every token request, so a
 * secret rotated under a running process (a Kubernetes Secret, a Docker secret) applies at the next
 * token request without a restart. A file that cannot be read then (gone, empty) fails that token
 * request: the secret read earlier is not used instead, because the file is the only source of truth
 * and a stale secret would hide a broken mount until the identity host refuses it. The token in
 * hand stays in use until it is due for renewal; only a new token needs the secret.
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

/** Lifetime assumed when the response has no `expires_in` (reference Limits: about one hour). */
export const DEFAULT_TOKEN_LIFETIME_MS = 3_600_000;
/** A token is renewed this long before it expires (10% of shorter lifetimes), so no call carries a token that dies in flight. */
export const TOKEN_REFRESH_MARGIN_MS = 60_000;
/**
 * After a token request fails for good (its retries spent), callers arriving within this long get
 * the same error without a request: a burst of API calls, or a prefetcher moving on to its next
 * page, would otherwise each run a whole retry sequence against an identity host that is down.
 */
export const TOKEN_FAILURE_HOLD_MS = 1_000;

/**
 * A client secret shorter than this is warned about at start: it is easy to guess, and the
 * last-resort mask of messages (redactSecrets in src/errors.ts) masks only its whole occurrences, which for
 * a short secret are ordinary words.
 */
export const MIN_CLIENT_SECRET_LENGTH = 8;

const tokenResponseSchema = z.object({
  access_token: z.string({ error: 'access_token is missing or not a string' }).min(1, 'access_token is empty'),
  token_type: z
    .string({ error: 'token_type is missing' })
    .refine((t) => t.toLowerCase() === 'bearer', { error: (issue) => `token_type is ${JSON.stringify(issue.input)}, not Bearer` }),
  // Some identity providers send the lifetime as a numeric string.
  expires_in: z.coerce.number({ error: 'expires_in is not a number' }).positive('expires_in is not positive').optional(),
});

const oauthErrorSchema = z.object({ error: z.string(), error_description: z.string().optional() });

export interface TokenClientOptions {
  /** `{auth_url}/connect/token`. */
  tokenUrl: URL;
  clientId: string;
  /** The secret; ignored when `clientSecretFile` is set. */
  clientSecret: string;
  /** A file holding the secret (CLIENT_SECRET_FILE), read at every token request; one trailing newline is not part of it. */
  clientSecretFile?: string;
  authMethod: TokenAuthMethod;
  /** Space-separated scopes (`api.external`). */
  scope: string;
  dispatcher: Dispatcher;
  retry: RetryPolicy;
  log: Logger;
  /** Milliseconds since the epoch; tests move it. */
  now?: () => number;
  /** Called once per token request sent (for `analytics_exporter_token_requests_total`). */
  onTokenRequest?: (outcome: 'success' | 'failure') => void;
  /**
   * Called once per failed token request, retried or not, with what went wrong (`network`, `timeout`, `http_503`,
   * `invalid_body`; `secret_file` when the secret file could not be read and nothing was sent).
   */
  onAttemptFailed?: (reason: FailureReason) => void;
  /** UPSTREAM_TIMEOUT in milliseconds, named in timeout messages (the dispatcher enforces it). */
  timeoutMs?: number;
  /** UPSTREAM_MAX_BODY in bytes, the dispatcher's cap: a decoded body is bounded by it too. */
  maxBodyBytes: number;
}

/** A cached token: the bearer value and when to stop using it. */
interface CachedToken {
  value: string;
  /** Milliseconds since the epoch after which the token is renewed before use. */
  renewAt: number;
}

/**
 * `application/x-www-form-urlencoded` encoding of one value, as RFC 6749 §2.3.1 requires for
 * the client id and secret before they are joined with `:` and base64-encoded.
 */
export function formUrlEncode(value: string): string {
  return new URLSearchParams({ v: value }).toString().slice(2);
}

/** Fetches and caches OAuth2 client-credentials tokens for one API client. */
export class TokenClient {
  readonly #options: TokenClientOptions;
  readonly #now: () => number;
  #cached: CachedToken | undefined;
  #inflight: Promise<CachedToken> | undefined;
  /** The last final failure, and until when (ms since the epoch) it is handed out instead of a new request. */
  #failure: { error: unknown; until: number } | undefined;
  /** The secret file's content at the last read (the secret read at start before that), to notice a rotation. */
  #fileSecret: string;

  constructor(options: TokenClientOptions) {
    this.#options = options;
    this.#now = options.now ?? Date.now;
    this.#fileSecret = options.clientSecret;
  }

  /**
   * Returns a bearer token valid for at least the refresh margin, fetching one (E0) only when
   * the cache is empty or due for renewal. Concurrent callers share one in-flight request, and
   * callers within {@link TOKEN_FAILURE_HOLD_MS} of a final failure share that failure.
   *
   * @throws {TokenRequestError} when the identity host refuses (401 invalid_client for a wrong id or
   *   secret, 400 invalid_scope, …) or cannot be reached after the retries, or when the secret file
   *   cannot be read or is empty (nothing is sent; the message names the file, never its content);
   *   {@link TokenResponseError} when the body is not a Bearer token; {@link TokenBodyError} when it
   *   cannot be read (over UPSTREAM_MAX_BODY, or in a coding the client does not decode).
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

  /**
   * Drops the cached token if it is still `token` (an API call answered 401 with it), so the
   * next {@link getToken} fetches a new one. A token already replaced is left alone, so a burst
   * of 401s on the same old token causes one new token request, not one per call.
   */
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
      // The identity host may have taken a rotated secret before the file showed it, or the file
      // changed while the request was out: read it again, and when it holds another secret, try once more.
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
    // Masked in every output from now on, whatever a server echoes it in (src/redact.ts).
    registerSecret(token.access_token, { transient: true });
    this.#cached = cached;
    log.debug({ expiresInSeconds: lifetimeMs / 1000 }, 'fetched a new access token');
    return cached;
  }

  /** The secret for one token request: CLIENT_SECRET, or the secret file's content now. */
  async #secret(): Promise<string> {
    const file = this.#options.clientSecretFile;
    if (file === undefined) return this.#options.clientSecret;
    let problem: string;
    try {
      const secret = secretFromFileText(await readFile(file, 'utf8'));
      if (secret !== '') {
        // The length check made at start, for a secret rotated in since.
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

  /**
   * One token request (E0) with its retries, authenticated with `clientSecret`.
   * Sets `refusal.invalidClient` when the identity host answered `invalid_client`.
   */
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
    // `body` and `headers` carry the secret: neither is put into a message or a log line, only the
    // server's answer is quoted, as it sent it. A server could still echo the secret back, in any
    // form (raw, form- or percent-encoded, in the Basic header, JSON-escaped, cut short): it is
    // registered, so every output masks all of them (src/redact.ts). A secret from a file is
    // transient: a rotated one replaces it.
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
          // A well-formed answer of the wrong kind will not change on a retry.
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
      // The token request had its own retries: the error is final, so an API call's retry loop
      // does not run the whole token retry sequence again for each of its attempts.
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
