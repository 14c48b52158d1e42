/**
 * SYNC_SHRINK against real PostgreSQL and the simulator's admin requests (issue 24 item 5): a
 * re-read window that lost and gained records upstream holds, under `keep`, the multiset union of
 * what was stored and what E6 returns now (each payload as many times as the larger count), and
 * under `replace` exactly what E6 returns now; the derived tables agree with what is stored.
 * Exactness is judged by what the simulator serves (servedJson).
 */
import { startSimulator, type Simulator } from '@analytics-exporter/simulator';
import { describe, expect, it } from 'vitest';
import { migrate } from '../../src/db/migrate.js';
import { silentLogger } from '../helpers/silent-logger.js';
import { runSync } from '../../src/sync/run/run.js';
import type { ShrunkWindow } from '../../src/sync/run/summary.js';
import { useAppPool, useTestDatabase } from '../helpers/db.js';
import { canonicalJson, simClient, storedMultiset, syncSettings } from '../helpers/sync.js';
import { pgDeps } from '../helpers/pg-deps.js';

const db = useTestDatabase();
const bed = useAppPool(db);
const closers = bed.closers;

const START = new Date('2026-10-31T00:00:00Z');
const END = new Date('2026-11-01T00:00:00Z');
const HOUR_5 = { start: Date.parse('2026-10-31T05:00:00Z'), end: Date.parse('2026-10-31T06:00:00Z') };
let schemaCounter = 0;

/** What E6 serves now for [START, END), canonical and sorted. */
const served = (s: Simulator): string[] =>
  s
    .servedJson(START, END)
    .map((t) => canonicalJson(JSON.parse(t)))
    .sort();

/** The multiset union of two sorted lists: each value as many times as the larger count. */
function union(a: readonly string[], b: readonly string[]): string[] {
  const count = (xs: readonly string[]) => xs.reduce((m, x) => m.set(x, (m.get(x) ?? 0) + 1), new Map<string, number>());
  const ca = count(a);
  const cb = count(b);
  const out: string[] = [];
  for (const x of new Set([...a, ...b])) for (let i = 0; i < Math.max(ca.get(x) ?? 0, cb.get(x) ?? 0); i++) out.push(x);
  return out.sort();
}

async function admin(s: Simulator, path: 'records' | 'delete', body: unknown): Promise<number> {
  const res = await fetch(`${s.url}/admin/${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  expect(res.status).toBe(200);
  const answer = (await res.json()) as { inserted?: number; deleted?: number };
  return answer.inserted ?? answer.deleted ?? 0;
}

/** The derived tables against the records they derive from: records_hourly per window and the catalogue's counts. */
async function expectDerivedAgree(schema: string): Promise<void> {
  const q = async (sql: string) => (await bed.pool.query<{ k: string; n: string }>(sql)).rows.map((r) => [String(r.k), Number(r.n)]);
  expect(await q(`select window_start::text as k, sum(records) as n from "${schema}".records_hourly group by 1 order by 1`)).toEqual(
    await q(`select window_start::text as k, count(*) as n from "${schema}".records group by 1 order by 1`),
  );
  expect(await q(`select path as k, records as n from "${schema}".record_fields where records > 0 order by 1`)).toEqual(
    await q(`select key as k, count(*) as n from "${schema}".records, jsonb_object_keys(payload) key group by 1 order by 1`),
  );
}

describe('a re-read window that lost and gained records upstream (real PostgreSQL, the simulator)', () => {
  it.each([
    ['losing 10 and gaining 5', 'keep', 10, 5],
    ['losing 10 and gaining 5', 'replace', 10, 5],
    ['losing 5 and gaining 5', 'keep', 5, 5],
    ['losing 5 and gaining 5', 'replace', 5, 5],
    ['gaining only', 'keep', 0, 5],
    ['gaining only', 'replace', 0, 5],
  ] as const)(
    '%s under SYNC_SHRINK=%s: keep stores the union of what was stored and what E6 returns, replace what E6 returns',
    async (_, shrink, lost, gained) => {
      {
        const s = await startSimulator({ port: 0, records: 2000, start: START, end: END, admin: true });
        closers.push(() => s.close());
        const client = simClient(s);
        closers.push(() => client.close());
        const schema = `keep_${++schemaCounter}`;
        await migrate(bed.pool, schema, silentLogger);
        const shrunk: ShrunkWindow[] = [];
        const run = () =>
          runSync(
            pgDeps({
              pool: bed.pool,
              client,
              ...syncSettings({ SYNC_WINDOW: '1h', SYNC_SHRINK: shrink }),
              schema,
              log: silentLogger,
              observer: { windowShrunk: (w) => shrunk.push(w) },
            }),
            { from: START, to: END },
          );
        expect(await run()).toMatchObject({ status: 'succeeded', windows: 24, records: 2000 });
        const before = await storedMultiset(bed.pool, schema);
        expect(before).toEqual(served(s));
        const { rows: counted } = await bed.pool.query<{ n: string }>(`select count(*) as n from "${schema}".records where window_start = $1`, [
          new Date(HOUR_5.start),
        ]);
        const stored = Number(counted[0]!.n);

        if (lost > 0)
          expect(await admin(s, 'delete', { from: new Date(HOUR_5.start).toISOString(), to: new Date(HOUR_5.end - 1).toISOString(), count: lost })).toBe(lost);
        expect(await admin(s, 'records', { at: '2026-10-31T05:30:00Z', count: gained })).toBe(gained);
        const now = served(s);
        expect(now.length).toBe(2000 - lost + gained);

        expect(await run()).toMatchObject({ status: 'succeeded', windows: 24 });
        const expected = shrink === 'keep' ? union(before, now) : now;
        expect(expected.length).toBe(shrink === 'keep' ? 2000 + gained : 2000 - lost + gained);
        expect(await storedMultiset(bed.pool, schema)).toEqual(expected);
        const returned = stored - lost + gained;
        expect(shrunk).toEqual(
          shrink === 'keep'
            ? lost > 0
              ? [{ window: HOUR_5, stored, returned, kept: lost, action: 'kept' }]
              : []
            : lost > gained
              ? [{ window: HOUR_5, stored, returned, action: 'replaced' }]
              : [],
        );
        const { rows: ledger } = await bed.pool.query<{ record_count: string; total_records: string }>(
          `select record_count, total_records from "${schema}".sync_windows where window_start = $1`,
          [new Date(HOUR_5.start)],
        );
        expect(Number(ledger[0]!.record_count)).toBe(shrink === 'keep' ? stored + gained : returned);
        await expectDerivedAgree(schema);

        // A third run changes nothing: the union of the union and E6 is the union.
        shrunk.length = 0;
        expect(await run()).toMatchObject({ status: 'succeeded', windows: 24 });
        expect(await storedMultiset(bed.pool, schema)).toEqual(expected);
        await expectDerivedAgree(schema);
      }
    },
  );
});
