/**
 * A test-only analytics API in front of an upstream (the simulator): E7 (`GET
 * <base>/analytics/prometheus`) is answered with a fixed text of the test's own, every other
 * request (E6, and E0 if pointed here) is passed through unchanged. So a test controls exactly
 * which E7 families exist, independently of the simulator's set, while E6 still has records.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface E7Front {
  /** Base URL to use as STATISTICS_URL (with a trailing slash). */
  url: string;
  /** E7 requests answered so far. */
  e7Requests: number;
  close(): Promise<void>;
}

/**
 * Starts the front on a free loopback port. E7 answers HTTP 401 without a bearer token (the
 * reference's Authentication: every call sends one), and otherwise 200 with `text` as Prometheus
 * text format 0.0.4, whatever `startDate`/`toDate` say.
 *
 * @param upstream base URL of the upstream passed through (e.g. the simulator's `url`).
 * @throws the listen error when no port can be had.
 */
export async function startE7Front(upstream: string, text: string): Promise<E7Front> {
  const base = new URL(upstream);
  const e7Path = new URL('analytics/prometheus', base.href.endsWith('/') ? base : new URL(`${base.href}/`)).pathname;
  const front: E7Front = { url: '', e7Requests: 0, close: async () => undefined };
  const server = http.createServer((req, res) => {
    const path = new URL(req.url ?? '/', 'http://front').pathname;
    if (req.method === 'GET' && path === e7Path) {
      front.e7Requests++;
      const authorised = /^Bearer \S+$/.test(req.headers.authorization ?? '');
      res.writeHead(authorised ? 200 : 401, { 'content-type': 'text/plain; version=0.0.4; charset=utf-8', date: new Date().toUTCString() });
      res.end(authorised ? text : 'missing bearer token\n');
      return;
    }
    const forwarded = http.request(
      { host: base.hostname, port: base.port, method: req.method, path: req.url, headers: { ...req.headers, host: base.host } },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    forwarded.on('error', (error) => res.destroy(error));
    req.pipe(forwarded);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  const { port } = server.address() as AddressInfo;
  front.url = `http://127.0.0.1:${port}/`;
  front.close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return front;
}
