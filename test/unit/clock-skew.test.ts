/**
 * The API's clock as its responses' `Date` headers tell it (src/upstream/clock.ts): the skew and its
 * uncertainty from the 1 s resolution and the round trip, the warn once per change (never once per
 * response, never flapping at the bound), the gauge it feeds (src/metrics/client.ts), and a run's
 * now taken from E6's `apiNow` (src/sync/run/plan.ts).
 */
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/log.js';
import { runSync } from '../../src/sync/run/run.js';
import { ClientMetrics } from '../../src/metrics/client.js';
import { CLOCK_SKEW_FLOOR_MS, ClockWatch, clockSkewBoundMs, skewOf } from '../../src/upstream/clock.js';
import { parseHttpDate } from '../../src/time.js';
import { FakeE6, record } from '../helpers/fake-e6.js';
import { captureLog } from '../helpers/log-capture.js';
import { MemoryStore } from '../helpers/memory-store.js';

const T = Date.UTC(2026, 10, 6, 8, 49, 37);
/** `T + offsetMs` as an IMF-fixdate, cut to the second as a server sends it. */
const httpDate = (ms: number) => new Date(Math.floor(ms / 1000) * 1000).toUTCString();
/** A response the API stamped at API time `apiMs`, sent at local `sentAtMs`, headers back `rttMs` later. */
const response = (apiMs: number, sentAtMs: number, rttMs = 20) => ({ headers: { date: httpDate(apiMs) }, sentAtMs, headersAtMs: sentAtMs + rttMs });

describe('parseHttpDate', () => {
  it('reads an IMF-fixdate and refuses other text or impossible dates', () => {
    expect(parseHttpDate('Fri, 06 Nov 2026 08:49:37 GMT')).toBe(T);
    expect(parseHttpDate(new Date(T).toUTCString())).toBe(T);
    expect(parseHttpDate('2026-11-06T08:49:37Z')).toBeUndefined();
    expect(parseHttpDate('Fri, 31 Nov 2026 08:49:37 GMT')).toBeUndefined();
    expect(parseHttpDate('Fri, 06 Nov 2026 24:00:00 GMT')).toBeUndefined();
    expect(parseHttpDate('Fri, 06 Xyz 2026 08:49:37 GMT')).toBeUndefined();
    expect(parseHttpDate('')).toBeUndefined();
  });
});

describe('skewOf', () => {
  it('is the API clock minus the local clock: negative when the local clock is 2 h ahead', () => {
    const local = T + 7_200_000;
    const skew = skewOf(response(T + 10, local + 10, 20))!;
    // The API stamped a time in [T, T + 1 s) while the local clock read [local + 10, local + 30].
    expect(skew.skewMs).toBeCloseTo(-7_200_000 + 500 - 20, 6);
    expect(skew.uncertaintyMs).toBe(510);
    expect(skew.skewMs - skew.uncertaintyMs).toBeLessThanOrEqual(-7_200_000);
    expect(skew.skewMs + skew.uncertaintyMs).toBeGreaterThanOrEqual(-7_200_000);
  });

  it('holds the true skew within its uncertainty wherever in the second the API stamped it', () => {
    for (const trueSkew of [-7_200_000, -1_234, 0, 999, 7_200_000]) {
      for (const at of [0, 1, 499, 500, 998, 999]) {
        const local = T + 50_000 + at;
        const skew = skewOf(response(local + 15 + trueSkew, local, 30))!;
        expect(Math.abs(skew.skewMs - trueSkew)).toBeLessThanOrEqual(skew.uncertaintyMs);
        expect(skew.uncertaintyMs).toBe(515);
      }
    }
  });

  it('is undefined without a readable Date header, or with the clock read backwards', () => {
    expect(skewOf({ headers: {}, sentAtMs: T, headersAtMs: T })).toBeUndefined();
    expect(skewOf({ headers: { date: 'yesterday' }, sentAtMs: T, headersAtMs: T })).toBeUndefined();
    expect(skewOf({ headers: { date: httpDate(T) }, sentAtMs: T, headersAtMs: T - 1 })).toBeUndefined();
    expect(skewOf({ headers: { date: [httpDate(T)] }, sentAtMs: T, headersAtMs: T })?.skewMs).toBe(500);
  });
});

describe('clockSkewBoundMs', () => {
  it('is half of SYNC_SETTLE, at least the floor', () => {
    expect(clockSkewBoundMs(300_000)).toBe(150_000);
    expect(clockSkewBoundMs(0)).toBe(CLOCK_SKEW_FLOOR_MS);
    expect(clockSkewBoundMs(4_000)).toBe(CLOCK_SKEW_FLOOR_MS);
  });
});

describe('ClockWatch', () => {
  const watch = (boundMs = 30_000) => {
    const out = captureLog();
    const gauge: number[] = [];
    const clock = new ClockWatch({ boundMs, log: createLogger('debug', { destination: out }), onSkew: (s) => gauge.push(s) });
    const clockLines = () => out.lines().filter((l) => String(l.msg).includes("API's clock"));
    return { clock, gauge, clockLines };
  };

  it('warns once while the skew stays beyond the bound, however many responses show it', () => {
    const { clock, gauge, clockLines } = watch();
    for (let i = 0; i < 50; i++) clock.observe('analytics', response(T + i * 1000 + (i % 7) * 100, T + 7_200_000 + i * 1000));
    const lines = clockLines();
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ level: 'warn', endpoint: 'analytics', boundSeconds: 30 });
    expect(Math.abs((lines[0]!.skewSeconds as number) + 7200)).toBeLessThan(1.1);
    expect(gauge).toHaveLength(50);
    for (const s of gauge) expect(Math.abs(s + 7200)).toBeLessThan(1.1);
  });

  it('warns again when the skew moves by more than the bound, and says at info when it is back within', () => {
    const { clock, clockLines } = watch();
    const at = (skewMs: number, i: number) => clock.observe('prometheus', response(T + i * 1000 + skewMs, T + i * 1000));
    at(-7_200_000, 0);
    at(-7_210_000, 1); // moved 10 s: the same change
    at(-7_260_000, 2); // moved 60 s since the warn: warned again
    at(5_000, 3); // within
    at(6_000, 4);
    at(40_000, 5); // beyond again
    expect(clockLines().map((l) => [l.level, Math.round(l.skewSeconds as number)])).toEqual([
      ['warn', -7200],
      ['warn', -7260],
      ['info', 5],
      ['warn', 40],
    ]);
  });

  it('does not flap with a skew near the bound: a change needs the whole interval past it', () => {
    // A true skew `skewMs`, the request sent at every phase of the second: each read is off by up to ±0.5 s.
    const reads = (clock: ClockWatch, skewMs: number) => {
      for (let i = 0; i < 40; i++) {
        const sent = T + i * 1000 + ((i * 37) % 1000);
        clock.observe('analytics', response(sent + 10 + skewMs, sent, 20));
      }
    };
    const under = watch(30_000);
    reads(under.clock, 29_800);
    expect(under.clockLines()).toHaveLength(0);
    const over = watch(30_000);
    reads(over.clock, 30_200);
    reads(over.clock, 30_200);
    expect(over.clockLines().map((l) => l.level)).toEqual(['warn']);
  });

  it('ignores a response without a Date header', () => {
    const { clock, gauge } = watch();
    clock.observe('analytics', { headers: {}, sentAtMs: T, headersAtMs: T });
    expect(clock.reads).toBe(0);
    expect(clock.latest).toBeUndefined();
    expect(gauge).toEqual([]);
  });
});

describe('analytics_exporter_upstream_clock_skew_seconds', () => {
  it("is set per source from the client's observer, in seconds, API minus local", async () => {
    const registry = new Registry();
    const metrics = new ClientMetrics(registry, 'analytics_exporter_');
    metrics.observer('eu').onClockSkew!(-7200.02);
    metrics.observer('us').onClockSkew!(0.5);
    const text = await registry.metrics();
    expect(text).toContain('analytics_exporter_upstream_clock_skew_seconds{source="eu"} -7200.02');
    expect(text).toContain('analytics_exporter_upstream_clock_skew_seconds{source="us"} 0.5');
  });
});

describe("a run's now", () => {
  /** A run of a fake E6 whose `apiNow` answers `api` (undefined: no Date header). */
  const runWith = async (api: number | undefined) => {
    const e6 = Object.assign(new FakeE6([record(1, Date.now() - 30 * 60_000)]), { apiNow: async () => api });
    const config = loadConfig({ SYNC_SETTLE: '1m', SYNC_START_DATE: new Date(Date.now() - 4 * 3_600_000).toISOString() });
    const out = captureLog();
    const log = createLogger('info', { destination: out });
    const result = await runSync({ store: new MemoryStore(), client: e6, config: config.sources[0]!.sync, tables: config.tables, schema: 'unit', log });
    if (result.status === 'locked') throw new Error('locked');
    return { result, lines: out.lines() };
  };

  it("is the API's time from E6, not the local clock: 2 h behind it, the range ends 2 h earlier", async () => {
    const api = Date.now() - 2 * 3_600_000;
    const { result } = await runWith(api);
    expect(result.range.end).toBe(Math.floor((api - 60_000) / 1000) * 1000);
    expect(result.records).toBe(0);
  });

  it('is the local clock when E6 sends no Date header, said at info', async () => {
    const before = Date.now();
    const { result, lines } = await runWith(undefined);
    expect(result.range.end).toBeGreaterThanOrEqual(Math.floor((before - 60_000) / 1000) * 1000);
    expect(result.records).toBe(1);
    expect(lines.some((l) => l.level === 'info' && String(l.msg).startsWith('E6 answered with no Date header'))).toBe(true);
  });
});
