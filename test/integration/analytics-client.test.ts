import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { TokenError, UpstreamError } from '../../src/errors.js';
import { silentLogger } from '../helpers/silent-logger.js';
import { AnalyticsClient, type AnalyticsRecord, type ClientObserver } from '../../src/upstream/analytics.js';
import { NO_FAULTS, startSimulator, type Simulator } from '@analytics-exporter/simulator';
import { createTestPki, type TestPki } from '../helpers/certs.js';

const SECRET = 'client-test-secret';
let sim: Simulator;
const clients: AnalyticsClient[] = [];

const FROM = new Date('2026-10-20T00:00:00Z');
const TO = new Date('2026-10-21T00:00:00Z');

function makeClient(env: Record<string, string> = {}, observer?: ClientObserver, url = sim.url): AnalyticsClient {
  const config = loadConfig({
    STATISTICS_URL: url,
    AUTH_URL: url,
    CLIENT_ID: 'test-client',
    CLIENT_SECRET: SECRET,
    UPSTREAM_RETRY_MAX_DELAY: '5s',
    ...env,
  });
  // random() = 0: full-jitter backoff waits 0 ms, so retry tests do not sleep (Retry-After still does).
  const client = AnalyticsClient.fromConfig(config.sources[0]!.upstream!, { log: silentLogger, random: () => 0, ...(observer ? { observer } : {}) });
  clients.push(client);
  return client;
}

/** Every page of the range, one after the other, as page 1 counts them. */
async function collect(client: AnalyticsClient, pageSize = 1000): Promise<AnalyticsRecord[]> {
  const first = await client.fetchPage({ startDate: FROM, toDate: TO, pageSize, pageNumber: 1 });
  const records = [...first.data];
  for (let pageNumber = 2; pageNumber <= first.totalPages; pageNumber++) {
    records.push(...(await client.fetchPage({ startDate: FROM, toDate: TO, pageSize, pageNumber })).data);
  }
  return records;
}

beforeAll(async () => {
  sim = await startSimulator({ port: 0, clientId: 'test-client', clientSecret: SECRET, records: 60_000 });
});
afterEach(async () => {
  // A fault left queued would leak into the next test.
  expect(sim.pendingFaults()).toBe(0);
  Object.assign(sim.faults, NO_FAULTS);
  await Promise.all(clients.splice(0).map((c) => c.close()));
});
afterAll(async () => {
  await sim.close();
});

describe('AnalyticsClient against the simulator', () => {
  it('pages through a range and returns exactly the records of that range, in order', async () => {
    const expected = [...sim.dataset.iterate(FROM, TO, true)];
    expect(expected.length).toBeGreaterThan(1500); // several pages of 1000
    expect(await collect(makeClient())).toEqual(expected);
  });

  it('sends the reference parameters', async () => {
    const page = await makeClient().fetchPage({ startDate: FROM, toDate: TO, pageSize: 7, pageNumber: 3 });
    expect(page).toMatchObject({ pageNumber: 3, pageSize: 7, totalRecords: sim.dataset.count(FROM, TO, true) });
    expect(page.data).toEqual(sim.dataset.page(FROM, TO, true, 14, 7));
  });

  it('causes exactly one token request for 100 concurrent API calls with an empty cache', async () => {
    const client = makeClient();
    const before = sim.stats.tokenRequests;
    const pages = await Promise.all(Array.from({ length: 100 }, (_, i) => client.fetchPage({ startDate: FROM, toDate: TO, pageSize: 1, pageNumber: i + 1 })));
    expect(pages.map((p) => p.pageNumber)).toEqual(Array.from({ length: 100 }, (_, i) => i + 1));
    expect(sim.stats.tokenRequests - before).toBe(1);
  });

  it('works with client_secret_basic', async () => {
    const page = await makeClient({ TOKEN_AUTH_METHOD: 'client_secret_basic' }).fetchPage({ startDate: FROM, pageSize: 1 });
    expect(page.data).toHaveLength(1);
  });

  it('renews a token revoked early (401) and repeats the call once', async () => {
    const client = makeClient();
    await client.fetchPage({ startDate: FROM, pageSize: 1 });
    const before = sim.stats.tokenRequests;
    sim.revokeAllTokens();
    await expect(client.fetchPage({ startDate: FROM, pageSize: 1 })).resolves.toMatchObject({ pageNumber: 1 });
    expect(sim.stats.tokenRequests - before).toBe(1);
  });

  it('fails with 401 when the renewed token is refused too', async () => {
    const client = makeClient();
    sim.queueFault({ status: 401 }, 2, 'analytics');
    const err = await client.fetchPage({ startDate: FROM, pageSize: 1 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UpstreamError);
    expect(err).toMatchObject({ code: 'ERR_UPSTREAM_HTTP', status: 401, endpoint: 'analytics' });
  });

  it("waits for the server's Retry-After on 429, then succeeds", async () => {
    const retries: number[] = [];
    const client = makeClient({}, { onRetry: (e) => retries.push(e.delayMs) });
    sim.queueFault({ status: 429, retryAfter: '1' }, 1, 'analytics');
    const started = Date.now();
    await expect(client.fetchPage({ startDate: FROM, pageSize: 1 })).resolves.toMatchObject({ pageNumber: 1 });
    expect(Date.now() - started).toBeGreaterThanOrEqual(950);
    expect(retries).toEqual([1000]);
  });

  it('gives up at once when Retry-After exceeds the cap', async () => {
    const client = makeClient();
    sim.queueFault({ status: 503, retryAfter: '120' }, 1, 'analytics');
    const before = sim.stats.analyticsRequests;
    const err = (await client.fetchPage({ startDate: FROM, pageSize: 1 }).catch((e: unknown) => e)) as UpstreamError;
    expect(err).toMatchObject({ code: 'ERR_UPSTREAM_HTTP', status: 503 });
    expect(err.message).toContain('Retry-After 120s');
    expect(sim.stats.analyticsRequests - before).toBe(1);
  });

  it('retries 500, 502, 503, 504 and network resets; not 400 or 404', async () => {
    const client = makeClient({ UPSTREAM_MAX_ATTEMPTS: '6' });
    for (const status of [500, 502, 503, 504]) sim.queueFault({ status }, 1, 'analytics');
    sim.queueFault('reset-mid-body', 1, 'analytics');
    await expect(client.fetchPage({ startDate: FROM, pageSize: 1 })).resolves.toMatchObject({ pageNumber: 1 });

    for (const status of [400, 404]) {
      sim.queueFault({ status }, 1, 'analytics');
      const before = sim.stats.analyticsRequests;
      await expect(client.fetchPage({ startDate: FROM, pageSize: 1 })).rejects.toMatchObject({ code: 'ERR_UPSTREAM_HTTP', status });
      expect(sim.stats.analyticsRequests - before).toBe(1);
    }
  });

  it('stops after UPSTREAM_MAX_ATTEMPTS with the last error', async () => {
    const client = makeClient({ UPSTREAM_MAX_ATTEMPTS: '3' });
    sim.queueFault({ status: 503 }, 3, 'analytics');
    const before = sim.stats.analyticsRequests;
    await expect(client.fetchPage({ startDate: FROM, pageSize: 1 })).rejects.toMatchObject({ status: 503 });
    expect(sim.stats.analyticsRequests - before).toBe(3);
  });

  it.each([
    ['malformed-json', /body is not valid JSON/],
    ['bad-envelope', /page envelope is invalid: data/],
    ['wrong-content-type', /content type text\/html, expected application\/json/],
    ['inconsistent-total-pages', /totalPages \d+ does not match totalRecords/],
    ['oversized-page', /more than pageSize/],
  ] as const)('rejects a %s body with a typed error naming the endpoint', async (fault, pattern) => {
    const client = makeClient({ UPSTREAM_MAX_ATTEMPTS: '2' });
    sim.queueFault(fault, 2, 'analytics');
    const err = (await client.fetchPage({ startDate: FROM, toDate: TO, pageSize: 1 }).catch((e: unknown) => e)) as UpstreamError;
    expect(err).toBeInstanceOf(UpstreamError);
    expect(err.code).toBe('ERR_UPSTREAM_BODY');
    expect(err.message).toMatch(/^E6 http:\/\/127\.0\.0\.1:\d+\/analytics: /);
    expect(err.message).toMatch(pattern);
  });

  it('passes an empty page of a non-empty result, unretried: a paging limit or a count that lies is for the reader to judge', async () => {
    const client = makeClient({ UPSTREAM_MAX_ATTEMPTS: '2' });
    sim.queueFault('empty-page', 1, 'analytics');
    const before = sim.stats.analyticsRequests;
    const page = await client.fetchPage({ startDate: FROM, toDate: TO, pageSize: 1 });
    expect(page.data).toEqual([]);
    expect(page.totalRecords).toBeGreaterThan(0);
    expect(sim.stats.analyticsRequests - before).toBe(1);
  });

  it('recovers from one malformed body by retrying', async () => {
    const client = makeClient();
    sim.queueFault('malformed-json', 1, 'analytics');
    await expect(client.fetchPage({ startDate: FROM, pageSize: 5 })).resolves.toMatchObject({ pageNumber: 1 });
  });

  it('times out a stalled body and retries', async () => {
    sim.faults.stallMs = 1500;
    const client = makeClient({ UPSTREAM_TIMEOUT: '500ms' });
    sim.queueFault('slow-body', 1, 'analytics');
    await expect(client.fetchPage({ startDate: FROM, pageSize: 5 })).resolves.toMatchObject({ pageNumber: 1 });
    sim.queueFault('slow-body', 2, 'analytics');
    await expect(makeClient({ UPSTREAM_TIMEOUT: '500ms', UPSTREAM_MAX_ATTEMPTS: '2' }).fetchPage({ startDate: FROM, pageSize: 5 })).rejects.toMatchObject({
      code: 'ERR_UPSTREAM_TIMEOUT',
    });
  });

  it('fetches the E7 text and rejects a non-text body', async () => {
    const client = makeClient();
    const text = await client.fetchPrometheusText({ startDate: FROM, toDate: TO });
    expect(text).toMatch(/^userlogin_event_count\{.*\} \d+$/m);
    sim.queueFault('wrong-content-type', 2, 'prometheus');
    await expect(makeClient({ UPSTREAM_MAX_ATTEMPTS: '2' }).fetchPrometheusText()).rejects.toMatchObject({ code: 'ERR_UPSTREAM_BODY', endpoint: 'prometheus' });
  });

  it('reports every response to the observer', async () => {
    const events: string[] = [];
    const client = makeClient({}, { onResponse: (e) => events.push(`${e.endpoint} ${e.status}`), onTokenRequest: (o) => events.push(`token ${o}`) });
    sim.queueFault({ status: 503 }, 1, 'analytics');
    await client.fetchPage({ startDate: FROM, pageSize: 1 });
    await client.fetchPrometheusText();
    expect(events).toEqual(['token success', 'analytics 503', 'analytics 200', 'prometheus 200']);
  });

  it('names a wrong secret as a token error', async () => {
    const err = await makeClient({ CLIENT_SECRET: 'nope' })
      .fetchPage({ startDate: FROM, pageSize: 1 })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TokenError);
    expect((err as Error).message).toMatch(/HTTP 401.*invalid_client/);
  });
});

describe('mutual TLS', () => {
  let pki: TestPki;
  let tlsSim: Simulator;

  beforeAll(async () => {
    pki = createTestPki();
    tlsSim = await startSimulator({
      port: 0,
      clientId: 'test-client',
      clientSecret: SECRET,
      records: 1000,
      tls: { cert: pki.serverCert, key: pki.serverKey, ca: pki.ca, requireClientCert: true },
    });
  });
  afterAll(async () => {
    await tlsSim?.close();
    pki?.cleanup();
  });

  it('presents the client certificate on the token and API requests', async () => {
    expect(tlsSim.url).toMatch(/^https:/);
    const client = makeClient(
      { TLS_CA_FILE: pki.caFile, TLS_CLIENT_CERT_FILE: pki.clientCertFile, TLS_CLIENT_KEY_FILE: pki.clientKeyFile },
      undefined,
      tlsSim.url,
    );
    await expect(client.fetchPage({ startDate: new Date('2026-10-01T00:00:00Z'), pageSize: 10 })).resolves.toMatchObject({ pageNumber: 1 });
    await expect(client.fetchPrometheusText()).resolves.toMatch(/_event_count/);
    expect(tlsSim.stats.tokenRequests).toBe(1);
  });

  it('is refused without the client certificate, as a token error that is not retried forever', async () => {
    const client = makeClient({ TLS_CA_FILE: pki.caFile, UPSTREAM_MAX_ATTEMPTS: '2' }, undefined, tlsSim.url);
    const err = await client.fetchPage({ startDate: new Date('2026-10-01T00:00:00Z'), pageSize: 10 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TokenError);
    expect((err as TokenError).code).toBe('ERR_TOKEN_REQUEST');
  });

  it('does not trust the private CA without TLS_CA_FILE', async () => {
    const client = makeClient({ TLS_CLIENT_CERT_FILE: pki.clientCertFile, TLS_CLIENT_KEY_FILE: pki.clientKeyFile }, undefined, tlsSim.url);
    const err = await client.fetchPage({ startDate: new Date('2026-10-01T00:00:00Z'), pageSize: 10 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TokenError);
    expect(String((err as Error).message)).toMatch(/certificate|self.signed|UNABLE_TO_VERIFY/i);
  });
});
