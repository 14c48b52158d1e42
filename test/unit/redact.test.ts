import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { displayUrl, redactSecrets } from '../../src/errors.js';
import { REDACTED } from '../../src/redact.js';
import { createLogger } from '../../src/log.js';
import { loadConfig } from '../../src/config.js';
import { AnalyticsClient } from '../../src/upstream/analytics.js';
import { excerpt } from '../../src/upstream/http.js';

describe('redactSecrets', () => {
  it('leaves words that merely contain a short secret intact', () => {
    const text = 'unknown client or wrong secret';
    expect(redactSecrets(text, ['t'])).toBe(text);
    expect(redactSecrets('attempt to let the tenant start', ['t'])).toBe('attempt to let the tenant start');
    expect(redactSecrets(text, ['e', 'n', 'o', 'r'])).toBe(text);
  });

  it('masks every whole occurrence: at the ends, between spaces and punctuation', () => {
    expect(redactSecrets('t', ['t'])).toBe(REDACTED);
    expect(redactSecrets('t is wrong, not t; "t" (t) t=t', ['t'])).toBe('[redacted] is wrong, not [redacted]; "[redacted]" ([redacted]) [redacted]=[redacted]');
    expect(redactSecrets('secret=S3CRET-needle&x=1', ['S3CRET-needle'])).toBe('secret=[redacted]&x=1');
  });

  it('does not mask a secret running into a word, in any script', () => {
    expect(redactSecrets('abc_secret abcsecret secret9 été', ['secret', 'té'])).toBe('abc_secret abcsecret secret9 été');
  });

  it('never re-masks its own output, whatever the secrets', () => {
    // A secret that is (part of) the mask itself: one pass, so "[redacted]" is not looked into again.
    expect(redactSecrets('redacted d a', ['redacted', 'd', 'a', 'e'])).toBe('[redacted] [redacted] [redacted]');
    expect(redactSecrets('x [redacted] y', ['redacted'])).toBe('x [[redacted]] y');
  });

  it('bounds a secret that begins or ends with punctuation by that punctuation', () => {
    expect(redactSecrets('Basic bXk6cGFzcw== sent', ['bXk6cGFzcw=='])).toBe(`Basic ${REDACTED} sent`);
    expect(redactSecrets('x+p@ss:word+1+y', ['+p@ss:word+1+'])).toBe(`x${REDACTED}y`);
  });

  it('treats regular expression characters in a secret literally, and prefers the longest secret', () => {
    expect(redactSecrets('a.b a+b (a) a$b', ['a.b', '(a)', 'a$b'])).toBe(`${REDACTED} a+b ${REDACTED} ${REDACTED}`);
    expect(redactSecrets('abc-def abc', ['abc', 'abc-def'])).toBe(`${REDACTED} ${REDACTED}`);
  });

  it('ignores empty secrets and returns the text unchanged without secrets', () => {
    expect(redactSecrets('any text', ['', ''])).toBe('any text');
    expect(redactSecrets('any text', [])).toBe('any text');
  });
});

describe('displayUrl', () => {
  it('shows scheme, host, port and path, never the user info, query or fragment', () => {
    expect(displayUrl(new URL('http://statuser:UrlPass-Stat-123@127.0.0.1:8080/api/?token=t0k#f'))).toBe('http://127.0.0.1:8080/api/');
    expect(displayUrl(new URL('https://only-user@statistics.example.com'))).toBe('https://statistics.example.com/');
    expect(displayUrl(new URL('https://statistics.example.com/a b'))).toBe('https://statistics.example.com/a%20b');
  });
});

describe('excerpt', () => {
  it('quotes an upstream body as sent, masking only whole occurrences of the secrets', () => {
    expect(excerpt('{"error":"invalid_client","error_description":"unknown client or wrong secret"}', 120, ['t'])).toBe(
      '{"error":"invalid_client","error_description":"unknown client or wrong secret"}',
    );
    expect(excerpt('echo client_secret=t&scope=api.external', 120, ['t'])).toBe('echo client_secret=[redacted]&scope=api.external');
  });

  it('masks before shortening, so a cut never shows the start of a secret', () => {
    const secret = 'S3CRET-needle-4c1d';
    const text = excerpt(`${'x'.repeat(110)} ${secret} and more`, 115, [secret]);
    expect(text).not.toContain('S3C');
    expect(text.endsWith('…')).toBe(true);
  });
});

describe('short client secrets', () => {
  const base = { STATISTICS_URL: 'https://stats.test', AUTH_URL: 'https://auth.test', CLIENT_ID: 'id' };

  async function warnings(
    secret: string,
    env: Record<string, string> = { CLIENT_SECRET: secret },
  ): Promise<Array<{ level: string; msg: string; variable?: string }>> {
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        lines.push(chunk.toString());
        done();
      },
    });
    const client = AnalyticsClient.fromConfig(loadConfig({ ...base, ...env }).sources[0]!.upstream!, {
      log: createLogger('warn', { format: 'json', destination: sink }),
    });
    await client.close();
    const all = lines.map((l) => JSON.parse(l) as { level: string; msg: string; variable?: string });
    for (const line of lines) expect(line).not.toContain(`"${secret}"`);
    return all;
  }

  it('warns at start about a secret shorter than 8 characters, naming the variable and never the value', async () => {
    const logged = await warnings('t0Ps3c');
    expect(logged).toHaveLength(1);
    expect(logged[0]).toMatchObject({ level: 'warn', variable: 'CLIENT_SECRET' });
    expect(logged[0]!.msg).toContain('CLIENT_SECRET holds a client secret shorter than 8 characters');
    expect(logged[0]!.msg).not.toContain('t0Ps3c');
  });

  it('names CLIENT_SECRET_FILE when the secret came from a file', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ae-redact-'));
    try {
      writeFileSync(join(dir, 'secret'), 'abc\n');
      const logged = await warnings('abc', { CLIENT_SECRET_FILE: join(dir, 'secret') });
      expect(logged.map((l) => l.variable)).toEqual(['CLIENT_SECRET_FILE']);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('says nothing about a secret of 8 characters or more', async () => {
    expect(await warnings('8chars-!')).toEqual([]);
  });
});
