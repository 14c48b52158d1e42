// The behaviours a simulator can be started with (issue 24 item 8), each against a started
// simulator over loopback: a page size cap (honest and lying), a hidden filter time, admin
// requests, gzip, out-of-range numbers, and their command-line flags.
import { gunzipSync } from 'node:zlib';
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { runSimulate } from '../src/cli.js';
import { acceptsGzip, startSimulator, type AnalyticsRecord, type Simulator, type SimulatorOptions } from '../src/index.js';
import { silentLogger } from '../src/log.js';

const FROM = new Date('2026-10-20T00:00:00Z');
const TO = new Date('2026-10-21T00:00:00Z');
const started: Simulator[] = [];

interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  bytes: Buffer;
  text: string;
}

interface Envelope {
  pageNumber: number;
  pageSize: number;
  totalRecords: number;
  totalPages: number;
  data: unknown[];
}

async function call(url: string, init: { method?: 'GET' | 'POST'; headers?: Record<string, string>; body?: string } = {}): Promise<Reply> {
  const res = await request(url, { method: init.method ?? 'GET', headers: init.headers, body: init.body });
  const bytes = Buffer.from(await res.body.arrayBuffer());
  return { status: res.statusCode, headers: res.headers, bytes, text: bytes.toString('utf8') };
}

async function start(options: SimulatorOptions): Promise<{ sim: Simulator; token: string }> {
  const sim = await startSimulator({ records: 20_000, ...options });
  started.push(sim);
  const reply = await call(`${sim.url}/connect/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: 'grant_type=client_credentials&client_id=demo-client&client_secret=demo-secret&scope=api.external',
  });
  return { sim, token: (JSON.parse(reply.text) as { access_token: string }).access_token };
}

function e6(sim: Simulator, token: string, params: Record<string, string | number | Date>, headers: Record<string, string> = {}): Promise<Reply> {
  const q = new URLSearchParams(Object.entries(params).map(([k, v]): [string, string] => [k, v instanceof Date ? v.toISOString() : String(v)]));
  return call(`${sim.url}/analytics?${q.toString()}`, { headers: { authorization: `Bearer ${token}`, ...headers } });
}

async function page(sim: Simulator, token: string, params: Record<string, string | number | Date>): Promise<Envelope> {
  const reply = await e6(sim, token, params);
  expect(reply.status, reply.text).toBe(200);
  return JSON.parse(reply.text) as Envelope;
}

/** The records' JSON texts of pages 1 … totalPages as the envelope of page 1 announces them. */
async function pageThrough(sim: Simulator, token: string, from: Date, to: Date, pageSize: number): Promise<string[]> {
  const texts: string[] = [];
  const first = await page(sim, token, { startDate: from, toDate: to, pageSize });
  for (let n = 1; n <= first.totalPages; n++) {
    const p = n === 1 ? first : await page(sim, token, { startDate: from, toDate: to, pageSize, pageNumber: n });
    texts.push(...p.data.map((r) => JSON.stringify(r)));
  }
  return texts;
}

function admin(sim: Simulator, path: string, body: unknown, method: 'GET' | 'POST' = 'POST'): Promise<Reply> {
  return call(`${sim.url}${path}`, { method, headers: { 'content-type': 'application/json' }, body: method === 'POST' ? JSON.stringify(body) : undefined });
}

/** E7's samples summed. */
async function e7Total(sim: Simulator, token: string, from: Date, to: Date): Promise<number> {
  const reply = await call(`${sim.url}/analytics/prometheus?startDate=${from.toISOString()}&toDate=${to.toISOString()}`, {
    headers: { authorization: `Bearer ${token}` },
  });
  return reply.text
    .trim()
    .split('\n')
    .reduce((sum, line) => sum + Number(line.split(' ').at(-1)), 0);
}

const sorted = (texts: string[]) => [...texts].sort();

afterEach(async () => {
  await Promise.all(started.splice(0).map((s) => s.close()));
});

describe('page size cap', () => {
  it('serves at most N records a page and says so (served): paging by the envelope is exact', async () => {
    const { sim, token } = await start({ pageSizeCap: 200 });
    const total = sim.dataset.count(FROM, TO, true);
    const first = await page(sim, token, { startDate: FROM, toDate: TO, pageSize: 1000 });
    expect([first.pageSize, first.totalRecords, first.totalPages, first.data.length]).toEqual([200, total, Math.ceil(total / 200), 200]);
    // A size under the cap is served as asked.
    expect((await page(sim, token, { startDate: FROM, toDate: TO, pageSize: 50 })).data).toHaveLength(50);
    expect(sorted(await pageThrough(sim, token, FROM, TO, 1000))).toEqual(sorted(sim.servedJson(FROM, TO)));
  });

  it('echoes the asked size with asked: the envelope lies, totalPages follows it, totalRecords is true', async () => {
    const { sim, token } = await start({ pageSizeCap: 200, pageSizeCapEcho: 'asked' });
    const total = sim.dataset.count(FROM, TO, true);
    expect(total).toBeGreaterThan(400);
    const first = await page(sim, token, { startDate: FROM, toDate: TO, pageSize: 1000 });
    expect([first.pageSize, first.totalRecords, first.totalPages, first.data.length]).toEqual([1000, total, Math.ceil(total / 1000), 200]);
    // Pages are cut at the served size: page 2 continues where page 1 stopped.
    const second = await page(sim, token, { startDate: FROM, toDate: TO, pageSize: 1000, pageNumber: 2 });
    const expected = sim.servedJson(FROM, TO);
    expect([...first.data, ...second.data].map((r) => JSON.stringify(r))).toEqual(expected.slice(0, 400));
    // Trusting the envelope loses records.
    expect((await pageThrough(sim, token, FROM, TO, 1000)).length).toBe(200 * first.totalPages);
  });

  it('refuses a negative or fractional cap', async () => {
    await expect(startSimulator({ pageSizeCap: -1 })).rejects.toThrow(/pageSizeCap/);
    await expect(startSimulator({ pageSizeCap: 1.5 })).rejects.toThrow(/pageSizeCap/);
  });
});

describe('filter time lag', () => {
  // 40 records on every hour, two days: every record sits on a window bound.
  const hourly = {
    start: new Date('2026-10-01T00:00:00Z'),
    end: new Date('2026-10-03T00:00:00Z'),
    records: 48 * 40,
    timePrecisionMs: 3_600_000,
    duplicateEvery: 0,
  };
  const hours = Array.from({ length: 49 }, (_, h) => new Date(hourly.start.getTime() + h * 3_600_000));

  it('filters on a hidden time up to the lag either side of the timestamp, which is served unchanged', async () => {
    const { sim, token } = await start({ ...hourly, filterTimeLagMs: 120_000, toDate: 'exclusive' });
    const all: string[] = [];
    let late = 0;
    for (let h = 0; h < 48; h++) {
      const records = await pageThrough(sim, token, hours[h]!, hours[h + 1]!, 1000);
      for (const text of records) {
        const ms = Date.parse((JSON.parse(text) as AnalyticsRecord).timestamp);
        // The timestamp is a generated one (on the hour), within the lag of the window.
        expect(ms % 3_600_000).toBe(0);
        expect(ms).toBeGreaterThanOrEqual(hours[h]!.getTime() - 120_000);
        expect(ms).toBeLessThanOrEqual(hours[h + 1]!.getTime() + 120_000);
        if (ms >= hours[h + 1]!.getTime()) late++;
      }
      all.push(...records);
    }
    // Records of the next hour's instant came early; the windows, exclusive, still partition the data.
    expect(late).toBeGreaterThan(0);
    // Both signs: of the 40 records at 05:00, some are found just before it, some just after.
    const at5 = hours[5]!.getTime();
    const before = sim.servedJson(new Date(at5 - 120_000), hours[5]);
    const after = sim.servedJson(new Date(at5 + 1), new Date(at5 + 120_001));
    expect(before.length).toBeGreaterThan(0);
    expect(after.length).toBeGreaterThan(0);
    expect(before.length + after.length + sim.servedJson(hours[5]!, new Date(at5 + 1)).length).toBe(40);
    for (const text of [...before, ...after]) expect((JSON.parse(text) as AnalyticsRecord).timestamp).toBe('2026-10-01T05:00:00Z');
    const whole = sim.servedJson(hours[0]!, hours[48]);
    expect(sorted(all)).toEqual(sorted(whole));
    // Only records on the first and last bound can fall outside: 40 each.
    expect(whole.length).toBeGreaterThanOrEqual(hourly.records - 80);
    expect(whole.length).toBe((await page(sim, token, { startDate: hours[0]!, toDate: hours[48]!, pageSize: 1 })).totalRecords);
  });

  it('is deterministic, and off (0) filters on the timestamp', async () => {
    const a = await start({ ...hourly, filterTimeLagMs: 120_000 });
    const b = await start({ ...hourly, filterTimeLagMs: 120_000 });
    expect(a.sim.servedJson(hours[5]!, hours[6])).toEqual(b.sim.servedJson(hours[5]!, hours[6]));
    expect(await pageThrough(a.sim, a.token, hours[5]!, hours[6]!, 7)).toEqual(a.sim.servedJson(hours[5]!, hours[6]));
    const off = await start({ ...hourly });
    // Inclusive toDate, no lag: the records of two instants.
    expect(off.sim.servedJson(hours[5]!, hours[6])).toHaveLength(80);
  });
});

describe('behaviours together', () => {
  it('a lag, late records, deletions and out-of-range numbers compose: pages agree with totalRecords and windows partition', async () => {
    const { sim, token } = await start({ filterTimeLagMs: 90_000, toDate: 'exclusive', outOfRangeEvery: 9, admin: true, pageSizeCap: 40 });
    const at = new Date('2026-10-20T06:00:00Z');
    expect((await admin(sim, '/admin/records', { at: at.toISOString(), count: 30 })).status).toBe(200);
    expect(sim.deleteRecords({ from: new Date('2026-10-20T05:00:00Z'), to: new Date('2026-10-20T07:00:00Z'), count: 12 })).toHaveLength(12);
    const windows = Array.from({ length: 24 }, (_, h) => new Date(FROM.getTime() + h * 3_600_000));
    windows.push(TO);
    const paged: string[] = [];
    for (let h = 0; h < 24; h++) {
      const records = await pageThrough(sim, token, windows[h]!, windows[h + 1]!, 1000);
      expect(records).toHaveLength((await page(sim, token, { startDate: windows[h]!, toDate: windows[h + 1]!, pageSize: 1 })).totalRecords);
      paged.push(...records);
    }
    // pageThrough re-serialises parsed records (1e200000 becomes null): the same for the expected texts.
    const whole = sim.servedJson(FROM, TO);
    expect(sorted(paged)).toEqual(sorted(whole.map((t) => JSON.stringify(JSON.parse(t)))));
    expect(whole.join('\n')).toContain('"amount":1e200000');
    // Only records within the lag of FROM and TO may move across them.
    expect(Math.abs(whole.length - (sim.dataset.count(FROM, TO, false) - 12))).toBeLessThanOrEqual(10);
  });
});

describe('admin requests', () => {
  it('are refused (404) unless admin is on', async () => {
    const { sim } = await start({});
    expect((await admin(sim, '/admin/records', { at: FROM.toISOString(), count: 1 })).status).toBe(404);
    expect((await admin(sim, '/admin/delete', { from: FROM.toISOString(), to: TO.toISOString(), count: 1 })).status).toBe(404);
  });

  it('add late records at a chosen instant, or as given, and E6 and E7 count them', async () => {
    const { sim, token } = await start({ admin: true });
    const before = sim.servedJson(FROM, TO);
    const at = '2026-10-20T12:34:56Z';
    const reply = await admin(sim, '/admin/records', { at, count: 5 });
    expect(reply.status, reply.text).toBe(200);
    const added = JSON.parse(reply.text) as { inserted: number; records: AnalyticsRecord[] };
    expect(added.inserted).toBe(5);
    expect(added.records.map((r) => r.timestamp)).toEqual(Array(5).fill(at));
    const own = { ...added.records[0]!, userId: 'user-late-1' };
    expect((await admin(sim, '/admin/records', { records: [own] })).status).toBe(200);
    const after = await pageThrough(sim, token, FROM, TO, 97);
    expect(after).toHaveLength(before.length + 6);
    expect(sorted(after)).toEqual(sorted([...before, ...added.records.map((r) => JSON.stringify(r)), JSON.stringify(own)]));
    expect(await e7Total(sim, token, FROM, TO)).toBe(before.length + 6);
  });

  it('add records padded to a chosen size (padBytes), served whole but not echoed whole', async () => {
    const { sim, token } = await start({ admin: true });
    const at = '2026-10-20T12:34:56Z';
    const reply = await admin(sim, '/admin/records', { at, count: 2, padBytes: 100_000 });
    expect(reply.status, reply.text).toBe(200);
    expect(reply.text.length).toBeLessThan(2_000);
    const added = JSON.parse(reply.text) as { inserted: number; records: AnalyticsRecord[] };
    expect(added).toMatchObject({ inserted: 2, records: [{ timestamp: at, padding: '(100000 characters)' }, { timestamp: at }] });
    const served = await page(sim, token, { startDate: at, toDate: at, pageSize: 10 });
    expect(served.data.map((r) => (r as { padding?: string }).padding)).toEqual(['x'.repeat(100_000), 'x'.repeat(100_000)]);
    expect(await admin(sim, '/admin/records', { at, count: 1, padBytes: -1 }).then((r) => r.status)).toBe(400);
  });

  it('delete records by range and count, or exactly, and E6 and E7 leave them out', async () => {
    const { sim, token } = await start({ admin: true, duplicateEvery: 0 });
    const before = sim.servedJson(FROM, TO);
    const reply = await admin(sim, '/admin/delete', { from: '2026-10-20T06:00:00Z', to: '2026-10-20T18:00:00Z', count: 10 });
    expect(reply.status, reply.text).toBe(200);
    const gone = (JSON.parse(reply.text) as { deleted: number; records: AnalyticsRecord[] }).records;
    expect(gone).toHaveLength(10);
    for (const r of gone) expect(r.timestamp >= '2026-10-20T06:00:00Z' && r.timestamp <= '2026-10-20T18:00:00Z').toBe(true);
    // One more, exactly: a record read from E6.
    const victim = JSON.parse(before[3]!) as AnalyticsRecord;
    const exact = await admin(sim, '/admin/delete', { records: [victim] });
    expect(exact.status, exact.text).toBe(200);
    const left = [...before];
    for (const text of [...gone.map((r) => JSON.stringify(r)), before[3]!]) left.splice(left.indexOf(text), 1);
    // Paged with small pages, with a page size that cuts around the deletions.
    expect(await pageThrough(sim, token, FROM, TO, 7)).toEqual(left);
    expect(sim.servedJson(FROM, TO)).toEqual(left);
    expect(await e7Total(sim, token, FROM, TO)).toBe(before.length - 11);
    // The same record again is not there any more: 404, and nothing else is deleted.
    const again = await admin(sim, '/admin/delete', { records: [JSON.parse(before[5]!), victim] });
    expect(again.status).toBe(404);
    expect(sim.servedJson(FROM, TO)).toEqual(left);
    // The library call does the same.
    expect(sim.deleteRecords({ records: [JSON.parse(before[5]!) as AnalyticsRecord] })).toHaveLength(1);
    expect(sim.servedJson(FROM, TO)).toHaveLength(left.length - 1);
  });

  it('validate the body: 400 naming the problem, 405 for another method, 404 for another path', async () => {
    const { sim } = await start({ admin: true });
    const bad = async (path: string, body: unknown) => {
      const reply = await admin(sim, path, body);
      expect(reply.status, reply.text).toBe(400);
      return (JSON.parse(reply.text) as { error_description: string }).error_description;
    };
    expect(await bad('/admin/records', { at: 'yesterday', count: 1 })).toMatch(/ISO 8601|at/);
    expect(await bad('/admin/records', { at: FROM.toISOString(), count: 0 })).toBeTruthy();
    expect(await bad('/admin/records', { records: [{ timestamp: FROM.toISOString() }] })).toBeTruthy();
    expect(await bad('/admin/delete', { from: TO.toISOString(), to: FROM.toISOString(), count: 1 })).toBeTruthy();
    const notJson = await call(`${sim.url}/admin/delete`, { method: 'POST', body: '{' });
    expect(JSON.parse(notJson.text)).toMatchObject({ error: 'invalid_json' });
    expect((await admin(sim, '/admin/records', undefined, 'GET')).status).toBe(405);
    expect((await admin(sim, '/admin/other', {})).status).toBe(404);
    expect(sim.dataset.insertedRecords).toBe(0);
  });
});

describe('gzip', () => {
  const ungzip = (reply: Reply) => (reply.headers['content-encoding'] === 'gzip' ? gunzipSync(reply.bytes).toString('utf8') : reply.text);

  it('off (default): never compresses', async () => {
    const { sim, token } = await start({});
    const reply = await e6(sim, token, { startDate: FROM, toDate: TO }, { 'accept-encoding': 'gzip' });
    expect(reply.headers['content-encoding']).toBeUndefined();
    expect(JSON.parse(reply.text)).toHaveProperty('data');
  });

  it('auto: compresses E6 and E7 when Accept-Encoding allows gzip', async () => {
    const { sim, token } = await start({ gzip: 'auto' });
    const plain = await e6(sim, token, { startDate: FROM, toDate: TO });
    expect(plain.headers['content-encoding']).toBeUndefined();
    const packed = await e6(sim, token, { startDate: FROM, toDate: TO }, { 'accept-encoding': 'br, gzip;q=0.8' });
    expect(packed.headers['content-encoding']).toBe('gzip');
    expect(Number(packed.headers['content-length'])).toBe(packed.bytes.length);
    expect(packed.bytes.length).toBeLessThan(plain.bytes.length / 3);
    expect(ungzip(packed)).toBe(plain.text);
    expect((await e6(sim, token, { startDate: FROM }, { 'accept-encoding': 'gzip;q=0' })).headers['content-encoding']).toBeUndefined();
    const e7 = await call(`${sim.url}/analytics/prometheus`, { headers: { authorization: `Bearer ${token}`, 'accept-encoding': 'gzip' } });
    expect(e7.headers['content-encoding']).toBe('gzip');
    expect(ungzip(e7)).toMatch(/^userlogin_event_count\{/);
  });

  it('on: compresses even when not asked', async () => {
    const { sim, token } = await start({ gzip: 'on' });
    const reply = await e6(sim, token, { startDate: FROM, toDate: TO, pageSize: 3 });
    expect(reply.headers['content-encoding']).toBe('gzip');
    expect((JSON.parse(ungzip(reply)) as Envelope).data).toHaveLength(3);
  });

  it('reads Accept-Encoding as RFC 9110 does', () => {
    expect(acceptsGzip(undefined)).toBe(false);
    expect(acceptsGzip('gzip')).toBe(true);
    expect(acceptsGzip('deflate, x-gzip')).toBe(true);
    expect(acceptsGzip('gzip;q=0')).toBe(false);
    expect(acceptsGzip('*')).toBe(true);
    expect(acceptsGzip('*, gzip;q=0')).toBe(false);
    expect(acceptsGzip('identity')).toBe(false);
  });
});

describe('out-of-range numbers', () => {
  it('every Nth record carries 1e200000, -1e200000, 1e-20000 in turn, raw in the JSON text', async () => {
    const { sim, token } = await start({ outOfRangeEvery: 50 });
    const reply = await e6(sim, token, { startDate: FROM, toDate: TO, pageSize: 1000 });
    const envelope = JSON.parse(reply.text) as Envelope;
    expect(envelope.totalRecords).toBe(sim.dataset.count(FROM, TO, true));
    const raw = [...reply.text.matchAll(/"amount":([^,}]+)/g)].map((m) => m[1]);
    expect(raw.length).toBeGreaterThanOrEqual(Math.floor(envelope.totalRecords / 50) - 1);
    expect(new Set(raw)).toEqual(new Set(['1e200000', '-1e200000', '1e-20000']));
    // The values cycle in record order, and everything else about a marked record is unchanged.
    const cycle = ['1e200000', '-1e200000', '1e-20000'];
    const k = cycle.indexOf(raw[0]!);
    expect(raw).toEqual(raw.map((_, j) => cycle[(k + j) % 3]));
    expect(sim.servedJson(FROM, TO).join('\n')).toContain(`"amount":${raw[0]}}`);
    const plain = sim.dataset.pageJson(FROM, TO, true, 0, 1000);
    const served = sim.servedJson(FROM, TO);
    served.forEach((text, j) => expect(text.replace(/,"amount":[^,}]+\}$/, '}')).toBe(plain[j]));
    // A marked record as a client read it (the number parsed to Infinity, posted back as null) can be deleted.
    const marked = envelope.data.find((r) => (r as { amount?: unknown }).amount !== undefined) as AnalyticsRecord;
    expect(sim.deleteRecords({ records: [JSON.parse(JSON.stringify(marked)) as AnalyticsRecord] })).toHaveLength(1);
    expect(sim.servedJson(FROM, TO)).toHaveLength(served.length - 1);
    await expect(startSimulator({ outOfRangeEvery: 5, outOfRangeValues: ['big'] })).rejects.toThrow(/outOfRangeValues/);
  });
});

describe('flags of simulate', () => {
  it('start the behaviours', async () => {
    const controller = new AbortController();
    let url = '';
    let exited: Promise<number> = Promise.resolve(0);
    await new Promise<void>((resolve) => {
      const io = { stdout: () => undefined, stderr: () => undefined, signal: controller.signal, onListening: (u: string) => ((url = u), resolve()) };
      exited = runSimulate(
        {
          port: '0',
          records: '20_000',
          end: '2026-11-01T00:00:00Z',
          pageSizeCap: '100',
          pageSizeCapEcho: 'asked',
          admin: true,
          gzip: 'on',
          filterTimeLag: '2m',
          outOfRangeEvery: '7',
        },
        io,
        silentLogger,
      );
    });
    try {
      const token = await call(`${url}/connect/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: 'grant_type=client_credentials&client_id=demo-client&client_secret=demo-secret&scope=api.external',
      });
      const bearer = (JSON.parse(token.text) as { access_token: string }).access_token;
      const reply = await call(`${url}/analytics?startDate=${FROM.toISOString()}&toDate=${TO.toISOString()}&pageSize=1000`, {
        headers: { authorization: `Bearer ${bearer}` },
      });
      expect(reply.headers['content-encoding']).toBe('gzip');
      const text = gunzipSync(reply.bytes).toString('utf8');
      expect(text).toContain('"amount":');
      const envelope = JSON.parse(text.replace(/"amount":[^,}]+/g, '"amount":0')) as Envelope;
      expect([envelope.pageSize, envelope.data.length]).toEqual([1000, 100]);
      expect((await call(`${url}/admin/records`, { method: 'POST', body: JSON.stringify({ at: FROM.toISOString(), count: 1 }) })).status).toBe(200);
    } finally {
      controller.abort();
      expect(await exited).toBe(0);
    }
  });

  it('refuse invalid values, exit status 2', async () => {
    const err: string[] = [];
    const io = { stdout: () => undefined, stderr: (l: string) => err.push(l) };
    for (const flags of [
      { pageSizeCap: 'ten' },
      { pageSizeCapEcho: 'asked' },
      { pageSizeCap: '10', pageSizeCapEcho: 'lies' },
      { filterTimeLag: 'soon' },
      { filterTimeLag: '2w' },
      { gzip: 'yes' },
      { outOfRangeEvery: '-1' },
    ]) {
      err.length = 0;
      expect(await runSimulate(flags, io, silentLogger)).toBe(2);
      expect(err.join('\n')).toMatch(/--(page-size-cap|page-size-cap-echo|filter-time-lag|gzip|out-of-range-every) /);
    }
  });
});
