import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent } from 'undici';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { TokenError } from '../../src/errors.js';
import { createLogger } from '../../src/log.js';
import { silentLogger } from '../helpers/silent-logger.js';
import { TokenClient, type TokenClientOptions } from '../../src/upstream/token.js';

/** UPSTREAM_MAX_BODY's default, in bytes. */
const MAX_BODY_BYTES = 64 * 1024 * 1024;

/** A real HTTP token endpoint whose answer each test sets. */
let server: Server;
let tokenUrl: URL;
let answer: (req: IncomingMessage, body: string) => { status: number; body: unknown; delayMs?: number };
let requests: { headers: IncomingMessage['headers']; body: string }[] = [];
const dispatcher = new Agent();

beforeAll(async () => {
  server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      requests.push({ headers: req.headers, body });
      const a = answer(req, body);
      setTimeout(() => {
        res.writeHead(a.status, { 'content-type': 'application/json' });
        res.end(typeof a.body === 'string' ? a.body : JSON.stringify(a.body));
      }, a.delayMs ?? 0);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  tokenUrl = new URL(`http://127.0.0.1:${(server.address() as AddressInfo).port}/connect/token`);
});
afterAll(async () => {
  await dispatcher.close();
  await new Promise((resolve) => server.close(resolve));
});
afterEach(() => {
  requests = [];
});

let counter = 0;
const ok = (expires_in: unknown = 3600) => ({ status: 200, body: { access_token: `tok-${++counter}`, token_type: 'Bearer', expires_in } });

function client(overrides: Partial<TokenClientOptions> = {}): TokenClient {
  return new TokenClient({
    tokenUrl,
    clientId: 'my client',
    clientSecret: 'p@ss:word+1',
    authMethod: 'client_secret_post',
    scope: 'api.external',
    dispatcher,
    retry: { maxAttempts: 3, maxDelayMs: 1000, baseDelayMs: 1 },
    log: silentLogger,
    maxBodyBytes: MAX_BODY_BYTES,
    ...overrides,
  });
}

describe('TokenClient', () => {
  it('sends client_secret_post as a form', async () => {
    answer = () => ok();
    await client().getToken();
    expect(requests).toHaveLength(1);
    expect(requests[0]!.headers['content-type']).toBe('application/x-www-form-urlencoded');
    expect(requests[0]!.headers.authorization).toBeUndefined();
    expect(Object.fromEntries(new URLSearchParams(requests[0]!.body))).toEqual({
      grant_type: 'client_credentials',
      scope: 'api.external',
      client_id: 'my client',
      client_secret: 'p@ss:word+1',
    });
  });

  it('sends client_secret_basic with form-urlencoded id and secret (RFC 6749 §2.3.1)', async () => {
    answer = () => ok();
    await client({ authMethod: 'client_secret_basic' }).getToken();
    const auth = requests[0]!.headers.authorization!;
    expect(Buffer.from(auth.replace(/^Basic /, ''), 'base64').toString()).toBe('my+client:p%40ss%3Aword%2B1');
    expect(Object.fromEntries(new URLSearchParams(requests[0]!.body))).toEqual({ grant_type: 'client_credentials', scope: 'api.external' });
  });

  it('caches the token until expires_in minus the margin', async () => {
    answer = () => ok(3600);
    let now = 1_000_000;
    const tokens = client({ now: () => now });
    const first = await tokens.getToken();
    now += 3_539_000;
    expect(await tokens.getToken()).toBe(first);
    expect(requests).toHaveLength(1);
    now += 2_000; // past 3600 s − 60 s
    expect(await tokens.getToken()).not.toBe(first);
    expect(requests).toHaveLength(2);
  });

  it('assumes 3600 s when expires_in is absent, and accepts it as a string', async () => {
    answer = () => ({ status: 200, body: { access_token: `tok-${++counter}`, token_type: 'bearer' } });
    let now = 0;
    const tokens = client({ now: () => now });
    const first = await tokens.getToken();
    now = 3_500_000;
    expect(await tokens.getToken()).toBe(first);
    answer = () => ok('120');
    now = 3_600_000;
    const second = await tokens.getToken();
    now += 107_000; // 120 s minus a 12 s margin (10% of a short lifetime)
    expect(await tokens.getToken()).toBe(second);
    now += 2_000;
    expect(await tokens.getToken()).not.toBe(second);
  });

  it('makes one request for 100 concurrent callers with an empty cache', async () => {
    answer = () => ({ ...ok(), delayMs: 50 });
    const tokens = client();
    const values = await Promise.all(Array.from({ length: 100 }, () => tokens.getToken()));
    expect(new Set(values).size).toBe(1);
    expect(requests).toHaveLength(1);
  });

  it('renews after invalidate, once for a burst of 401s on the same token', async () => {
    answer = () => ok();
    const tokens = client();
    const old = await tokens.getToken();
    for (let i = 0; i < 10; i++) tokens.invalidate(old);
    const renewed = await Promise.all(Array.from({ length: 10 }, () => tokens.getToken()));
    expect(new Set(renewed).size).toBe(1);
    tokens.invalidate(old); // stale: must not drop the new token
    expect(await tokens.getToken()).toBe(renewed[0]);
    expect(requests).toHaveLength(2);
  });

  it.each([
    [{ token_type: 'Bearer', expires_in: 3600 }, /access_token is missing/],
    [{ access_token: '', token_type: 'Bearer' }, /access_token is empty/],
    [{ access_token: 'x', token_type: 'mac' }, /token_type is "mac", not Bearer/],
    [{ access_token: 'x' }, /token_type is missing/],
    [{ access_token: 'x', token_type: 'Bearer', expires_in: -5 }, /expires_in is not positive/],
    ['<html>login</html>', /body is not a JSON object: <html>login<\/html>/],
  ])('rejects a token response %j clearly, without retrying', async (body, pattern) => {
    answer = () => ({ status: 200, body });
    const err = await client()
      .getToken()
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TokenError);
    expect(err).toMatchObject({ code: 'ERR_TOKEN_RESPONSE' });
    expect((err as Error).message).toMatch(pattern);
    expect(requests).toHaveLength(1);
  });

  it('reports invalid_client without retrying and without the secret', async () => {
    answer = (_req, body) => ({
      status: 401,
      body: { error: 'invalid_client', error_description: `unknown secret ${new URLSearchParams(body).get('client_secret')}` },
    });
    const err = (await client()
      .getToken()
      .catch((e: unknown) => e)) as TokenError;
    expect(err).toBeInstanceOf(TokenError);
    expect(err.code).toBe('ERR_TOKEN_REQUEST');
    expect(err.status).toBe(401);
    expect(err.message).toContain('HTTP 401');
    expect(err.message).toContain('invalid_client');
    expect(err.message).not.toContain('p@ss:word+1');
    expect(requests).toHaveLength(1);
  });

  it('masks the secret in every form a server could echo: raw, encoded, in the Basic header', async () => {
    for (const authMethod of ['client_secret_post', 'client_secret_basic'] as const) {
      answer = (req, body) => ({ status: 400, body: `echo: ${body} ${req.headers.authorization ?? ''} ${decodeURIComponent(body)}` });
      const err = (await client({ authMethod })
        .getToken()
        .catch((e: unknown) => e)) as TokenError;
      expect(err.message).toContain('echo:');
      for (const form of ['p@ss:word+1', 'p%40ss%3Aword%2B1', Buffer.from('my+client:p%40ss%3Aword%2B1').toString('base64')]) {
        expect(err.message, `${authMethod}: ${form}`).not.toContain(form);
      }
    }
  });

  it('quotes the server as it answered when the secret is one character, and masks the secret standing as a word', async () => {
    // A 1-character secret occurs inside most words; only a whole occurrence is the secret.
    answer = () => ({ status: 401, body: { error: 'invalid_client', error_description: 'unknown client or wrong secret' } });
    const wrong = (await client({ clientSecret: 't' })
      .getToken()
      .catch((e: unknown) => e)) as TokenError;
    expect(wrong).toBeInstanceOf(TokenError);
    expect(wrong.message).toContain('HTTP 401: invalid_client (unknown client or wrong secret)');
    expect(wrong.message).not.toContain('[redacted]');

    answer = () => ({ status: 400, body: 'the client at gate t sent secret t; try that test text later' });
    const echoed = (await client({ clientSecret: 't' })
      .getToken()
      .catch((e: unknown) => e)) as TokenError;
    expect(echoed.message).toContain('the client at gate [redacted] sent secret [redacted]; try that test text later');
  });

  it('makes a final token failure non-retryable, so API retries do not repeat the token retries', async () => {
    answer = () => ({ status: 503, body: { error: 'temporarily_unavailable' } });
    const err = (await client()
      .getToken()
      .catch((e: unknown) => e)) as TokenError;
    expect(requests).toHaveLength(3); // maxAttempts of the token request itself
    expect(err.retryable).toBe(false);
    expect(err.status).toBe(503);
  });

  it('retries 503 from the token endpoint, then succeeds', async () => {
    let n = 0;
    answer = () => (++n < 3 ? { status: 503, body: { error: 'temporarily_unavailable' } } : ok());
    await expect(client().getToken()).resolves.toMatch(/^tok-/);
    expect(requests).toHaveLength(3);
  });

  it('fails with ERR_TOKEN_REQUEST when the endpoint is down, after bounded attempts', async () => {
    const down = new URL('http://127.0.0.1:1/connect/token');
    const err = (await client({ tokenUrl: down })
      .getToken()
      .catch((e: unknown) => e)) as TokenError;
    expect(err).toBeInstanceOf(TokenError);
    expect(err.code).toBe('ERR_TOKEN_REQUEST');
    expect(err.message).toContain('ECONNREFUSED');
  });

  it('counts token requests by outcome', async () => {
    const outcomes: string[] = [];
    answer = () => ok();
    await client({ onTokenRequest: (o) => outcomes.push(o) }).getToken();
    answer = () => ({ status: 400, body: { error: 'invalid_scope' } });
    await client({ onTokenRequest: (o) => outcomes.push(o) })
      .getToken()
      .catch(() => undefined);
    expect(outcomes).toEqual(['success', 'failure']);
  });
});

describe('TokenClient with a secret file (CLIENT_SECRET_FILE)', () => {
  let dir: string;
  let file: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'ae-token-secret-'));
    file = join(dir, 'client_secret');
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  const sentSecrets = () => requests.map((r) => new URLSearchParams(r.body).get('client_secret'));
  const fromFile = (overrides: Partial<TokenClientOptions> = {}) => client({ clientSecret: 'read-at-start', clientSecretFile: file, ...overrides });

  it('reads the file again for every token request, so a rotated secret applies at the next one', async () => {
    writeFileSync(file, 'first-secret\n');
    answer = () => ok();
    const tokens = fromFile();
    tokens.invalidate(await tokens.getToken());
    writeFileSync(file, 'second-secret\n');
    await tokens.getToken();
    expect(sentSecrets()).toEqual(['first-secret', 'second-secret']);
  });

  it('warns once when a secret rotated into the file is shorter than 8 characters, naming the file and not the secret', async () => {
    writeFileSync(file, 'long-enough-secret\n');
    answer = () => ok();
    const warnings: string[] = [];
    const log = createLogger('warn', { format: 'json', destination: { write: (line: string) => void warnings.push(line) } });
    const tokens = fromFile({ clientSecret: 'long-enough-secret', log });
    tokens.invalidate(await tokens.getToken());
    expect(warnings).toEqual([]);
    writeFileSync(file, 'short\n');
    tokens.invalidate(await tokens.getToken());
    await tokens.getToken();
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain('CLIENT_SECRET_FILE now holds a client secret shorter than 8 characters');
    expect(warnings[0]).not.toContain('short"');
  });

  it('fails the token request without sending it when the file is gone or empty, naming the file and not the secret', async () => {
    const reasons: string[] = [];
    for (const [content, problem] of [
      [undefined, 'cannot be read (ENOENT)'],
      ['\n', 'is empty'],
    ] as const) {
      rmSync(file, { force: true });
      if (content !== undefined) writeFileSync(file, content);
      answer = () => ok();
      const err = (await fromFile({ onAttemptFailed: (r) => reasons.push(r) })
        .getToken()
        .catch((e: unknown) => e)) as TokenError;
      expect(err).toBeInstanceOf(TokenError);
      expect(err.code).toBe('ERR_TOKEN_REQUEST');
      expect(err.message).toBe(`token request not sent: CLIENT_SECRET_FILE ${file} ${problem}`);
      expect(err.message).not.toContain('read-at-start');
    }
    expect(requests).toHaveLength(0);
    expect(reasons).toEqual(['secret_file', 'secret_file']);
  });

  it('after 401 invalid_client, reads the file again and tries once more when it changed', async () => {
    writeFileSync(file, 'old-secret\n');
    answer = (_req, body) => {
      if (new URLSearchParams(body).get('client_secret') === 'new-secret') return ok();
      // The identity host took the rotated secret first; the file shows it while this answer is on its way.
      writeFileSync(file, 'new-secret\n');
      return { status: 401, body: { error: 'invalid_client', error_description: 'unknown client or wrong secret' } };
    };
    await expect(fromFile().getToken()).resolves.toMatch(/^tok-/);
    expect(sentSecrets()).toEqual(['old-secret', 'new-secret']);
  });

  it('after 401 invalid_client with the file unchanged, fails after one request', async () => {
    writeFileSync(file, 'wrong-secret\n');
    answer = () => ({ status: 401, body: { error: 'invalid_client' } });
    const err = (await fromFile()
      .getToken()
      .catch((e: unknown) => e)) as TokenError;
    expect(err.status).toBe(401);
    expect(err.message).toContain('invalid_client');
    expect(sentSecrets()).toEqual(['wrong-secret']);
  });
});
