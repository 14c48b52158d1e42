/**
 * A response over the body cap never stalls its source (issue 24, item 4), against real
 * PostgreSQL and the simulator: one record of 70 MiB, over UPSTREAM_MAX_BODY's 64 MiB even alone,
 * is split down to its instant and one record a page, then its window is parked: kept in
 * sync_windows with its reason, the watermark passes it, every other window is stored exactly, the
 * gauge and a warning say so, and `sync` over it exits 1. Once UPSTREAM_MAX_BODY is raised, a run
 * over the window loads it and the data is exact.
 */
import { startSimulator } from '@analytics-exporter/simulator';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { migrate } from '../../src/db/migrate.js';
import { createLogger } from '../../src/log.js';
import { silentLogger } from '../helpers/silent-logger.js';
import { ExporterMetrics } from '../../src/metrics/registry.js';
import { PgStore } from '../../src/sync/store/pg/store.js';
import { startServe } from '../../src/serve/lifecycle.js';
import { runSync } from '../../src/sync/run/run.js';
import { runCliInProcess } from '../helpers/cli.js';
import { FakeE6, record } from '../helpers/fake-e6.js';
import { useAppPool, useTestDatabase } from '../helpers/db.js';
import { canonicalJson, simClient, simulatorEnv, syncSettings, watermarkOf } from '../helpers/sync.js';
import { untilTrue } from '../helpers/wait.js';
import { captureLog } from '../helpers/log-capture.js';
import { pgDeps } from '../helpers/pg-deps.js';

const db = useTestDatabase();
const bed = useAppPool(db);
const closers = bed.closers;

const START = new Date('2026-10-31T00:00:00Z');
const END = new Date('2026-11-01T00:00:00Z');
/** The window holding the 70 MiB record. */
const PARKED = { start: new Date('2026-10-31T10:00:00Z'), end: new Date('2026-10-31T11:00:00Z') };
const HUGE_AT = '2026-10-31T10:30:07Z';
const HUGE_BYTES = 70 * 1024 * 1024;
/** Small pages and coarse cuts: few requests over the cap before the window is given up (each one is the simulator writing 70 MiB). */
const ENV = { SYNC_WINDOW: '1h', SYNC_PAGE_SIZE: '25', SYNC_MIN_SPLIT: '10m', SYNC_SETTLE: '0' };

describe('a window over UPSTREAM_MAX_BODY (real PostgreSQL, the simulator)', () => {
  it('is parked, the source moves on, and a run over it loads it once the cap is raised', { timeout: 180_000 }, async () => {
    const s = await startSimulator({ port: 0, records: 480, start: START, end: END, admin: true });
    closers.push(() => s.close());
    const added = await fetch(`${s.url}/admin/records`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ at: HUGE_AT, count: 1, padBytes: HUGE_BYTES }),
    });
    expect(added.status).toBe(200);
    const schema = 'parked_70mib';
    await migrate(bed.pool, schema, silentLogger);
    const metrics = new ExporterMetrics({ processMetrics: false });
    const gauge = async () => (await metrics.registry.getSingleMetric('analytics_exporter_sync_windows_parked')!.get()).values[0]?.value;
    const run = async (env: Record<string, string>, range: { from: Date; to: Date }, log = silentLogger) => {
      const client = simClient(s, env);
      try {
        return await runSync(pgDeps({ pool: bed.pool, client, ...syncSettings({ ...ENV, ...env }), schema, log, observer: metrics.syncObserver('default') }), {
          ...range,
          now: () => END.getTime(),
        });
      } finally {
        await client.close();
      }
    };
    // The 70 MiB record is compared apart (by its padding's length): as canonical text beside the
    // others it would cost the test hundreds of MiB.
    /** What E6 serves for [from, to) but the padded record, canonical. */
    const served = (from: Date, to: Date) => [...s.dataset.iterate(from, to, false)].filter((r) => !('padding' in r)).map(canonicalJson);
    /** What is stored but the padded record, canonical and sorted; and the padded record's padding length, if stored. */
    const stored = async () => {
      const small = await bed.pool.query<{ payload: unknown }>(`select payload from "${schema}".records where not payload ? 'padding'`);
      const huge = await bed.pool.query<{ length: number; at: string }>(
        `select length(payload->>'padding') as length, payload->>'timestamp' as at from "${schema}".records where payload ? 'padding'`,
      );
      return { small: small.rows.map((r) => canonicalJson(r.payload)).sort(), huge: huge.rows };
    };

    // The default cap, 64 MiB: the window is parked, the other 23 are committed.
    const log = captureLog();
    const first = await run({}, { from: START, to: END }, createLogger('info', { format: 'json', destination: log }));
    expect(first).toMatchObject({ status: 'succeeded', windowsPlanned: 24, windows: 23, parked: 1, parkedWindows: 1 });
    expect(await watermarkOf(bed.pool, schema)).toEqual(END);
    const expectedOutside = [...served(START, PARKED.start), ...served(PARKED.end, END)].sort();
    expect(await stored()).toEqual({ small: expectedOutside, huge: [] });
    const { rows } = await bed.pool.query<{ start: Date; status: string; reason: string; recordCount: number }>(
      `select window_start as start, status, reason, record_count::int as "recordCount" from "${schema}".sync_windows where status <> 'committed'`,
    );
    expect(rows).toEqual([
      { start: PARKED.start, status: 'parked', reason: expect.stringMatching(/over UPSTREAM_MAX_BODY even at one record a page/), recordCount: 0 },
    ]);
    expect(rows[0]!.reason).toContain(`larger than ${64 * 1024 * 1024} bytes (UPSTREAM_MAX_BODY)`);
    expect(await gauge()).toBe(1);
    // What serve reads into the gauge at start.
    const store = new PgStore({ pool: bed.pool, schema, tables: syncSettings().tables, log: silentLogger });
    expect(await store.session((session) => session.ledger('default').countParked())).toBe(1);
    const line = log.lines().find((l) => l.level === 'warn' && String(l.msg).startsWith('window parked'));
    expect(line).toMatchObject({ window: [PARKED.start.toISOString(), PARKED.end.toISOString()], reason: 'response_too_large' });

    // `sync` over it with the same cap parks it again: exit status 1 and the warning on stderr.
    const env = { ...simulatorEnv(s), ...ENV, DATABASE_URL: db.url, DATABASE_SCHEMA: schema, LOG_FORMAT: 'json' };
    const cli = await runCliInProcess(['sync', '--from', PARKED.start.toISOString(), '--to', PARKED.end.toISOString()], env);
    expect(cli.code, cli.stderr).toBe(1);
    expect(cli.stderr).toMatch(/"level":"warn".*"reason":"response_too_large".*"msg":"window parked/);
    expect(cli.stderr).toContain('sync parked windows it could not load');
    // A run beside it, which parks nothing, still exits 1 while the window stays parked.
    const beside = await runCliInProcess(['sync', '--from', START.toISOString(), '--to', PARKED.start.toISOString()], env);
    expect(beside.code, beside.stderr).toBe(1);
    expect(beside.stderr).not.toContain('window parked');
    expect(beside.stderr).toMatch(/"level":"warn".*"parkedWindows":1.*"msg":"sync run succeeded, but 1 window\(s\) parked by earlier runs/);
    expect(beside.stderr).toContain('windows parked by earlier runs are still not loaded');

    // Raised to 128 MiB: a run over the window loads it, and it is committed.
    const loaded = await run({ UPSTREAM_MAX_BODY: '128MiB' }, { from: PARKED.start, to: PARKED.end });
    expect(loaded).toMatchObject({ status: 'succeeded', windows: 1, parked: 0, parkedWindows: 0 });
    expect(await gauge()).toBe(0);
    const after = await bed.pool.query<{ status: string; n: number }>(`select status, count(*)::int as n from "${schema}".sync_windows group by status`);
    expect(after.rows).toEqual([{ status: 'committed', n: 24 }]);
    const all = await stored();
    expect(all.small.length).toBe(480);
    expect(all.small.join('\n') === served(START, END).sort().join('\n')).toBe(true);
    expect(all.huge).toEqual([{ length: HUGE_BYTES, at: HUGE_AT }]);
    expect(await watermarkOf(bed.pool, schema)).toEqual(END);
  });

  it('parks a window over a shorter committed one: the committed row keeps its records, the rest gets a parked row; both give way to the load', async () => {
    const HOUR = 3_600_000;
    const t0 = Date.parse('2026-10-01T00:00:00Z');
    // 6 records an hour for 3 hours; at 1:45 a record of 5 KB, over a 3 KB cap even alone.
    const small = Array.from({ length: 18 }, (_, i) => record(i + 1, t0 + i * 10 * 60_000));
    const huge = record(100, t0 + 105 * 60_000, { pad: 'z'.repeat(5000) });
    const e6 = new FakeE6([...small, huge], { sleep: async () => undefined });
    e6.maxBodyBytes = 3000;
    const schema = 'parked_gap';
    await migrate(bed.pool, schema, silentLogger);
    const run = (to: number, env: Record<string, string> = {}) =>
      runSync(
        pgDeps({
          pool: bed.pool,
          client: e6,
          ...syncSettings({ SYNC_WINDOW: '1h', SYNC_PAGE_SIZE: '10', ...env }),
          schema,
          log: silentLogger,
        }),
        { from: new Date(t0), to: new Date(to), now: () => t0 + 10 * HOUR },
      );
    const ledger = async () =>
      (
        await bed.pool.query<{ start: string; end: string; status: string; records: number; stored: number }>(
          `select to_char(w.window_start at time zone 'UTC', 'HH24:MI') as start, to_char(w.window_end at time zone 'UTC', 'HH24:MI') as "end", w.status,
                  w.record_count::int as records,
                  (select count(*)::int from "${schema}".records r where r.window_start = w.window_start) as stored
             from "${schema}".sync_windows w order by w.window_start`,
        )
      ).rows;
    // Up to 1:30: the short window [1:00, 1:30) is committed (the record at 1:45 is not in it).
    expect(await run(t0 + 1.5 * HOUR)).toMatchObject({ status: 'succeeded', windows: 2, parked: 0 });
    // Up to 3:00: [1:00, 2:00) closes over it and cannot be loaded.
    expect(await run(t0 + 3 * HOUR)).toMatchObject({ status: 'succeeded', windows: 2, parked: 1, parkedWindows: 2 });
    // A record exactly at a cut belongs to the earlier window (the fake E6's toDate is inclusive:
    // src/sync/membership/boundary.ts): the first window of history keeps its start too (7), and [2:00, 3:00)
    // leaves 2:00 to the parked window before it (5).
    expect(await ledger()).toEqual([
      { start: '00:00', end: '01:00', status: 'committed', records: 7, stored: 7 },
      { start: '01:00', end: '01:30', status: 'parked', records: 3, stored: 3 },
      { start: '01:30', end: '02:00', status: 'parked', records: 0, stored: 0 },
      { start: '02:00', end: '03:00', status: 'committed', records: 5, stored: 5 },
    ]);
    expect(await watermarkOf(bed.pool, schema)).toEqual(new Date(t0 + 3 * HOUR));
    // serve reads the gauge from the ledger at its start, before any run (no schedule here).
    const upstream = await startSimulator({ port: 0, records: 10 });
    closers.push(() => upstream.close());
    const config = loadConfig({
      ...simulatorEnv(upstream),
      DATABASE_URL: db.url,
      DATABASE_SCHEMA: schema,
      METRICS_LISTEN: '127.0.0.1:0',
      SYNC_SCHEDULE: 'off',
    });
    const server = await startServe(config, silentLogger);
    closers.push(() => server.stop());
    const served = async () =>
      (await server.metrics.registry.getSingleMetric('analytics_exporter_sync_windows_parked')!.get()).values.find((v) => v.labels.source === 'default')?.value;
    await untilTrue('the parked windows read at serve start', async () => (await served()) === 2);
    // Raised cap: one run over the hour loads it whole, as one committed window.
    e6.maxBodyBytes = Number.POSITIVE_INFINITY;
    expect(await run(t0 + 3 * HOUR)).toMatchObject({ status: 'succeeded', windows: 3, parked: 0, parkedWindows: 0 });
    expect(await ledger()).toEqual([
      { start: '00:00', end: '01:00', status: 'committed', records: 7, stored: 7 },
      { start: '01:00', end: '02:00', status: 'committed', records: 7, stored: 7 },
      { start: '02:00', end: '03:00', status: 'committed', records: 5, stored: 5 },
    ]);
  });
});
