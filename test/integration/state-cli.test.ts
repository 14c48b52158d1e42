/**
 * `analytics-exporter state show|set-watermark|reset` against real PostgreSQL and the simulator:
 * what show prints after a sync (text and --json, verified-through after a full audit), the
 * refusal of a watermark moved forward past windows not loaded and its --force, a watermark moved
 * back re-read by the next run, reset then sync re-loading exactly the windows reset (judged by the
 * ledger and by the records equal to what E6 serves: servedJson), a source whose sync lock another
 * session holds (exit 1), bad usage (exit 2 naming the flag).
 */
import { describe, expect, it } from 'vitest';
import type { Simulator } from '@analytics-exporter/simulator';
import { ADVISORY_LOCK_NAMESPACE } from '../../src/db/pool.js';
import { runCliInProcess } from '../helpers/cli.js';
import { canonicalJson, storedMultiset, watermarkOf } from '../helpers/sync.js';
import { SYNC_START, useSyncCli } from '../helpers/sync-cli.js';

const h = useSyncCli();
/** Ten one-day windows of about 1,000 records from SYNC_START. */
const TEN_DAYS_END = '2026-10-12T00:00:00Z';
const DAY = 86_400_000;
const day = (n: number) => new Date(Date.parse(SYNC_START) + n * DAY).toISOString();

/** A simulator, a fresh schema and the environment of both, ten days synced (run 1). */
async function synced(): Promise<{ s: Simulator; schema: string; env: Record<string, string> }> {
  const s = await h.sim({ records: 30_000 });
  const schema = h.schema();
  // No lookback: a resumed run loads only what the state commands make it load.
  const env = h.env(s, schema, { SYNC_WINDOW: '1d', SYNC_LOOKBACK: '0s', LOG_LEVEL: 'warn' });
  const first = await runCliInProcess(['sync', '--from', SYNC_START, '--to', TEN_DAYS_END], env);
  expect(first.code).toBe(0);
  return { s, schema, env };
}

/** The ledger: each window's start (ISO) → the run that loaded it, and whether it is marked for re-load. */
async function ledger(schema: string): Promise<{ start: string; runId: number; marked: boolean }[]> {
  const { rows } = await h.pool.query<{ start: Date; run_id: string; marked: boolean }>(
    `select window_start as start, run_id, reload_requested_at is not null as marked from "${schema}".sync_windows order by window_start`,
  );
  return rows.map((r) => ({ start: r.start.toISOString(), runId: Number(r.run_id), marked: r.marked }));
}

/** What E6 serves now for the ten days (records before their end), canonical and sorted. */
function servedTenDays(s: Simulator): string[] {
  const end = Date.parse(TEN_DAYS_END);
  return s
    .servedJson(new Date(SYNC_START), new Date(TEN_DAYS_END))
    .map((text) => JSON.parse(text) as { timestamp: string })
    .filter((r) => Date.parse(r.timestamp) < end)
    .map(canonicalJson)
    .sort();
}

describe('analytics-exporter state (real PostgreSQL, the simulator)', () => {
  it('show after a sync: watermark, last run, windows by state, and verified-through once a full audit ran; text and --json', async () => {
    const { schema, env } = await synced();
    const stored = (await h.pool.query<{ n: number }>(`select count(*)::int as n from "${schema}".records`)).rows[0]!.n;
    expect(stored).toBeGreaterThan(9_000);

    const text = await runCliInProcess(['state', 'show'], env);
    expect(text.code).toBe(0);
    expect(text.stdout).toContain('source default\n');
    expect(text.stdout).toMatch(/^ {2}watermark +2026-10-12T00:00:00\.000Z$/m);
    expect(text.stdout).toMatch(/^ {2}last run +#1 succeeded, started \S+, finished \S+$/m);
    expect(text.stdout).toMatch(
      new RegExp(`^ {2}committed +10 windows in \\[2026-10-02T00:00:00\\.000Z, 2026-10-12T00:00:00\\.000Z\\), ${stored} records$`, 'm'),
    );
    expect(text.stdout).toMatch(/^ {2}parked +none$/m);
    expect(text.stdout).toMatch(/^ {2}expired +none$/m);
    expect(text.stdout).toMatch(/^ {2}verified through +no full audit recorded yet/m);

    expect((await runCliInProcess(['verify'], env)).code).toBe(0);
    const json = await runCliInProcess(['state', 'show', '--json', '--source', 'default'], env);
    expect(json.code).toBe(0);
    const shown = JSON.parse(json.stdout) as { sources: Record<string, unknown>[] };
    expect(shown.sources).toHaveLength(1);
    expect(shown.sources[0]).toMatchObject({
      source: 'default',
      watermark: '2026-10-12T00:00:00.000Z',
      lastRun: { id: 1, status: 'succeeded', error: null },
      windows: {
        committed: { count: 10, from: '2026-10-02T00:00:00.000Z', to: '2026-10-12T00:00:00.000Z', records: stored },
        parked: { count: 0, from: null, to: null },
        expired: { count: 0, from: null, to: null },
        reloadRequested: { count: 0, from: null, to: null },
      },
      verifiedThrough: '2026-10-12T00:00:00.000Z',
    });
    expect(Date.parse(shown.sources[0]!.verifiedAt as string)).toBeGreaterThan(Date.now() - 60_000);
  }, 180_000);

  it('set-watermark refuses to move forward past windows not loaded without --force; moved back, the next run re-reads from it', async () => {
    const { schema, env } = await synced();
    const refused = await runCliInProcess(['state', 'set-watermark', '--source', 'default', day(18)], env);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('--force');
    expect(refused.stderr).toContain('[2026-10-12T00:00:00.000Z, 2026-10-20T00:00:00.000Z)');
    expect((await watermarkOf(h.pool, schema))?.toISOString()).toBe('2026-10-12T00:00:00.000Z');

    const forced = await runCliInProcess(['state', 'set-watermark', '--source', 'default', '--force', day(18)], env);
    expect(forced.code).toBe(0);
    expect(forced.stdout).toContain('watermark 2026-10-12T00:00:00.000Z -> 2026-10-20T00:00:00.000Z');
    expect((await watermarkOf(h.pool, schema))?.toISOString()).toBe('2026-10-20T00:00:00.000Z');

    // Back to the 8th: no --force needed, and the next run (resumed, to the 12th) loads the 8th to the 12th again.
    const back = await runCliInProcess(['state', 'set-watermark', '--source', 'default', day(6)], env);
    expect(back.code).toBe(0);
    expect((await watermarkOf(h.pool, schema))?.toISOString()).toBe('2026-10-08T00:00:00.000Z');
    const rerun = await runCliInProcess(['sync', '--to', TEN_DAYS_END], env);
    expect(rerun.code).toBe(0);
    const runs = await ledger(schema);
    expect(runs.filter((w) => w.runId === 2).map((w) => w.start)).toEqual([day(6), day(7), day(8), day(9)]);
    expect(runs.filter((w) => w.runId === 1)).toHaveLength(6);
    expect((await watermarkOf(h.pool, schema))?.toISOString()).toBe('2026-10-12T00:00:00.000Z');
  }, 180_000);

  it('reset marks the windows of a range, and the next sync re-loads exactly those, to what E6 serves now', async () => {
    const { s, schema, env } = await synced();
    // Late records in the 4th and the 5th, which only a re-load of those windows stores.
    s.insertRecords(s.dataset.plausibleRecords(7, new Date(day(2)), new Date(day(3)), false, 11));
    s.insertRecords(s.dataset.plausibleRecords(5, new Date(day(3)), new Date(day(4)), false, 12));
    expect(await storedMultiset(h.pool, schema)).not.toEqual(servedTenDays(s));

    const reset = await runCliInProcess(['state', 'reset', '--source', 'default', '--from', day(2), '--to', day(4)], env);
    expect(reset.code).toBe(0);
    expect(reset.stdout).toContain(`2 window(s) in [${day(2)}, ${day(4)}) marked for re-load`);
    expect((await ledger(schema)).filter((w) => w.marked).map((w) => w.start)).toEqual([day(2), day(3)]);
    const shown = JSON.parse((await runCliInProcess(['state', 'show', '--json'], env)).stdout) as { sources: { windows: { reloadRequested: unknown } }[] };
    expect(shown.sources[0]!.windows.reloadRequested).toEqual({ count: 2, from: day(2), to: day(4) });

    // A resumed run with no lookback and the watermark at its end: the marked windows are all it loads.
    const next = await runCliInProcess(['sync', '--to', TEN_DAYS_END], env);
    expect(next.code).toBe(0);
    const after = await ledger(schema);
    expect(after.filter((w) => w.runId === 2).map((w) => w.start)).toEqual([day(2), day(3)]);
    expect(after.filter((w) => w.runId === 1)).toHaveLength(8);
    expect(after.filter((w) => w.marked)).toEqual([]);
    expect(await storedMultiset(h.pool, schema)).toEqual(servedTenDays(s));
    expect((await watermarkOf(h.pool, schema))?.toISOString()).toBe('2026-10-12T00:00:00.000Z');
  }, 180_000);

  it('a parked window: shown as parked, counted as not loaded by set-watermark, and loaded by the sync after its reset', async () => {
    const s = await h.sim({ records: 30_000 });
    const schema = h.schema();
    // One record of 100 kB on the 5th: over UPSTREAM_MAX_BODY's 64 KiB even alone, so its window is parked.
    const [huge] = s.dataset.plausibleRecords(1, new Date(day(3)), new Date(day(4)), false, 21);
    s.insertRecords([{ ...huge!, padding: 'x'.repeat(100_000) } as typeof huge & { padding: string }] as Parameters<Simulator['insertRecords']>[0]);
    const env = h.env(s, schema, { SYNC_WINDOW: '1d', SYNC_LOOKBACK: '0s', LOG_LEVEL: 'error' });
    const capped = { ...env, UPSTREAM_MAX_BODY: '64KiB', SYNC_MIN_SPLIT: '1h' };
    expect((await runCliInProcess(['sync', '--from', SYNC_START, '--to', TEN_DAYS_END], capped)).code).toBe(1);
    const shown = await runCliInProcess(['state', 'show'], env);
    expect(shown.stdout).toMatch(new RegExp(`^ {2}parked +1 window in \\[${day(3).replaceAll('.', '\\.')}, ${day(4).replaceAll('.', '\\.')}\\)$`, 'm'));
    expect(shown.stdout).toMatch(/^ {2}committed +9 windows in /m);

    // Back to the 4th, then forward again: the parked window is not loaded, so only --force passes it.
    expect((await runCliInProcess(['state', 'set-watermark', '--source', 'default', day(2)], env)).code).toBe(0);
    const refused = await runCliInProcess(['state', 'set-watermark', '--source', 'default', TEN_DAYS_END], env);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain(`the first [${day(3)}, ${day(4)})`);
    expect((await runCliInProcess(['state', 'set-watermark', '--source', 'default', '--force', TEN_DAYS_END], env)).code).toBe(0);

    const reset = await runCliInProcess(['state', 'reset', '--source', 'default', '--from', day(3), '--to', day(4)], env);
    expect(reset.stdout).toContain(`1 window(s) in [${day(3)}, ${day(4)}) marked for re-load (1 parked)`);
    // The cap at its default again: the resumed run loads the parked window, and only it.
    const next = await runCliInProcess(['sync', '--to', TEN_DAYS_END], env);
    expect(next.code).toBe(0);
    const after = await ledger(schema);
    expect(after.filter((w) => w.runId === 2).map((w) => w.start)).toEqual([day(3)]);
    const { rows } = await h.pool.query<{ parked: number }>(`select count(*)::int as parked from "${schema}".sync_windows where status = 'parked'`);
    expect(rows[0]!.parked).toBe(0);
    expect(await storedMultiset(h.pool, schema)).toEqual(servedTenDays(s));
  }, 180_000);

  it('expired windows (RETENTION dropped their records): shown as expired, and left as they are by reset', async () => {
    const s = await h.sim({ records: 30_000 });
    const schema = h.schema();
    // Daily partitions, and a RETENTION whose cutoff falls on the 8th (within its day): the 2nd to the 7th expire.
    const days = Math.floor((Date.now() - Date.parse(day(6))) / DAY);
    const env = h.env(s, schema, { SYNC_WINDOW: '1d', SYNC_LOOKBACK: '0s', LOG_LEVEL: 'warn', PARTITION_INTERVAL: 'day' });
    expect((await runCliInProcess(['sync', '--from', SYNC_START, '--to', TEN_DAYS_END], env)).code).toBe(0);
    // RETENTION never drops what the invocation's runs just loaded: a second run (nothing to load) applies it.
    expect((await runCliInProcess(['sync', '--to', TEN_DAYS_END], { ...env, RETENTION: `${days}d` })).code).toBe(0);
    const json = JSON.parse((await runCliInProcess(['state', 'show', '--json'], env)).stdout) as { sources: { windows: Record<string, unknown> }[] };
    expect(json.sources[0]!.windows).toMatchObject({
      committed: { count: 4, from: day(6), to: TEN_DAYS_END.replace('Z', '.000Z') },
      expired: { count: 6, from: day(0), to: day(6) },
    });
    const reset = await runCliInProcess(['state', 'reset', '--source', 'default', '--from', day(4), '--to', day(8)], env);
    expect(reset.code).toBe(0);
    expect(reset.stdout).toContain(
      `2 window(s) in [${day(6)}, ${day(8)}) marked for re-load (0 parked); the next sync of the source loads them again; 2 expired window(s) left`,
    );
    expect((await ledger(schema)).filter((w) => w.marked).map((w) => w.start)).toEqual([day(6), day(7)]);
  }, 180_000);

  it('exits 1 naming the source while another session holds its sync lock, and changes nothing', async () => {
    const { schema, env } = await synced();
    const holder = await h.pool.connect();
    h.defer(async () => holder.release());
    await holder.query('select pg_advisory_lock($1, hashtext($2))', [ADVISORY_LOCK_NAMESPACE, `sync:${schema}:default`]);
    try {
      const show = await runCliInProcess(['state', 'show'], env);
      expect(show.code).toBe(1);
      expect(show.stderr).toContain('source default: another process holds its sync lock');
      expect(show.stdout).toBe('');
      const reset = await runCliInProcess(['state', 'reset', '--source', 'default', '--from', day(2), '--to', day(4)], env);
      expect(reset.code).toBe(1);
      expect(reset.stderr).toContain('source default: another process holds its sync lock');
      const move = await runCliInProcess(['state', 'set-watermark', '--source', 'default', day(5)], env);
      expect(move.code).toBe(1);
      expect((await ledger(schema)).filter((w) => w.marked)).toEqual([]);
      expect((await watermarkOf(h.pool, schema))?.toISOString()).toBe('2026-10-12T00:00:00.000Z');
    } finally {
      await holder.query('select pg_advisory_unlock($1, hashtext($2))', [ADVISORY_LOCK_NAMESPACE, `sync:${schema}:default`]);
    }
    expect((await runCliInProcess(['state', 'show'], env)).code).toBe(0);
  }, 180_000);

  it('bad usage exits 2 naming the flag, before anything is opened', async () => {
    const s = await h.sim({ records: 1_000 });
    const env = h.env(s, h.schema());
    const cases: [string[], string][] = [
      [['state', 'show', '--source', 'nope'], '--source nope is not a configured source'],
      [['state', 'reset', '--from', day(1), '--to', day(2)], '--source NAME is required'],
      [['state', 'reset', '--source', 'default', '--to', day(2)], '--from is required'],
      [['state', 'reset', '--source', 'default', '--from', day(1)], '--to is required'],
      [['state', 'reset', '--source', 'default', '--from', '2026-10-03', '--to', day(2)], '--from must be an ISO 8601 date-time with a zone'],
      [['state', 'reset', '--source', 'default', '--from', day(2), '--to', day(1)], `--from ${day(2)} must be before --to ${day(1)}`],
      [['state', 'set-watermark', day(1)], '--source NAME is required'],
      [
        ['state', 'set-watermark', '--source', 'default', 'soon'],
        'the argument <iso> (the new watermark) must be an ISO 8601 date-time with a zone, such as 2026-11-01T00:00:00Z; got "soon"',
      ],
      [['state', 'set-watermark', '--source', 'nope', day(1)], '--source nope is not a configured source'],
      [['state', 'set-watermark', '--source', 'default'], "missing required argument 'iso'"],
    ];
    for (const [args, message] of cases) {
      const result = await runCliInProcess(args, env);
      expect({ args, code: result.code }).toEqual({ args, code: 2 });
      expect(result.stderr).toContain(message);
    }
    // Nothing was opened: not even the schema was created.
    const { rows } = await h.pool.query('select 1 from pg_namespace where nspname = $1', [env.DATABASE_SCHEMA]);
    expect(rows).toEqual([]);
  }, 60_000);
});
