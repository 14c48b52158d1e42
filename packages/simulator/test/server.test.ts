import { createServer } from 'node:net';
import { Command } from 'commander';
import { Agent, request } from 'undici';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { configureSimulateCommand, runSimulate } from '../src/cli.js';
import { DEMO_RECORD_INTERVAL_MS, demoDatasetBounds } from '../src/demo.js';
import { Dataset, EVENT_TYPES, escapeLabelValue, metricName, NO_FAULTS, startSimulator, type AnalyticsRecord, type Simulator } from '../src/index.js';
import { silentLogger } from '../src/log.js';
import { createTestPki, type TestPki } from './certs.js';

// Credentials with characters that form-encoding and Basic auth must carry intact.
const CLIENT_ID = 'test client:1';
const CLIENT_SECRET = 's3cret+/=:é x';
const FROM = new Date('2026-10-20T00:00:00Z');
const TO = new Date('2026-10-21T00:00:00Z');

interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
}

/** RFC 6749 appendix B: application/x-www-form-urlencoded of one value. */
const formEncode = (value: string) => encodeURIComponent(value).replace(/%20/g, '+');

let clock = 0;
let sim: Simulator;
const extra: Simulator[] = [];

async function call(url: string, init: { method?: string; headers?: Record<string, string>; body?: string; dispatcher?: Agent } = {}): Promise<Reply> {
  const res = await request(url, { method: (init.method ?? 'GET') as 'GET', headers: init.headers, body: init.body, dispatcher: init.dispatcher });
  return { status: res.statusCode, headers: res.headers, text: await res.body.text() };
}

function tokenRequest(base: string, fields: Record<string, string>, headers: Record<string, string> = {}): Promise<Reply> {
  return call(`${base}/connect/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
    body: new URLSearchParams(fields).toString(),
  });
}

async function tokenFor(s: Simulator = sim, id = CLIENT_ID, secret = CLIENT_SECRET): Promise<string> {
  const reply = await tokenRequest(s.url, { grant_type: 'client_credentials', client_id: id, client_secret: secret, scope: 'api.external' });
  expect(reply.status).toBe(200);
  return (JSON.parse(reply.text) as { access_token: string }).access_token;
}

function query(params: Record<string, string | number | Date | undefined>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v === undefined) continue;
    q.set(k, v instanceof Date ? v.toISOString() : String(v));
  }
  return q.toString();
}

function analytics(token: string | undefined, params: Record<string, string | number | Date | undefined>, s: Simulator = sim): Promise<Reply> {
  return call(`${s.url}/analytics?${query(params)}`, { headers: token === undefined ? {} : { authorization: `Bearer ${token}` } });
}

function prometheus(token: string, params: Record<string, string | number | Date | undefined> = {}, s: Simulator = sim): Promise<Reply> {
  return call(`${s.url}/analytics/prometheus?${query(params)}`, { headers: { authorization: `Bearer ${token}` } });
}

interface Envelope {
  pageNumber: number;
  pageSize: number;
  totalRecords: number;
  totalPages: number;
  data: AnalyticsRecord[];
}

async function pageOf(token: string, params: Record<string, string | number | Date | undefined>, s: Simulator = sim): Promise<Envelope> {
  const reply = await analytics(token, params, s);
  expect(reply.status, reply.text).toBe(200);
  expect(reply.headers['content-type']).toBe('application/json; charset=utf-8');
  return JSON.parse(reply.text) as Envelope;
}

async function allPages(token: string, from: Date, to: Date | undefined, pageSize: number, s: Simulator = sim): Promise<AnalyticsRecord[]> {
  const first = await pageOf(token, { startDate: from, toDate: to, pageSize }, s);
  const records = [...first.data];
  for (let n = 2; n <= first.totalPages; n++) records.push(...(await pageOf(token, { startDate: from, toDate: to, pageSize, pageNumber: n }, s)).data);
  return records;
}

/** E7 text → sample value by `name{labels}`. */
function parseSamples(text: string): Map<string, number> {
  const samples = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([a-z_]+)(\{.*\}) (\d+)$/.exec(line);
    expect(m, line).not.toBeNull();
    samples.set(`${m![1]}${m![2]}`, Number(m![3]));
  }
  return samples;
}

async function startExtra(options: Parameters<typeof startSimulator>[0]): Promise<Simulator> {
  const s = await startSimulator({ clientId: CLIENT_ID, clientSecret: CLIENT_SECRET, ...options });
  extra.push(s);
  return s;
}

beforeAll(async () => {
  sim = await startSimulator({ port: 0, clientId: CLIENT_ID, clientSecret: CLIENT_SECRET, records: 50_000, now: () => Date.now() + clock });
});
afterEach(async () => {
  clock = 0;
  expect(sim.pendingFaults()).toBe(0);
  Object.assign(sim.faults, NO_FAULTS);
  await Promise.all(extra.splice(0).map((s) => s.close()));
});
afterAll(async () => {
  await sim.close();
});

describe('E0 token endpoint', () => {
  it('issues a Bearer token to client_secret_post', async () => {
    const reply = await tokenRequest(sim.url, { grant_type: 'client_credentials', client_id: CLIENT_ID, client_secret: CLIENT_SECRET, scope: 'api.external' });
    expect(reply.status).toBe(200);
    expect(reply.headers['cache-control']).toBe('no-store');
    expect(reply.headers['content-type']).toMatch(/^application\/json/);
    const body = JSON.parse(reply.text) as Record<string, unknown>;
    expect(body).toEqual({ access_token: expect.any(String), token_type: 'Bearer', expires_in: 3600 });
    expect((body.access_token as string).length).toBeGreaterThan(20);
  });

  it('issues a Bearer token to client_secret_basic with form-encoded id and secret (RFC 6749 §2.3.1)', async () => {
    const basic = Buffer.from(`${formEncode(CLIENT_ID)}:${formEncode(CLIENT_SECRET)}`).toString('base64');
    const reply = await tokenRequest(sim.url, { grant_type: 'client_credentials', scope: 'api.external' }, { authorization: `Basic ${basic}` });
    expect(reply.status, reply.text).toBe(200);
    const token = (JSON.parse(reply.text) as { access_token: string }).access_token;
    expect((await analytics(token, { startDate: FROM, pageSize: 1 })).status).toBe(200);
  });

  it('accepts a scope list that contains the configured scope', async () => {
    const reply = await tokenRequest(sim.url, {
      grant_type: 'client_credentials',
      client_id: CLIENT_ID,
      client_secret: CLIENT_SECRET,
      scope: 'openid api.external',
    });
    expect(reply.status).toBe(200);
  });

  it('answers 401 invalid_client for a wrong secret, with WWW-Authenticate only for Basic', async () => {
    const post = await tokenRequest(sim.url, { grant_type: 'client_credentials', client_id: CLIENT_ID, client_secret: 'wrong', scope: 'api.external' });
    expect(post.status).toBe(401);
    expect(JSON.parse(post.text)).toMatchObject({ error: 'invalid_client' });
    expect(post.headers['www-authenticate']).toBeUndefined();

    const basic = Buffer.from(`${formEncode(CLIENT_ID)}:wrong`).toString('base64');
    const viaBasic = await tokenRequest(sim.url, { grant_type: 'client_credentials', scope: 'api.external' }, { authorization: `Basic ${basic}` });
    expect(viaBasic.status).toBe(401);
    expect(JSON.parse(viaBasic.text)).toMatchObject({ error: 'invalid_client' });
    expect(viaBasic.headers['www-authenticate']).toBe('Basic realm="simulator"');

    const none = await tokenRequest(sim.url, { grant_type: 'client_credentials', scope: 'api.external' });
    expect(none.status).toBe(401);
  });

  it('answers 400 with the RFC 6749 §5.2 error codes', async () => {
    const good = { grant_type: 'client_credentials', client_id: CLIENT_ID, client_secret: CLIENT_SECRET, scope: 'api.external' };
    const errorOf = async (fields: Record<string, string>, headers: Record<string, string> = {}) => {
      const reply = await tokenRequest(sim.url, fields, headers);
      expect(reply.status, reply.text).toBe(400);
      return (JSON.parse(reply.text) as { error: string; error_description: string }).error;
    };
    expect(await errorOf({ ...good, scope: 'api.internal' })).toBe('invalid_scope');
    const { scope: _scope, ...noScope } = good;
    expect(await errorOf(noScope)).toBe('invalid_scope');
    expect(await errorOf({ ...good, grant_type: 'password' })).toBe('unsupported_grant_type');
    const { grant_type: _grant, ...noGrant } = good;
    expect(await errorOf(noGrant)).toBe('invalid_request');
    const basic = Buffer.from(`${formEncode(CLIENT_ID)}:${formEncode(CLIENT_SECRET)}`).toString('base64');
    expect(await errorOf(good, { authorization: `Basic ${basic}` })).toBe('invalid_request');

    const json = await call(`${sim.url}/connect/token`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(good) });
    expect(json.status).toBe(400);
    expect(JSON.parse(json.text)).toMatchObject({ error: 'invalid_request' });
    const repeated = await call(`${sim.url}/connect/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: `${new URLSearchParams(good).toString()}&scope=api.external`,
    });
    expect(repeated.status).toBe(400);
  });

  it('answers 405 with Allow for a wrong method and 404 elsewhere', async () => {
    const get = await call(`${sim.url}/connect/token`);
    expect(get.status).toBe(405);
    expect(get.headers.allow).toBe('POST');
    const post = await call(`${sim.url}/analytics`, { method: 'POST', body: '' });
    expect(post.status).toBe(405);
    expect(post.headers.allow).toBe('GET');
    expect((await call(`${sim.url}/nothing/here`)).status).toBe(404);
    expect((await call(`${sim.url}/analytics/`)).status).toBe(404);
  });
});

describe('Bearer authentication of E6 and E7', () => {
  it('answers 401 invalid_token without a token, with an unknown one, and with a malformed header', async () => {
    const variants: Record<string, string>[] = [{}, { authorization: 'Bearer not-a-token' }, { authorization: 'Basic abc' }];
    for (const headers of variants) {
      const reply = await call(`${sim.url}/analytics?${query({ startDate: FROM })}`, { headers });
      expect(reply.status).toBe(401);
      expect(reply.headers['www-authenticate']).toMatch(/^Bearer .*error="invalid_token"/);
      const e7 = await call(`${sim.url}/analytics/prometheus`, { headers });
      expect(e7.status).toBe(401);
    }
  });

  it('answers 401 once the token has expired', async () => {
    const token = await tokenFor();
    clock = 3599_000;
    expect((await analytics(token, { startDate: FROM, pageSize: 1 })).status).toBe(200);
    clock = 3600_000;
    const reply = await analytics(token, { startDate: FROM, pageSize: 1 });
    expect(reply.status).toBe(401);
    expect(JSON.parse(reply.text)).toMatchObject({ error: 'invalid_token', error_description: 'token expired' });
  });

  it('revokes tokens after revokeTokensAfterSeconds while expires_in still says 3600', async () => {
    sim.faults.revokeTokensAfterSeconds = 60;
    const reply = await tokenRequest(sim.url, { grant_type: 'client_credentials', client_id: CLIENT_ID, client_secret: CLIENT_SECRET, scope: 'api.external' });
    const { access_token: token, expires_in } = JSON.parse(reply.text) as { access_token: string; expires_in: number };
    expect(expires_in).toBe(3600);
    clock = 59_000;
    expect((await analytics(token, { startDate: FROM, pageSize: 1 })).status).toBe(200);
    clock = 60_000;
    const refused = await analytics(token, { startDate: FROM, pageSize: 1 });
    expect(refused.status).toBe(401);
    expect(JSON.parse(refused.text)).toMatchObject({ error_description: 'token revoked' });
    // A fresh token works again.
    expect((await analytics(await tokenFor(), { startDate: FROM, pageSize: 1 })).status).toBe(200);
  });

  it('revokes every issued token on revokeAllTokens()', async () => {
    const token = await tokenFor();
    sim.revokeAllTokens();
    expect((await prometheus(token)).status).toBe(401);
    expect((await prometheus(await tokenFor())).status).toBe(200);
  });
});

describe('E6 GET /analytics', () => {
  let token: string;
  beforeAll(async () => {
    token = await tokenFor();
  });

  it('answers 400 naming the parameter for invalid query values', async () => {
    const cases: [Record<string, string | number | Date | undefined>, string][] = [
      [{ startDate: FROM, pageSize: 0 }, 'pageSize'],
      [{ startDate: FROM, pageSize: 1001 }, 'pageSize'],
      [{ startDate: FROM, pageSize: 'ten' }, 'pageSize'],
      [{ startDate: FROM, pageNumber: 0 }, 'pageNumber'],
      [{ startDate: FROM, pageNumber: '1.5' }, 'pageNumber'],
      [{ pageSize: 10 }, 'startDate'],
      [{ startDate: '2026-10-20' }, 'startDate'],
      [{ startDate: 'yesterday' }, 'startDate'],
      // An unencoded "+01:00" arrives as " 01:00" after form decoding.
      [{ startDate: '2026-10-20T00:00:00 01:00' }, 'startDate'],
      [{ startDate: FROM, toDate: 'never' }, 'toDate'],
      [{ startDate: TO, toDate: FROM }, 'toDate'],
    ];
    for (const [params, parameter] of cases) {
      const reply = await analytics(token, params);
      expect(reply.status, JSON.stringify(params)).toBe(400);
      expect(JSON.parse(reply.text)).toMatchObject({ error: 'invalid_request', parameter });
      expect((JSON.parse(reply.text) as { error_description: string }).error_description).toContain(parameter);
    }
  });

  it('uses pageNumber 1 and pageSize 500 by default and reports totals', async () => {
    const page = await pageOf(token, { startDate: FROM, toDate: TO });
    const total = sim.dataset.count(FROM, TO, true);
    expect(total).toBeGreaterThan(1000);
    expect(page).toMatchObject({ pageNumber: 1, pageSize: 500, totalRecords: total, totalPages: Math.ceil(total / 500) });
    expect(page.data).toHaveLength(500);
  });

  it('pages through a window to exactly the records iterate() gives for it', async () => {
    const expected = [...sim.dataset.iterate(FROM, TO, true)];
    expect(await allPages(token, FROM, TO, 500)).toEqual(expected);
    expect(await allPages(token, FROM, TO, 1000)).toEqual(expected);
  });

  it('answers an empty page past the end', async () => {
    const page = await pageOf(token, { startDate: FROM, toDate: TO, pageSize: 1000, pageNumber: 99 });
    expect(page.data).toEqual([]);
    expect(page.totalRecords).toBe(sim.dataset.count(FROM, TO, true));
  });

  it('has no upper bound without toDate', async () => {
    const page = await pageOf(token, { startDate: FROM, pageSize: 1 });
    expect(page.totalRecords).toBe(sim.dataset.count(FROM, undefined, true));
  });

  it('includes a record exactly at toDate when inclusive, excludes it when exclusive', async () => {
    const exclusive = await startExtra({ dataset: sim.dataset, toDate: 'exclusive' });
    const exclusiveToken = await tokenFor(exclusive);
    // Find a base record whose timestamp other records share or not; either way it sits on toDate.
    const t = new Date(sim.dataset.timestampMs(sim.dataset.count(undefined, FROM, false) + 700));
    const atT = sim.dataset.count(t, t, true);
    expect(atT).toBeGreaterThan(0);
    const inclusivePage = await pageOf(token, { startDate: FROM, toDate: t, pageSize: 1000 });
    const exclusivePage = await pageOf(exclusiveToken, { startDate: FROM, toDate: t, pageSize: 1000 }, exclusive);
    expect(inclusivePage.totalRecords - exclusivePage.totalRecords).toBe(atT);
    expect(inclusivePage.data.at(-1)!.timestamp).toBe(sim.dataset.formatTimestamp(t.getTime()));
    expect(exclusivePage.data.every((r) => Date.parse(r.timestamp) < t.getTime())).toBe(true);
    // startDate is inclusive in both modes.
    const fromT = await pageOf(exclusiveToken, { startDate: t, toDate: TO, pageSize: 1 }, exclusive);
    expect(fromT.data[0]!.timestamp).toBe(sim.dataset.formatTimestamp(t.getTime()));
  });

  it('keeps identical records as separate rows', async () => {
    const d = new Dataset({ records: 2000, duplicateEvery: 100 });
    const s = await startExtra({ dataset: d });
    const records = await allPages(await tokenFor(s), d.start, undefined, 1000, s);
    expect(records).toHaveLength(2000);
    expect(records[99]).toEqual(records[98]);
  });
});

describe('E6 record order (order: stable | ties | random)', () => {
  const DAY = new Date('2026-10-31T00:00:00Z');
  const NEXT_DAY = new Date('2026-11-01T00:00:00Z');

  /** Every page of [DAY, NEXT_DAY] at pageSize 1000 over HTTP, with the totalRecords each response reported. */
  async function pageThrough(s: Simulator, token: string): Promise<{ pages: string[][]; totals: number[] }> {
    const pages: string[][] = [];
    const totals: number[] = [];
    for (let n = 1; n === 1 || n <= Math.ceil(totals[0]! / 1000); n++) {
      const page = await pageOf(token, { startDate: DAY, toDate: NEXT_DAY, pageSize: 1000, pageNumber: n }, s);
      totals.push(page.totalRecords);
      pages.push(page.data.map((r) => JSON.stringify(r)));
    }
    return { pages, totals };
  }

  it('reshuffles ties per request so offset paging doubles and misses records; stable pages exactly; a whole-range page is exact', async () => {
    // About 21 records on every minute of a day.
    const s = await startExtra({ records: 31_000, start: DAY, end: NEXT_DAY, timePrecisionMs: 60_000, duplicateEvery: 0, order: 'ties' });
    const token = await tokenFor(s);
    const expected = [...s.dataset.iterate(DAY, NEXT_DAY, true)].map((r) => JSON.stringify(r));
    expect(expected).toHaveLength(31_000);

    const ties = await pageThrough(s, token);
    expect(ties.totals.every((t) => t === 31_000)).toBe(true);
    expect(ties.pages).toHaveLength(31);
    for (const page of ties.pages) {
      const times = page.map((r) => (JSON.parse(r) as AnalyticsRecord).timestamp);
      expect([...times].sort()).toEqual(times);
    }
    // As many records as the range, but not the range's records: some twice, others never.
    // (Distinct counts prove nothing here: at whole minutes some records are genuinely identical.)
    const seen = ties.pages.flat();
    expect(seen).toHaveLength(31_000);
    const sortedExpected = [...expected].sort();
    expect([...seen].sort()).not.toEqual(sortedExpected);

    // A page that holds the whole range is exact in every order.
    const from = new Date('2026-10-31T10:00:00Z');
    const to = new Date('2026-10-31T10:30:00Z');
    const range = [...s.dataset.iterate(from, to, true)].map((r) => JSON.stringify(r)).sort();
    for (const order of ['ties', 'random'] as const) {
      s.order = order;
      const whole = await pageOf(token, { startDate: from, toDate: to, pageSize: 1000 }, s);
      expect(whole.totalRecords).toBe(range.length);
      expect(whole.data.map((r) => JSON.stringify(r)).sort()).toEqual(range);
    }

    // random: a page is in no order and differs between two requests.
    const p1 = await pageOf(token, { startDate: DAY, toDate: NEXT_DAY, pageSize: 1000, pageNumber: 5 }, s);
    const p2 = await pageOf(token, { startDate: DAY, toDate: NEXT_DAY, pageSize: 1000, pageNumber: 5 }, s);
    const times = p1.data.map((r) => r.timestamp);
    expect([...times].sort()).not.toEqual(times);
    expect(p1.data.map((r) => JSON.stringify(r)).sort()).not.toEqual(p2.data.map((r) => JSON.stringify(r)).sort());

    // Switched live to stable: offset paging is exact again, in merged order.
    s.order = 'stable';
    const stable = (await pageThrough(s, token)).pages.flat();
    expect(stable).toEqual(expected);
    expect([...stable].sort()).toEqual(sortedExpected);
    expect(() => {
      s.order = 'sorted' as 'stable';
    }).toThrow(/order must be stable, ties, random; got sorted/);
    expect(s.order).toBe('stable');
  });

  it('refuses an unknown order at start', async () => {
    await expect(startSimulator({ records: 10, order: 'sorted' as 'stable' })).rejects.toThrow(/order must be stable, ties, random; got sorted/);
  });
});

describe('E7 GET /analytics/prometheus', () => {
  let token: string;
  beforeAll(async () => {
    token = await tokenFor();
  });

  it('writes one sample per event type and customer, equal to eventCounts', async () => {
    const reply = await prometheus(token, { startDate: FROM, toDate: TO });
    expect(reply.status).toBe(200);
    expect(reply.headers['content-type']).toBe('text/plain; version=0.0.4; charset=utf-8');
    expect(reply.text).not.toMatch(/^#/m);
    expect(reply.text.endsWith('\n')).toBe(true);
    const samples = parseSamples(reply.text);
    const expected = sim.dataset.eventCounts(FROM, TO, true);
    expect(samples.size).toBe(expected.length);
    for (const c of expected) {
      const key = `${metricName(c.eventType)}{customer="${escapeLabelValue(c.customerName)}",customer_id="${c.customerId}"}`;
      expect(samples.get(key), key).toBe(c.count);
    }
    expect(reply.text).toContain('userlogin_event_count{customer="Acme AS",customer_id="cust-0001"} ');
    expect(new Set([...samples.keys()].map((k) => k.split('{')[0]))).toEqual(new Set(EVENT_TYPES.map(metricName)));
  });

  it('counts everything without startDate and toDate', async () => {
    const samples = parseSamples((await prometheus(token)).text);
    expect([...samples.values()].reduce((s, n) => s + n, 0)).toBe(sim.dataset.size);
  });

  it('answers 400 for an invalid date', async () => {
    const reply = await prometheus(token, { startDate: 'soon' });
    expect(reply.status).toBe(400);
    expect(JSON.parse(reply.text)).toMatchObject({ parameter: 'startDate' });
  });

  it('adds HELP and TYPE lines on request, and escapes label values', async () => {
    const s = await startExtra({ records: 100, prometheusHelp: true });
    s.insertRecords([{ ...s.dataset.record(0), eventType: 'UserLogin', customerId: 'cust-9001', customerName: 'Quote "Q" \\ Back\nslash AS' }]);
    const text = (await prometheus(await tokenFor(s), {}, s)).text;
    expect(text).toContain('# HELP userlogin_event_count ');
    expect(text).toContain('# TYPE userlogin_event_count untyped\n');
    expect(text).toContain('userlogin_event_count{customer="Quote \\"Q\\" \\\\ Back\\nslash AS",customer_id="cust-9001"} 1\n');
  });
});

describe('fault injection', () => {
  let token: string;
  beforeAll(async () => {
    token = await tokenFor();
  });
  const e6 = (extraParams: Record<string, string | number | Date | undefined> = {}) =>
    analytics(token, { startDate: FROM, toDate: TO, pageSize: 50, ...extraParams });

  it('refuses pages from deepPages.fromOffset on with 400 Result window is too large, or answers them empty with the true total', async () => {
    const first = await pageOf(token, { startDate: FROM, toDate: TO, pageSize: 50 });
    sim.faults.deepPages = { fromOffset: 100, answer: 'refuse' };
    expect((await e6({ pageNumber: 2 })).status).toBe(200);
    const refused = await e6({ pageNumber: 3 });
    expect(refused.status).toBe(400);
    expect(JSON.parse(refused.text)).toMatchObject({ error_description: 'Result window is too large' });
    // The offset decides, not the page number: page 2 of 60 starts at 60, page 3 at 120.
    expect((await e6({ pageNumber: 2, pageSize: 60 })).status).toBe(200);
    expect((await e6({ pageNumber: 3, pageSize: 60 })).status).toBe(400);
    sim.faults.deepPages = { fromOffset: 100, answer: 'empty' };
    const empty = await pageOf(token, { startDate: FROM, toDate: TO, pageSize: 50, pageNumber: 3 });
    expect(empty).toMatchObject({ totalRecords: first.totalRecords, totalPages: first.totalPages, data: [] });
    expect((await pageOf(token, { startDate: FROM, toDate: TO, pageSize: 50, pageNumber: 2 })).data).toHaveLength(50);
  });

  it('claims totalRecordsExtra records more than it serves, on every page and in totalPages', async () => {
    const honest = await allPages(token, FROM, TO, 1000);
    sim.faults.totalRecordsExtra = 1;
    const first = await pageOf(token, { startDate: FROM, toDate: TO, pageSize: 1000 });
    expect(first.totalRecords).toBe(honest.length + 1);
    expect(first.totalPages).toBe(Math.ceil((honest.length + 1) / 1000));
    expect(await allPages(token, FROM, TO, 1000)).toEqual(honest);
    const none = await pageOf(token, { startDate: new Date('2020-01-01T00:00:00Z'), toDate: new Date('2020-01-01T00:00:00Z') });
    expect(none).toMatchObject({ totalRecords: 1, data: [] });
    await expect(startExtra({ port: 0, faults: { totalRecordsExtra: -1 } })).rejects.toThrow(/totalRecordsExtra/);
  });

  it('delays every request by latencyMs', async () => {
    sim.faults.latencyMs = 200;
    const t0 = performance.now();
    expect((await e6()).status).toBe(200);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(190);
  });

  it('answers every Nth E6/E7 request with 429 and Retry-After', async () => {
    sim.faults.rateLimitEvery = 3;
    sim.faults.retryAfterSeconds = 7;
    const statuses: number[] = [];
    for (let n = 0; n < 6; n++) {
      const reply = n % 2 === 0 ? await e6() : await prometheus(token);
      statuses.push(reply.status);
      if (reply.status === 429) expect(reply.headers['retry-after']).toBe('7');
    }
    expect(statuses).toEqual([200, 200, 429, 200, 200, 429]);
  });

  it('limits E6 and E7 together to a rate with a burst, answering 429 with the seconds to wait', async () => {
    // One request per 100 s: nothing refills during the test, whatever the machine's speed.
    sim.faults.rateLimit = { perSecond: 0.01, burst: 3 };
    const replies = [await e6(), await prometheus(token), await e6(), await prometheus(token), await e6()];
    expect(replies.map((r) => r.status)).toEqual([200, 200, 200, 429, 429]);
    expect(replies[3]!.headers['retry-after']).toBe('100');
    expect(JSON.parse(replies[4]!.text)).toMatchObject({ error: 'rate_limited' });
    // A new setting starts a full bucket; a request without a valid token takes nothing.
    sim.faults.rateLimit = { perSecond: 0.01, burst: 1 };
    expect((await analytics('not-a-token', { startDate: FROM })).status).toBe(401);
    expect((await e6()).status).toBe(200);
    expect((await e6()).status).toBe(429);
    await expect(startSimulator({ faults: { rateLimit: { perSecond: 0, burst: 1 } } })).rejects.toThrow(/rateLimit/);
  });

  it('fails a seeded share of requests with errorStatus, the same ones on every run', async () => {
    const run = async () => {
      const s = await startExtra({ records: 100, faults: { errorRate: 0.5, errorStatus: 500 } });
      const t = await tokenFor(s);
      const statuses: number[] = [];
      for (let n = 0; n < 30; n++) statuses.push((await analytics(t, { startDate: s.dataset.start }, s)).status);
      return statuses;
    };
    const first = await run();
    expect(first).toContain(500);
    expect(first).toContain(200);
    expect(await run()).toEqual(first);
    sim.faults.errorRate = 1;
    expect((await e6()).status).toBe(503);
  });

  it('truncates every Nth E6 response with malformedEvery', async () => {
    sim.faults.malformedEvery = 2;
    const first = await e6();
    const second = await e6();
    expect(() => JSON.parse(first.text) as unknown).not.toThrow();
    expect(second.status).toBe(200);
    expect(() => JSON.parse(second.text) as unknown).toThrow();
    expect(Number(second.headers['content-length'])).toBe(Buffer.byteLength(second.text));
  });

  it('inserts arrivals into the range of the Rth E6 request, changing totalRecords mid-window', async () => {
    const s = await startExtra({ records: 20_000, faults: { arrivals: { afterRequests: 2, count: 25 } } });
    const t = await tokenFor(s);
    const before = s.dataset.count(FROM, TO, true);
    const page1 = await pageOf(t, { startDate: FROM, toDate: TO, pageSize: 100 }, s);
    expect(page1.totalRecords).toBe(before);
    const page2 = await pageOf(t, { startDate: FROM, toDate: TO, pageSize: 100, pageNumber: 2 }, s);
    expect(page2.totalRecords).toBe(before + 25);
    expect(s.dataset.insertedRecords).toBe(25);
    const page3 = await pageOf(t, { startDate: FROM, toDate: TO, pageSize: 100, pageNumber: 3 }, s);
    expect(page3.totalRecords).toBe(before + 25);
    // The new records lie inside the window, and paging the window now returns them too.
    expect(await allPages(t, FROM, TO, 1000, s)).toEqual([...s.dataset.iterate(FROM, TO, true)]);
    expect(
      s.dataset.count(undefined, FROM, false) + s.dataset.count(FROM, TO, true) + s.dataset.count(TO, undefined, false) - s.dataset.count(TO, TO, true),
    ).toBe(s.dataset.size);
  });

  it('answers queued statuses with Retry-After as seconds or HTTP-date, then recovers', async () => {
    const date = new Date(Date.now() + 5000).toUTCString();
    sim.queueFault({ status: 503, retryAfter: '2' });
    sim.queueFault({ status: 429, retryAfter: date });
    sim.queueFault({ status: 401 });
    const a = await e6();
    expect([a.status, a.headers['retry-after']]).toEqual([503, '2']);
    const b = await prometheus(token);
    expect([b.status, b.headers['retry-after']]).toEqual([429, date]);
    const c = await e6();
    expect(c.status).toBe(401);
    expect(c.headers['www-authenticate']).toMatch(/^Bearer /);
    expect((await e6()).status).toBe(200);
  });

  it('applies a queued fault `times` times', async () => {
    sim.queueFault({ status: 500 }, 2);
    expect(sim.pendingFaults()).toBe(2);
    expect([(await e6()).status, (await e6()).status, (await e6()).status]).toEqual([500, 500, 200]);
  });

  it('sends malformed JSON, a bad envelope and a wrong content type', async () => {
    sim.queueFault('malformed-json');
    const malformed = await e6();
    expect(malformed.status).toBe(200);
    expect(() => JSON.parse(malformed.text) as unknown).toThrow();

    sim.queueFault('bad-envelope');
    const bad = JSON.parse((await e6()).text) as { data: unknown; totalRecords: unknown };
    expect(Array.isArray(bad.data)).toBe(false);
    expect(typeof bad.data).toBe('object');

    sim.queueFault('wrong-content-type');
    const html = await e6();
    expect(html.status).toBe(200);
    expect(html.headers['content-type']).toMatch(/^text\/html/);
    expect(html.text).toMatch(/<html>/);
  });

  it('resets the connection in the middle of the body', async () => {
    sim.queueFault('reset-mid-body');
    const res = await request(`${sim.url}/analytics?${query({ startDate: FROM, toDate: TO, pageSize: 1000 })}`, {
      headers: { authorization: `Bearer ${token}` },
    });
    expect(res.statusCode).toBe(200);
    await expect(res.body.text()).rejects.toThrow();
  });

  it('stalls the body after the headers for stallMs', async () => {
    sim.faults.stallMs = 1000;
    sim.queueFault('slow-body');
    const t0 = performance.now();
    const res = await request(`${sim.url}/analytics?${query({ startDate: FROM, toDate: TO, pageSize: 10 })}`, {
      headers: { authorization: `Bearer ${token}` },
    });
    const headersMs = performance.now() - t0;
    const body = JSON.parse(await res.body.text()) as Envelope;
    const totalMs = performance.now() - t0;
    expect(headersMs).toBeLessThan(700);
    expect(totalMs).toBeGreaterThanOrEqual(990);
    expect(body.data).toHaveLength(10);
  });

  it('sends inconsistent totalPages, an empty page before the end and an oversized page', async () => {
    sim.queueFault('inconsistent-total-pages');
    const inconsistent = JSON.parse((await e6()).text) as Envelope;
    expect(inconsistent.totalPages).not.toBe(Math.ceil(inconsistent.totalRecords / inconsistent.pageSize));

    sim.queueFault('empty-page');
    const empty = JSON.parse((await e6()).text) as Envelope;
    expect(empty.data).toEqual([]);
    expect(empty.totalPages).toBeGreaterThan(1);
    expect(empty.pageNumber).toBeLessThan(empty.totalPages);

    sim.queueFault('oversized-page');
    const oversized = JSON.parse((await e6()).text) as Envelope;
    expect(oversized.data.length).toBeGreaterThan(oversized.pageSize);

    // Oversized even on the last page or past the end.
    sim.queueFault('oversized-page');
    const late = JSON.parse((await e6({ pageNumber: 9999 })).text) as Envelope;
    expect(late.data.length).toBeGreaterThan(late.pageSize);
  });

  it('keeps E6-only faults for E6 and honours a target', async () => {
    sim.queueFault('empty-page');
    expect((await prometheus(token)).status).toBe(200);
    expect(sim.pendingFaults()).toBe(1);
    expect((JSON.parse((await e6()).text) as Envelope).data).toEqual([]);

    sim.queueFault({ status: 502 }, 1, 'prometheus');
    expect((await e6()).status).toBe(200);
    expect((await prometheus(token)).status).toBe(502);
  });

  it('breaks E7 text with malformed-json and bad-envelope', async () => {
    sim.queueFault('malformed-json', 1, 'prometheus');
    const cut = await prometheus(token);
    expect(cut.text.endsWith('\n')).toBe(false);
    sim.queueFault('bad-envelope', 1, 'prometheus');
    const bad = await prometheus(token);
    expect(bad.text.split('\n').some((line) => line !== '' && !/^[a-z_]+\{.*\} \d+$/.test(line))).toBe(true);
  });

  it('counts requests, responses by status, and the body bytes of E6 and E7 answers', async () => {
    const s = await startExtra({ records: 10 });
    const t = await tokenFor(s);
    const page = await analytics(t, { startDate: s.dataset.start }, s);
    await analytics(undefined, { startDate: s.dataset.start }, s);
    const text = await prometheus(t, {}, s);
    await call(`${s.url}/other`);
    expect(s.stats).toEqual({
      tokenRequests: 1,
      analyticsRequests: 2,
      prometheusRequests: 1,
      otherRequests: 1,
      responses: { '200': 3, '401': 1, '404': 1 },
      bodyBytes: { analytics: Buffer.byteLength(page.text), prometheus: Buffer.byteLength(text.text) },
      gzipResponses: { analytics: 0, prometheus: 0 },
    });
  });

  it('closes promptly with a stalled response and idle keep-alive connections open', async () => {
    const s = await startSimulator({ clientId: CLIENT_ID, clientSecret: CLIENT_SECRET, records: 10, faults: { stallMs: 60_000 } });
    const t = await tokenFor(s);
    s.queueFault('slow-body');
    const res = await request(`${s.url}/analytics?${query({ startDate: s.dataset.start })}`, { headers: { authorization: `Bearer ${t}` } });
    const body = res.body.text().catch(() => 'aborted');
    const t0 = performance.now();
    await s.close();
    expect(performance.now() - t0).toBeLessThan(1000);
    expect(await body).toBe('aborted');
    await s.close(); // idempotent
  });
});

describe('HTTPS with a required client certificate (mutual TLS)', () => {
  let pki: TestPki;
  let tlsSim: Simulator;
  const agents: Agent[] = [];
  beforeAll(async () => {
    pki = createTestPki();
    tlsSim = await startSimulator({
      clientId: CLIENT_ID,
      clientSecret: CLIENT_SECRET,
      records: 1000,
      tls: { cert: pki.serverCert, key: pki.serverKey, ca: pki.ca, requireClientCert: true },
    });
  });
  afterAll(async () => {
    await Promise.all(agents.map((a) => a.close()));
    await tlsSim.close();
    pki.cleanup();
  });
  const agent = (connect: Record<string, string>) => {
    const a = new Agent({ connect });
    agents.push(a);
    return a;
  };

  it('serves a client that presents a certificate signed by the CA', async () => {
    expect(tlsSim.url).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    const dispatcher = agent({ ca: pki.ca, cert: pki.clientCert, key: pki.clientKey });
    const reply = await call(`${tlsSim.url}/connect/token`, {
      method: 'POST',
      dispatcher,
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ grant_type: 'client_credentials', client_id: CLIENT_ID, client_secret: CLIENT_SECRET, scope: 'api.external' }).toString(),
    });
    expect(reply.status).toBe(200);
    const token = (JSON.parse(reply.text) as { access_token: string }).access_token;
    const page = await call(`${tlsSim.url}/analytics?${query({ startDate: tlsSim.dataset.start })}`, {
      dispatcher,
      headers: { authorization: `Bearer ${token}` },
    });
    expect(page.status).toBe(200);
    expect((JSON.parse(page.text) as Envelope).totalRecords).toBe(1000);
  });

  it('refuses a client without a certificate', async () => {
    const dispatcher = agent({ ca: pki.ca });
    await expect(call(`${tlsSim.url}/connect/token`, { method: 'POST', dispatcher, body: '' })).rejects.toThrow();
  });
});

describe('simulate command', () => {
  it('prints the URL and demo credentials, serves, and stops cleanly when aborted', async () => {
    const out: string[] = [];
    const err: string[] = [];
    const controller = new AbortController();
    let url = '';
    const listening = new Promise<void>((resolve) => {
      void runSimulate(
        { port: '0', records: '1_000', clientId: 'cli-client', seed: '9', rateLimit: '0.01:1' },
        {
          stdout: (l) => out.push(l),
          stderr: (l) => err.push(l),
          signal: controller.signal,
          onListening: (u) => {
            url = u;
            resolve();
          },
        },
        silentLogger,
      ).then((code) => out.push(`exit ${code}`));
    });
    await listening;
    expect(out).toHaveLength(1);
    expect(out[0]).toContain(`STATISTICS_URL=${url}`);
    expect(out[0]).toContain('CLIENT_ID=cli-client');
    expect(out[0]).toContain('CLIENT_SECRET=demo-secret');
    const reply = await tokenRequest(url, { grant_type: 'client_credentials', client_id: 'cli-client', client_secret: 'demo-secret', scope: 'api.external' });
    expect(reply.status).toBe(200);
    // --rate-limit 0.01:1: one E6/E7 request, then 429 for the next 100 s.
    const token = (JSON.parse(reply.text) as { access_token: string }).access_token;
    const e6 = () => call(`${url}/analytics?startDate=2026-10-01T00:00:00Z`, { headers: { authorization: `Bearer ${token}` } });
    expect((await e6()).status).toBe(200);
    const limited = await e6();
    expect([limited.status, limited.headers['retry-after']]).toEqual([429, '100']);
    controller.abort();
    await vi.waitFor(() => expect(out.at(-1)).toBe('exit 0'));
    expect(err).toEqual([]);
  });

  it("serves data up to now by default: the demo's without data flags, --records spread over the 30 days before now", async () => {
    /** Starts `simulate` with `flags`, asks E6 for `[from, to]` and stops it: the envelope's totalRecords. */
    async function totalRecords(flags: Record<string, string>, from: Date, to: Date): Promise<number> {
      const controller = new AbortController();
      let url = '';
      let exited: Promise<number> = Promise.resolve(0);
      await new Promise<void>((resolve) => {
        const io = { stdout: () => undefined, stderr: () => undefined, signal: controller.signal, onListening: (u: string) => ((url = u), resolve()) };
        exited = runSimulate({ port: '0', ...flags }, io, silentLogger);
      });
      try {
        const reply = await tokenRequest(url, {
          grant_type: 'client_credentials',
          client_id: 'demo-client',
          client_secret: 'demo-secret',
          scope: 'api.external',
        });
        const token = (JSON.parse(reply.text) as { access_token: string }).access_token;
        const page = await call(`${url}/analytics?startDate=${from.toISOString()}&toDate=${to.toISOString()}&pageSize=1`, {
          headers: { authorization: `Bearer ${token}` },
        });
        expect(page.status).toBe(200);
        return (JSON.parse(page.text) as Envelope).totalRecords;
      } finally {
        controller.abort();
        expect(await exited).toBe(0);
      }
    }
    const now = Date.now();
    const lastHour = await totalRecords({}, new Date(now - 3_600_000), new Date(now));
    // One demo record every 13 s: 276 or 277 in any hour that ends at the data's end (now).
    expect(lastHour).toBeGreaterThanOrEqual(Math.floor(3_600_000 / DEMO_RECORD_INTERVAL_MS) - 1);
    // The simulator reads the clock a moment after the test: a 13 s tick may fall in between.
    const before = demoDatasetBounds(Date.now());
    const all = await totalRecords({}, before.start, new Date(Date.now() + 60_000));
    expect(all).toBeGreaterThanOrEqual(before.records);
    expect(all).toBeLessThanOrEqual(demoDatasetBounds(Date.now()).records);
    // --records alone: all of them in the 30 days before now (give or take the minute the clocks
    // may differ by), none later.
    expect(await totalRecords({ records: '500' }, new Date(now - 30 * 86_400_000 - 60_000), new Date(Date.now() + 60_000))).toBe(500);
    expect(await totalRecords({ records: '500' }, new Date(Date.now() + 60_000), new Date(now + 86_400_000))).toBe(0);
  });

  it('rejects an invalid flag value with a message naming the flag and value, exit status 2', async () => {
    const err: string[] = [];
    const io = { stdout: () => undefined, stderr: (l: string) => err.push(l) };
    expect(await runSimulate({ records: 'lots' }, io)).toBe(2);
    expect(err).toEqual(['simulate: --records must be a whole number from 0 to 90000000; got "lots"']);
    err.length = 0;
    expect(await runSimulate({ errorRate: '1.5', toDate: 'maybe' }, io)).toBe(2);
    expect(err.join('\n')).toContain('--error-rate must be a number from 0 to 1; got "1.5"');
    expect(err.join('\n')).toContain('--to-date must be inclusive or exclusive; got "maybe"');
    err.length = 0;
    expect(await runSimulate({ order: 'sorted' }, io)).toBe(2);
    expect(err).toEqual(['simulate: --order must be stable, ties or random; got "sorted"']);
    err.length = 0;
    expect(await runSimulate({ tlsCert: '/nonexistent/cert.pem', tlsKey: '/nonexistent/key.pem' }, io)).toBe(2);
    expect(err[0]).toContain('--tls-cert must name a readable file (ENOENT); got "/nonexistent/cert.pem"');
    err.length = 0;
    expect(await runSimulate({ requireClientCert: true }, io)).toBe(2);
    expect(err[0]).toContain('--require-client-cert needs');
    err.length = 0;
    expect(await runSimulate({ clientSecret: '' }, io)).toBe(2);
    expect(err[0]).toBe('simulate: --client-secret must not be empty; got ***');
    for (const value of ['0', 'fast', '10:0', '10:1.5', '-3']) {
      err.length = 0;
      expect(await runSimulate({ rateLimit: value }, io)).toBe(2);
      expect(err).toEqual([
        `simulate: --rate-limit must be RATE or RATE:BURST, requests per second (> 0) and a whole burst (≥ 1), e.g. 50 or 50:10; got "${value}"`,
      ]);
    }
  });

  it('exits 1 when the port is taken', async () => {
    const blocker = createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
    const port = (blocker.address() as { port: number }).port;
    const err: string[] = [];
    try {
      expect(await runSimulate({ port: String(port), records: '10' }, { stdout: () => undefined, stderr: (l) => err.push(l) })).toBe(1);
      expect(err[0]).toMatch(/cannot listen on 127\.0\.0\.1:\d+: .*EADDRINUSE/);
    } finally {
      blocker.close();
    }
  });

  it('gives the command every flag with help and sets exit status 2 for a bad value', async () => {
    const program = new Command('analytics-simulator').exitOverride();
    configureSimulateCommand(program);
    expect(program.options.length).toBeGreaterThan(25);
    for (const option of program.options) expect(option.description.length, option.flags).toBeGreaterThan(10);

    const stderr = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    const previous = process.exitCode;
    try {
      await program.parseAsync(['--port', 'http'], { from: 'user' });
      expect(process.exitCode).toBe(2);
      expect(stderr.mock.calls.map((c) => String(c[0])).join('')).toContain('--port must be a whole number from 0 to 65535; got "http"');
    } finally {
      process.exitCode = previous;
      stderr.mockRestore();
    }
  });
});
