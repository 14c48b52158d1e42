// A bandwidth-limited link (issue 27 item 3): the rate parser, the pacing of bodies on a fake
// clock (never on the machine's own: a loaded machine only makes real pacing slower), and the
// simulator's wire counts with and without gzip.
import { EventEmitter } from 'node:events';
import { gunzipSync } from 'node:zlib';
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { runSimulate } from '../src/cli.js';
import { LINK_CHUNK_BYTES, Link, parseBandwidth, startSimulator, writePaced, type LinkClock, type Simulator } from '../src/index.js';
import { silentLogger } from '../src/log.js';

describe('parseBandwidth', () => {
  it.each([
    ['100mbit', 12_500_000],
    ['100Mbit', 12_500_000],
    ['10mbit/s', 1_250_000],
    ['1gbit', 125_000_000],
    ['1.5Gbit', 187_500_000],
    ['512kbit', 64_000],
    ['8000bit', 1000],
    ['12.5MB', 12_500_000],
    ['500kB', 500_000],
    ['1MiB/s', 1_048_576],
    ['2KiB', 2048],
    ['1GB', 1e9],
    ['4000B', 4000],
  ])('%s is %d bytes per second', (text, bytes) => {
    expect(parseBandwidth(text)).toBe(bytes);
  });

  it.each(['', 'fast', '100', 'mbit', '100mbps', '100mb', '12.5mB', '-1mbit', '1e3mbit', '100 mbit/h', '7999bit', '101gbit'])('refuses %j', (text) => {
    expect(parseBandwidth(text)).toBeUndefined();
  });
});

/** A clock that moves only when told: timers fire in order of their due time, never on their own. */
class FakeClock implements LinkClock {
  ms = 0;
  readonly #timers: { at: number; fire: () => void }[] = [];
  now = (): number => this.ms;
  sleep = (ms: number): Promise<void> =>
    new Promise((resolve) => {
      this.#timers.push({ at: this.ms + ms, fire: resolve });
      this.#timers.sort((a, b) => a.at - b.at);
    });
  /** Lets the writers run until every one has finished, firing the timers one by one. */
  async run(done: Promise<unknown>): Promise<void> {
    let finished = false;
    void done.then(() => (finished = true));
    for (;;) {
      // Let the promise chains started by the last timer reach their next wait.
      for (let i = 0; i < 20; i++) await Promise.resolve();
      if (finished) return;
      const next = this.#timers.shift();
      if (next === undefined) throw new Error('writers are stuck: no timer pending');
      this.ms = next.at;
      next.fire();
    }
  }
}

/** A response stand-in: records each write with the fake time; `full` makes writes report a full buffer. */
class Sink extends EventEmitter {
  destroyed = false;
  ended = false;
  full = false;
  readonly writes: { at: number; bytes: number }[] = [];
  constructor(private readonly clock: FakeClock) {
    super();
  }
  write(chunk: Uint8Array): boolean {
    this.writes.push({ at: this.clock.ms, bytes: chunk.length });
    return !this.full;
  }
  end(): this {
    this.ended = true;
    return this;
  }
  get total(): number {
    return this.writes.reduce((n, w) => n + w.bytes, 0);
  }
}

/** The most bytes `sinks` wrote together up to any one instant, less what the link allows by then (burst + rate × t): ≤ 0 when the link is never exceeded. */
function worstExcess(sinks: Sink[], link: Link): number {
  const writes = sinks.flatMap((s) => s.writes).sort((a, b) => a.at - b.at);
  let sent = 0;
  let worst = -Infinity;
  for (const w of writes) {
    sent += w.bytes;
    worst = Math.max(worst, sent - (link.burstBytes + (link.bytesPerSecond * w.at) / 1000));
  }
  return worst;
}

describe('pacing on a shared link (fake clock)', () => {
  const RATE = 100_000; // bytes per second
  const body = (n: number) => new Uint8Array(n).fill(0x61);

  it('a body of N bytes at R takes (N − burst) ÷ R, written in chunks, never faster than the link', async () => {
    const clock = new FakeClock();
    const link = new Link(RATE, clock);
    const sink = new Sink(clock);
    const N = 1_000_000;
    const done = writePaced(sink as never, body(N), link);
    await clock.run(done);
    expect(await done).toBe(true);
    expect(sink.ended).toBe(true);
    expect(sink.total).toBe(N);
    expect(Math.max(...sink.writes.map((w) => w.bytes))).toBe(LINK_CHUNK_BYTES);
    expect(worstExcess([sink], link)).toBeLessThanOrEqual(1e-6);
    expect(clock.ms).toBeCloseTo(((N - link.burstBytes) / RATE) * 1000, 6);
  });

  it('connections share the link: two bodies take as long as one of twice the size, and take turns', async () => {
    const clock = new FakeClock();
    const link = new Link(RATE, clock);
    const [a, b] = [new Sink(clock), new Sink(clock)];
    const N = 500_000;
    const done = Promise.all([writePaced(a as never, body(N), link), writePaced(b as never, body(N), link)]);
    await clock.run(done);
    expect(a.total + b.total).toBe(2 * N);
    expect(worstExcess([a, b], link)).toBeLessThanOrEqual(1e-6);
    expect(clock.ms).toBeCloseTo(((2 * N - link.burstBytes) / RATE) * 1000, 6);
    // Neither waits for the other to finish: both are past half their body by the time either ends.
    const endOf = (s: Sink) => s.writes[s.writes.length - 1]!.at;
    const firstEnd = Math.min(endOf(a), endOf(b));
    for (const s of [a, b]) expect(s.writes.filter((w) => w.at <= firstEnd).reduce((n, w) => n + w.bytes, 0)).toBeGreaterThan(N / 2);
  });

  it('waits for drain when the socket buffer is full, and stops once the client is gone', async () => {
    const clock = new FakeClock();
    const link = new Link(RATE, clock);
    const sink = new Sink(clock);
    sink.full = true;
    const done = writePaced(sink as never, body(10 * LINK_CHUNK_BYTES), link);
    for (let i = 0; i < 20; i++) await Promise.resolve();
    expect(sink.writes).toHaveLength(1);
    sink.full = false;
    sink.emit('drain');
    sink.full = true;
    for (let i = 0; i < 20; i++) await Promise.resolve();
    expect(sink.writes).toHaveLength(2);
    sink.destroyed = true;
    sink.emit('close');
    expect(await done).toBe(false);
    expect(sink.ended).toBe(false);
    expect(sink.writes).toHaveLength(2);
  });
});

describe('a simulator with a bandwidth', () => {
  const FROM = new Date('2026-10-20T00:00:00Z');
  const TO = new Date('2026-10-21T00:00:00Z');
  const started: Simulator[] = [];
  afterEach(async () => {
    await Promise.all(started.splice(0).map((s) => s.close()));
  });

  async function tokenOf(sim: Simulator): Promise<string> {
    const res = await request(`${sim.url}/connect/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: 'grant_type=client_credentials&client_id=demo-client&client_secret=demo-secret&scope=api.external',
    });
    return ((await res.body.json()) as { access_token: string }).access_token;
  }

  async function page(sim: Simulator, token: string, acceptEncoding?: string) {
    const res = await request(`${sim.url}/analytics?startDate=${FROM.toISOString()}&toDate=${TO.toISOString()}&pageSize=1000`, {
      headers: { authorization: `Bearer ${token}`, ...(acceptEncoding ? { 'accept-encoding': acceptEncoding } : {}) },
    });
    const bytes = Buffer.from(await res.body.arrayBuffer());
    return { headers: res.headers, bytes, text: res.headers['content-encoding'] === 'gzip' ? gunzipSync(bytes).toString('utf8') : bytes.toString('utf8') };
  }

  it('sends whole bodies, counts the bytes on the wire after gzip, and shows its stats at GET /admin/stats', async () => {
    const sim = await startSimulator({ records: 60_000, bandwidth: '2mbit', gzip: 'auto', admin: true });
    started.push(sim);
    const token = await tokenOf(sim);
    const t0 = performance.now();
    const plain = await page(sim, token);
    const seconds = (performance.now() - t0) / 1000;
    expect(plain.headers['content-encoding']).toBeUndefined();
    expect(sim.stats.bodyBytes.analytics).toBe(plain.bytes.length);
    const packed = await page(sim, token, 'gzip');
    expect(packed.headers['content-encoding']).toBe('gzip');
    expect(packed.text).toBe(plain.text);
    expect(sim.stats.bodyBytes.analytics).toBe(plain.bytes.length + packed.bytes.length);
    expect(sim.stats.gzipResponses).toEqual({ analytics: 1, prometheus: 0 });
    // A lower bound only (a busy machine makes it slower, never faster): 2 Mbit/s is 250,000 bytes/s.
    const link = new Link(250_000);
    expect(plain.bytes.length).toBeGreaterThan(2 * link.burstBytes);
    expect(seconds).toBeGreaterThanOrEqual(((plain.bytes.length - link.burstBytes) / 250_000) * 0.9);
    const stats = await request(`${sim.url}/admin/stats`);
    expect(stats.statusCode).toBe(200);
    expect(await stats.body.json()).toMatchObject({ analyticsRequests: 2, bodyBytes: sim.stats.bodyBytes, gzipResponses: sim.stats.gzipResponses });
  });

  it('refuses a bandwidth that is no rate: the option and the flag, named', async () => {
    await expect(startSimulator({ bandwidth: 'fast' })).rejects.toThrow(/^bandwidth must be a rate such as 100mbit.*; got "fast"$/);
    await expect(startSimulator({ bandwidth: 10 })).rejects.toThrow(/bandwidth must be a rate/);
    const err: string[] = [];
    expect(await runSimulate({ bandwidth: '100mbps' }, { stdout: () => undefined, stderr: (l) => err.push(l) }, silentLogger)).toBe(2);
    expect(err).toEqual([expect.stringMatching(/^simulate: --bandwidth must be a rate such as 100mbit.*; got "100mbps"$/)]);
  });
});
