/**
 * E0, the token endpoint (reference Authentication 3–5; RFC 6749 §2.3.1, §4.4, §5), and the bearer
 * check of E6/E7 (reference Authentication 6; RFC 6750 §3): the client credentials grant with
 * the secret in the body or in HTTP Basic, tokens kept in memory until they expire.
 */
import { randomBytes } from 'node:crypto';
import type http from 'node:http';
import type { Responder } from './respond.js';
import { MAX_TOKEN_BODY_BYTES, type FaultSettings, type QueuedFault } from './settings.js';

interface TokenInfo {
  issuedAtMs: number;
  expiresAtMs: number;
  revoked: boolean;
}

/** What E0 accepts and issues. */
export interface TokenSettings {
  clientId: string;
  /** The scope a token request must include. */
  scope: string;
  /** `expires_in` and real lifetime of tokens. */
  lifetimeSeconds: number;
  /** Text every issued token starts with ('' for none). */
  tokenPrefix: string;
  /** Clock, in milliseconds since the epoch. */
  now: () => number;
}

/** Decodes one `application/x-www-form-urlencoded` component: `+` is a space (RFC 6749 §2.3.1, appendix B). */
function formDecode(text: string): string {
  return decodeURIComponent(text.replaceAll('+', ' '));
}

/** The request body, or undefined when it is larger than {@link MAX_TOKEN_BODY_BYTES}. */
async function readBody(req: http.IncomingMessage): Promise<string | undefined> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_TOKEN_BODY_BYTES) return undefined;
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** The token endpoint of one simulator and the tokens it issued. */
export class TokenEndpoint {
  /** The secret E0 accepts now (see `Simulator.setClientSecret`). */
  clientSecret: string;
  readonly #settings: TokenSettings;
  readonly #faults: FaultSettings;
  readonly #respond: Responder;
  readonly #tokens = new Map<string, TokenInfo>();

  /** @param faults read at each bearer check (`revokeTokensAfterSeconds`). */
  constructor(settings: TokenSettings, clientSecret: string, faults: FaultSettings, respond: Responder) {
    this.#settings = settings;
    this.clientSecret = clientSecret;
    this.#faults = faults;
    this.#respond = respond;
  }

  /** Answers one `POST /connect/token`; a queued fault replaces or damages the answer. */
  async handle(req: http.IncomingMessage, res: http.ServerResponse, queued: QueuedFault | undefined): Promise<void> {
    const body = await readBody(req);
    if (body === undefined) {
      this.#respond.oauthError(res, 413, 'invalid_request', `request body larger than ${MAX_TOKEN_BODY_BYTES} bytes`, { connection: 'close' });
      return;
    }
    if (typeof queued === 'object') {
      // RFC 6749 §5.2 names no code for a server fault; temporarily_unavailable (§4.1.2.1) is the closest.
      this.#respond.oauthError(
        res,
        queued.status,
        'temporarily_unavailable',
        'simulated fault',
        queued.retryAfter !== undefined ? { 'retry-after': queued.retryAfter } : {},
      );
      return;
    }
    const contentType = (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
    if (contentType !== 'application/x-www-form-urlencoded') {
      this.#respond.oauthError(res, 400, 'invalid_request', 'Content-Type must be application/x-www-form-urlencoded');
      return;
    }
    const params = new URLSearchParams(body);
    for (const name of new Set(params.keys())) {
      if (params.getAll(name).length > 1) {
        this.#respond.oauthError(res, 400, 'invalid_request', `parameter ${name} is repeated`); // RFC 6749 §3.2
        return;
      }
    }

    let presentedId: string | undefined;
    let presentedSecret: string | undefined;
    let usedBasic = false;
    const authorization = req.headers.authorization;
    if (authorization !== undefined) {
      const match = /^Basic[ ]+([A-Za-z0-9+/=]+)\s*$/i.exec(authorization);
      if (match === null) {
        this.#respond.oauthError(res, 401, 'invalid_client', 'Authorization header is not HTTP Basic', { 'www-authenticate': 'Basic realm="simulator"' });
        return;
      }
      usedBasic = true;
      const decoded = Buffer.from(match[1]!, 'base64').toString('utf8');
      const colon = decoded.indexOf(':');
      try {
        if (colon < 0) throw new Error('no colon');
        presentedId = formDecode(decoded.slice(0, colon));
        presentedSecret = formDecode(decoded.slice(colon + 1));
      } catch {
        this.#respond.oauthError(res, 401, 'invalid_client', 'Basic credentials are not form-encoded id:secret', {
          'www-authenticate': 'Basic realm="simulator"',
        });
        return;
      }
      // RFC 6749 §2.3: one authentication method per request. A client_id matching the header is tolerated.
      const bodyId = params.get('client_id');
      if (params.has('client_secret') || (bodyId !== null && bodyId !== presentedId)) {
        this.#respond.oauthError(res, 400, 'invalid_request', 'client credentials sent both in the Authorization header and in the body');
        return;
      }
    } else {
      presentedId = params.get('client_id') ?? undefined;
      presentedSecret = params.get('client_secret') ?? undefined;
    }

    const grantType = params.get('grant_type');
    if (grantType === null) {
      this.#respond.oauthError(res, 400, 'invalid_request', 'grant_type is required');
      return;
    }
    if (presentedId !== this.#settings.clientId || presentedSecret !== this.clientSecret) {
      const reason = presentedId === undefined ? 'no client authentication included' : 'unknown client or wrong secret';
      this.#respond.oauthError(res, 401, 'invalid_client', reason, usedBasic ? { 'www-authenticate': 'Basic realm="simulator"' } : {});
      return;
    }
    if (grantType !== 'client_credentials') {
      this.#respond.oauthError(res, 400, 'unsupported_grant_type', `grant_type ${grantType} is not supported; use client_credentials`);
      return;
    }
    const scope = params.get('scope');
    if (scope === null || !scope.split(' ').includes(this.#settings.scope)) {
      this.#respond.oauthError(
        res,
        400,
        'invalid_scope',
        scope === null ? `scope is required (${this.#settings.scope})` : `scope must include ${this.#settings.scope}`,
      );
      return;
    }

    const issuedAtMs = this.#settings.now();
    const token = `${this.#settings.tokenPrefix}${randomBytes(32).toString('base64url')}`;
    this.#tokens.set(token, { issuedAtMs, expiresAtMs: issuedAtMs + this.#settings.lifetimeSeconds * 1000, revoked: false });
    for (const [key, info] of this.#tokens) if (info.expiresAtMs <= issuedAtMs) this.#tokens.delete(key);
    if (queued !== undefined) {
      const answer =
        queued === 'bad-envelope'
          ? { token_type: 'Bearer', expires_in: this.#settings.lifetimeSeconds }
          : { access_token: token, token_type: 'Bearer', expires_in: this.#settings.lifetimeSeconds };
      this.#respond.deliver(res, 'application/json; charset=utf-8', JSON.stringify(answer), queued === 'bad-envelope' ? undefined : queued);
      return;
    }
    this.#respond.sendJson(
      res,
      200,
      { access_token: token, token_type: 'Bearer', expires_in: this.#settings.lifetimeSeconds },
      { 'cache-control': 'no-store', pragma: 'no-cache' },
    );
  }

  /** Returns undefined when the request's bearer token is good, otherwise why it is not. */
  bearerProblem(req: http.IncomingMessage): string | undefined {
    const authorization = req.headers.authorization;
    if (authorization === undefined) return 'no bearer token';
    const match = /^Bearer[ ]+([A-Za-z0-9\-._~+/]+=*)\s*$/i.exec(authorization);
    if (match === null) return 'Authorization is not a Bearer token';
    const info = this.#tokens.get(match[1]!);
    if (info === undefined) return 'unknown token';
    const t = this.#settings.now();
    if (t >= info.expiresAtMs) return 'token expired';
    if (info.revoked) return 'token revoked';
    const revokeAfter = this.#faults.revokeTokensAfterSeconds;
    if (revokeAfter !== undefined && t - info.issuedAtMs >= revokeAfter * 1000) return 'token revoked';
    return undefined;
  }

  /** Every token issued so far stops working (401 `token revoked`). */
  revokeAll(): void {
    for (const info of this.#tokens.values()) info.revoked = true;
  }
}
