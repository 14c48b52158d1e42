/**
 * serve against hostile E7 upstreams (a small E0/E7 server on loopback, one path per source):
 * a text over UPSTREAM_SAMPLE_LIMIT, a line with 100,000 label pairs (UPSTREAM_LABEL_LIMIT) and a
 * multi-byte label value over UPSTREAM_LABEL_VALUE_LENGTH_LIMIT and a gzip body over its sample
 * limit once decoded each fail their source's read, once, not retried (`upstream_up 0`, reason
 * `limit`, a warning naming the limit, its value and the source) while
 * /metrics answers 200 and a source within the limits is served; the body over the sample limit
 * is abandoned, not read to its end; an error page (503) is judged by its status, not its body.
 */
import { createServer, type Server, type ServerResponse } from 'node:http';
import { gzipSync } from 'node:zlib';
import type { AddressInfo } from 'node:net';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig, type SourceConfig } from '../../src/config.js';
import { parseExposition } from '../../src/exposition/index.js';
import { createLogger } from '../../src/log.js';
import { startServe, type RunningServer } from '../../src/serve/lifecycle.js';
import { useTestDatabase } from '../helpers/db.js';
import { captureLog } from '../helpers/log-capture.js';

const db = useTestDatabase();

/** Sample lines the over-limit source streams, far more than its limit: the body is about 37 MB. */
const HUGE_SAMPLES = 1_000_000;
const line = (i: number): string => `userlogin_event_count{customer="c${i}",form="f"} ${i}\n`;

/** Bytes written of the huge body before its client went away, and whether it was all written. */
const huge = { written: 0, total: 0, finished: false, closed: false };

/** Writes the huge body with back-pressure, stopping when the client closes the connection. */
async function streamHuge(res: ServerResponse): Promise<void> {
  let wake: (() => void) | undefined;
  res.on('close', () => {
    huge.closed = true;
    wake?.();
  });
  res.on('drain', () => wake?.());
  for (let i = 0; i < HUGE_SAMPLES; i += 1000) {
    if (huge.closed) return;
    let chunk = '';
    for (let k = i; k < i + 1000; k++) chunk += line(k);
    huge.written += Buffer.byteLength(chunk);
    if (!res.write(chunk)) await new Promise<void>((resolve) => (wake = resolve));
  }
  huge.finished = true;
  res.end();
}

const BODIES: Record<string, () => string> = {
  fine: () => 'userlogin_event_count{customer="a"} 5\nuserlogin_event_count{customer="b"} 7\n',
  labels: () => `userlogin_event_count{${Array.from({ length: 100_000 }, (_, i) => `l${i}="v"`).join(',')}} 1\n`,
  // 1,025 two-byte characters: 2,050 bytes, over 2,048, though 1,025 characters are not.
  value: () => `userlogin_event_count{customer="${'é'.repeat(1025)}"} 1\n`,
};

let upstream: Server;
let upstreamUrl: string;
let server: RunningServer;
const log = captureLog();

beforeAll(async () => {
  for (let i = 0; i < HUGE_SAMPLES; i++) huge.total += Buffer.byteLength(line(i));
  upstream = createServer((req, res) => {
    const path = new URL(req.url ?? '/', 'http://x').pathname;
    if (path.endsWith('/connect/token')) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ access_token: 't', token_type: 'Bearer', expires_in: 3600 }));
      return;
    }
    const name = path.split('/')[1]!;
    if (name === 'error') {
      // An error page is judged by its status, whatever its body would break.
      res.writeHead(503, { 'content-type': 'text/plain' });
      res.end('unavailable\n'.repeat(10));
      return;
    }
    res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4', ...(name === 'gzip' ? { 'content-encoding': 'gzip' } : {}) });
    if (name === 'samples') void streamHuge(res);
    else if (name === 'gzip') res.end(gzipSync(BODIES.fine!().repeat(3)));
    else res.end(BODIES[name]!());
  });
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  upstreamUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;

  /** A source on its own path of the fake upstream, with the environment's limits as given. */
  const source = (name: string, env: Record<string, string> = {}): SourceConfig => ({
    ...loadConfig({ STATISTICS_URL: `${upstreamUrl}/${name}/`, AUTH_URL: `${upstreamUrl}/${name}/`, CLIENT_ID: 'c', CLIENT_SECRET: 's', ...env }).sources[0]!,
    name,
  });
  const base = loadConfig({ DATABASE_URL: db.url, DATABASE_SCHEMA: 'upstream_limits', METRICS_LISTEN: '127.0.0.1:0', SYNC_SCHEDULE: 'off' });
  // Defaults but for the sample limit, which the huge source breaks at 10,000 (the default 200,000 is the bench's).
  // gzip: 6 samples in gzip, over a limit of 5 once decoded.
  const sources = [
    source('fine'),
    source('samples', { UPSTREAM_SAMPLE_LIMIT: '10000' }),
    source('labels'),
    source('value'),
    source('gzip', { UPSTREAM_SAMPLE_LIMIT: '5' }),
    source('error', { UPSTREAM_SAMPLE_LIMIT: '1', UPSTREAM_MAX_ATTEMPTS: '1' }),
  ];
  server = await startServe({ ...base, sources }, createLogger('info', { format: 'json', destination: log }));
}, 60_000);

afterAll(async () => {
  await server?.stop();
  await new Promise((resolve) => upstream?.close(resolve));
});

describe('serve with upstreams over their limits', () => {
  it('answers 200, fails the reads over a limit with reason limit and a warning naming it, and serves the source within them', async () => {
    const res = await request(`${server.url}/metrics`, { headers: { 'x-prometheus-scrape-timeout-seconds': '20' } });
    const text = await res.body.text();
    expect(res.statusCode).toBe(200);
    const parsed = parseExposition(text);
    expect(parsed.invalid).toEqual([]);
    const value = (name: string, labels: Record<string, string>) =>
      parsed.families
        .find((family) => family.name === name)
        ?.samples.find((sample) => Object.entries(labels).every(([k, v]) => sample.labels.some(([n, w]) => n === k && w === v)))?.value;

    expect(value('analytics_exporter_upstream_up', { source: 'fine' })).toBe(1);
    expect(value('userlogin_event_count', { source: 'fine', customer: 'b' })).toBe(7);
    for (const source of ['samples', 'labels', 'value', 'gzip']) {
      expect(value('analytics_exporter_upstream_up', { source }), source).toBe(0);
      expect(value('analytics_exporter_upstream_errors_total', { source, reason: 'limit' }), source).toBe(1);
      // Not retried: the same text would break the same limit.
      expect(value('analytics_exporter_upstream_attempt_failures_total', { source, endpoint: 'prometheus', reason: 'limit' }), source).toBe(1);
    }
    expect(value('analytics_exporter_upstream_errors_total', { source: 'error', reason: 'http_503' })).toBe(1);
    expect(value('analytics_exporter_upstream_errors_total', { source: 'error', reason: 'limit' })).toBeUndefined();
    // No sample of a source over a limit is served.
    const served = parsed.families.find((family) => family.name === 'userlogin_event_count')!.samples;
    expect(new Set(served.map((sample) => sample.labels.find(([n]) => n === 'source')![1]))).toEqual(new Set(['fine']));

    const warnings = log.lines().filter((entry) => entry.level === 'warn' && entry.reason === 'limit');
    expect(warnings.map((entry) => [entry.source, entry.limit, entry.value, entry.setting]).sort()).toEqual(
      [
        ['labels', 'label_limit', 64, 'UPSTREAM_LABEL_LIMIT'],
        ['samples', 'sample_limit', 10_000, 'UPSTREAM_SAMPLE_LIMIT'],
        ['gzip', 'sample_limit', 5, 'UPSTREAM_SAMPLE_LIMIT'],
        ['value', 'label_value_length_limit', 2048, 'UPSTREAM_LABEL_VALUE_LENGTH_LIMIT'],
      ].sort(),
    );
    expect(warnings.find((entry) => entry.source === 'samples')!.msg).toContain(
      'E7 text of source samples is over its sample_limit of 10000 samples (UPSTREAM_SAMPLE_LIMIT) at line 10001',
    );

    // The huge body was abandoned: the connection closed long before its end.
    await expect.poll(() => huge.closed, { timeout: 10_000 }).toBe(true);
    expect(huge.finished).toBe(false);
    expect(huge.written).toBeLessThan(huge.total / 2);
  }, 60_000);
});
