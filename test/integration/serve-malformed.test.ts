/**
 * Issue 25 item 4: a request line that does not parse (`GET //[`, or bytes that are not HTTP),
 * sent raw over a socket, answers 400 before authentication, is logged at most once per interval
 * with a count and never at error level; the scrape goes on answering.
 */
import { writeFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { connect as connectTls } from 'node:tls';
import { join } from 'node:path';
import bcrypt from 'bcryptjs';
import { request } from 'undici';
import { describe, expect, it, onTestFinished } from 'vitest';
import { createTestPki } from '../helpers/certs.js';
import { runConcurrently } from '../helpers/concurrent.js';
import { useTestDatabase } from '../helpers/db.js';
import { captureLog, type CapturedLog } from '../helpers/log-capture.js';
import { scratchDir } from '../helpers/scratch.js';
import { useLoggedServes } from '../helpers/serve-in-process.js';

const db = useTestDatabase();
const { serve, running } = useLoggedServes(db, 'malformed');

/** The target's request line not a URL (the handler's parse fails) / bytes Node's HTTP parser refuses. */
const BAD_TARGET = 'GET //[ HTTP/1.1\r\nHost: localhost\r\n\r\n';
const NOT_HTTP = 'GET ][ HTTP/1.1\r\nHost: localhost\r\n\r\n';

/** A new connection to `url` (TLS trusting `ca` for https) that writes `raw` once connected. */
function open(url: string, raw: string, ca?: string): Socket {
  const { protocol, hostname, port } = new URL(url);
  const socket =
    protocol === 'https:'
      ? connectTls({ host: hostname, port: Number(port), servername: 'localhost', ca }, () => socket.write(raw))
      : connect({ host: hostname, port: Number(port) }, () => socket.write(raw));
  socket.setEncoding('latin1');
  return socket;
}

/** Sends `raw` on a new connection and resolves with the status of the first response line (0 when the server closed without one). */
function rawStatus(url: string, raw: string, ca?: string): Promise<number> {
  return new Promise((resolve, reject) => {
    let received = '';
    const socket = open(url, raw, ca);
    socket.on('data', (chunk: string) => {
      received += chunk;
      const line = /^HTTP\/1\.1 (\d{3})/.exec(received);
      if (line !== null) {
        socket.destroy();
        resolve(Number(line[1]));
      }
    });
    socket.on('close', () => resolve(0));
    socket.on('error', reject);
  });
}

/** Sends `raw` on a new TCP connection and resolves with every response's status read until the server closes it. */
function rawStatusesUntilClose(url: string, raw: string): Promise<number[]> {
  return new Promise((resolve, reject) => {
    let received = '';
    const socket = open(url, raw);
    socket.on('data', (chunk: string) => (received += chunk));
    socket.on('close', () => resolve([...received.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((m) => Number(m[1]))));
    socket.on('error', reject);
  });
}

/**
 * `count` raw requests, `concurrency` connections at a time; every status answered. Half the
 * per-client connection limit (METRICS_MAX_CONNECTIONS_PER_CLIENT, 32): a closed connection may
 * still be counted by serve when the one that replaces it arrives.
 */
async function rawStatuses(url: string, raw: string, count: number, concurrency = 16, ca?: string): Promise<number[]> {
  return runConcurrently(count, concurrency, () => rawStatus(url, raw, ca));
}

const malformedLines = (capture: CapturedLog) => capture.lines().filter((l) => typeof l.msg === 'string' && /malformed/.test(l.msg));
const errorLines = (capture: CapturedLog) => capture.lines().filter((l) => l.level === 'error' || l.level === 'fatal');

describe('malformed requests', () => {
  it('answer 400 each, are logged in one line with a count (never at error), and /metrics still answers', async () => {
    const capture = captureLog();
    const s = await serve(capture);

    const targets = await rawStatuses(s.url, BAD_TARGET, 1000);
    const notHttp = await rawStatuses(s.url, NOT_HTTP, 200);
    expect(targets).toHaveLength(1000);
    expect(new Set(targets)).toEqual(new Set([400]));
    expect(new Set(notHttp)).toEqual(new Set([400]));

    const scrape = await request(`${s.url}/metrics`, { reset: true });
    expect(scrape.statusCode).toBe(200);
    expect(await scrape.body.text()).toContain('analytics_exporter_build_info');

    expect(errorLines(capture)).toEqual([]);
    // Within the interval (60 s): the first request's line only.
    const during = malformedLines(capture);
    expect(during).toHaveLength(1);
    expect(during[0]).toMatchObject({ level: 'warn', count: 1 });

    // The rest are counted, and told in one line when the server closes.
    await running.pop()!.stop();
    const after = malformedLines(capture);
    expect(after).toHaveLength(2);
    expect(after.map((l) => l.level)).toEqual(['warn', 'warn']);
    expect(after.reduce((n, l) => n + (l.count as number), 0)).toBe(1200);
    expect(after[1]).toMatchObject({ count: 1199, kinds: { target: 999, http: 200 }, lastRemote: '127.0.0.1' });
    // Never the request's bytes.
    expect(capture.text()).not.toContain('//[');
    expect(errorLines(capture)).toEqual([]);
  });

  it("keeps Node's other answers: 431 for headers too large; a pipelined malformed request after a good one", async () => {
    const capture = captureLog();
    const s = await serve(capture);
    expect(await rawStatus(s.url, `GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`)).toBe(431);
    const healthz = 'GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n';
    expect(await rawStatusesUntilClose(s.url, `${healthz}${BAD_TARGET}${healthz}`)).toEqual([200, 400]);
    expect(await rawStatus(s.url, 'HEAD //[ HTTP/1.1\r\nHost: localhost\r\n\r\n')).toBe(400);
    expect(errorLines(capture)).toEqual([]);
  });

  it.each(['plain HTTP', 'TLS'])('with basic auth over %s, a malformed request answers 400 (not 401 or 500) before authentication', async (transport) => {
    const capture = captureLog();
    const dir = scratchDir('malformed-auth-');
    const pki = createTestPki();
    onTestFinished(() => pki.cleanup());
    const tls = transport === 'TLS' ? `tls_server_config:\n  cert_file: ${pki.serverCertFile}\n  key_file: ${pki.serverKeyFile}\n` : '';
    const file = join(dir, 'web.yml');
    writeFileSync(file, `${tls}basic_auth_users:\n  prometheus: '${bcrypt.hashSync('scrape-pass-7', 6)}'\n`);
    const s = await serve(capture, { WEB_CONFIG_FILE: file });
    expect(s.url.startsWith(transport === 'TLS' ? 'https:' : 'http:')).toBe(true);

    expect(await rawStatuses(s.url, BAD_TARGET, 50, 8, pki.ca)).toEqual(Array<number>(50).fill(400));
    expect(await rawStatuses(s.url, NOT_HTTP, 10, 8, pki.ca)).toEqual(Array<number>(10).fill(400));
    // The same request line with a valid target is held at the door.
    expect(await rawStatus(s.url, 'GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n', pki.ca)).toBe(401);
    const authorization = `Basic ${Buffer.from('prometheus:scrape-pass-7').toString('base64')}`;
    expect(await rawStatus(s.url, `GET /metrics HTTP/1.1\r\nHost: localhost\r\nAuthorization: ${authorization}\r\n\r\n`, pki.ca)).toBe(200);
    expect(errorLines(capture)).toEqual([]);
  });
});
