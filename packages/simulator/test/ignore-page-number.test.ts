// The `ignorePageNumber` fault setting (issue 39 item 8): every E6 page answers page 1's records
// while echoing the page number asked, as a proxy that drops the query parameter does; off, the
// pages are the range's records in turn. Also its command-line flag.
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { runSimulate } from '../src/cli.js';
import { NO_FAULTS, startSimulator, type Simulator, type SimulatorRequestEvent } from '../src/index.js';
import { silentLogger } from '../src/log.js';

const FROM = new Date('2026-10-20T00:00:00Z');
const TO = new Date('2026-10-21T00:00:00Z');
const started: Simulator[] = [];

afterEach(async () => {
  await Promise.all(started.splice(0).map((s) => s.close()));
});

interface Envelope {
  pageNumber: number;
  pageSize: number;
  totalRecords: number;
  totalPages: number;
  data: unknown[];
}

async function tokenOf(sim: Pick<Simulator, 'url'>): Promise<string> {
  const res = await request(`${sim.url}/connect/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: 'grant_type=client_credentials&client_id=demo-client&client_secret=demo-secret&scope=api.external',
  });
  return ((await res.body.json()) as { access_token: string }).access_token;
}

async function pageOf(
  sim: Pick<Simulator, 'url'>,
  token: string,
  pageNumber: number,
  range: { from: Date; to: Date } = { from: FROM, to: TO },
): Promise<Envelope> {
  const q = new URLSearchParams({ startDate: range.from.toISOString(), toDate: range.to.toISOString(), pageSize: '100', pageNumber: String(pageNumber) });
  const res = await request(`${sim.url}/analytics?${q.toString()}`, { headers: { authorization: `Bearer ${token}` } });
  expect(res.statusCode).toBe(200);
  return (await res.body.json()) as Envelope;
}

describe('simulator fault ignorePageNumber', () => {
  it("answers page 1's records on every page, echoing the page number asked; off again, pages move on", async () => {
    const events: SimulatorRequestEvent[] = [];
    const sim = await startSimulator({ records: 1000, start: FROM, end: TO, faults: { ignorePageNumber: true }, onRequest: (e) => events.push(e) });
    started.push(sim);
    expect(NO_FAULTS.ignorePageNumber).toBe(false);
    const token = await tokenOf(sim);
    const first = await pageOf(sim, token, 1);
    expect(first).toMatchObject({ pageNumber: 1, pageSize: 100, totalRecords: 1000, totalPages: 10 });
    expect(first.data).toHaveLength(100);
    for (const n of [2, 7, 10, 11]) {
      const page = await pageOf(sim, token, n);
      expect(page).toMatchObject({ pageNumber: n, pageSize: 100, totalRecords: 1000, totalPages: 10 });
      expect(page.data).toEqual(first.data);
    }
    expect(events.filter((e) => e.endpoint === 'analytics').map((e) => e.fault)).toEqual([undefined, ...Array<string>(4).fill('ignore-page-number')]);

    // A live setting: switched off, page 2 holds the next hundred records.
    sim.faults.ignorePageNumber = false;
    const second = await pageOf(sim, token, 2);
    expect(second.pageNumber).toBe(2);
    expect(second.data).toEqual(
      sim
        .servedJson(FROM, TO)
        .slice(100, 200)
        .map((t) => JSON.parse(t) as unknown),
    );
  });

  it('inRanges: only requests overlapping the range ignore pageNumber or claim more; others are honest', async () => {
    const at = new Date('2026-10-20T12:00:00Z');
    const later = { from: new Date('2026-10-20T18:00:00Z'), to: new Date('2026-10-20T19:00:00Z') };
    const sim = await startSimulator({
      records: 1000,
      start: FROM,
      end: TO,
      faults: {
        inRanges: [
          { from: at, to: at, ignorePageNumber: true },
          { ...later, totalRecordsExtra: 1 },
        ],
      },
    });
    started.push(sim);
    sim.insertRecords(sim.dataset.plausibleRecords(300, at, at, true, 7));
    const token = await tokenOf(sim);
    const dense = { from: new Date(at.getTime() - 60_000), to: at };
    const [first, second] = [await pageOf(sim, token, 1, dense), await pageOf(sim, token, 2, dense)];
    expect(second.pageNumber).toBe(2);
    expect(second.data).toEqual(first.data);
    // A range ending before the instant pages on, and counts honestly.
    const before = { from: FROM, to: new Date(at.getTime() - 1) };
    const honest = sim.servedJson(before.from, before.to);
    const page2 = await pageOf(sim, token, 2, before);
    expect(page2.totalRecords).toBe(honest.length);
    expect(page2.data).toEqual(honest.slice(100, 200).map((t) => JSON.parse(t) as unknown));
    // The lying count: one more than served, in the range only.
    expect((await pageOf(sim, token, 1, later)).totalRecords).toBe(sim.servedJson(later.from, later.to).length + 1);
    await expect(startSimulator({ records: 10, start: FROM, end: TO, faults: { inRanges: [{ from: TO, to: FROM }] } })).rejects.toThrow(/inRanges/);
  });

  it('is turned on by --ignore-page-number', async () => {
    const controller = new AbortController();
    let url = '';
    let exited: Promise<number> = Promise.resolve(0);
    await new Promise<void>((resolve) => {
      const io = { stdout: () => undefined, stderr: () => undefined, signal: controller.signal, onListening: (u: string) => ((url = u), resolve()) };
      exited = runSimulate({ port: '0', records: '1000', start: FROM.toISOString(), end: TO.toISOString(), ignorePageNumber: true }, io, silentLogger);
    });
    try {
      const token = await tokenOf({ url });
      const [first, third] = [await pageOf({ url }, token, 1), await pageOf({ url }, token, 3)];
      expect(third.pageNumber).toBe(3);
      expect(third.data).toEqual(first.data);
    } finally {
      controller.abort();
      expect(await exited).toBe(0);
    }
  });
});
