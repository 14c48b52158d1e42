/**
 * An E6 that filters `startDate`/`toDate` on a time the records do not carry (issue 24's second
 * "why"): the simulator's `filterTimeLagMs` puts each record's hidden filter time up to 120 s
 * either side of its `timestamp`, with an inclusive and an exclusive toDate. 40 records on every
 * hour, where the windows meet: the sync must store, as a multiset of payloads, exactly what E6
 * serves for the range (the simulator's servedJson), whichever window E6 returned each record for,
 * and a re-run and a resumed run must change nothing. (The rule this replaced dropped records
 * whose timestamp equals their window's end, and lost those E6 returned with the earlier window.)
 */
import { describe, expect, it } from 'vitest';
import { migrate } from '../../src/db/migrate.js';
import { silentLogger } from '../helpers/silent-logger.js';
import { startSimulator } from '@analytics-exporter/simulator';
import { runSync } from '../../src/sync/run/run.js';
import type { WindowSummary } from '../../src/sync/run/summary.js';
import { useAppPool, useTestDatabase } from '../helpers/db.js';
import { canonicalJson, simClient, storedMultiset, syncSettings } from '../helpers/sync.js';
import { pgDeps } from '../helpers/pg-deps.js';

const db = useTestDatabase();
const bed = useAppPool(db);
const closers = bed.closers;

const HOUR = 3_600_000;
const START = new Date('2026-10-31T00:00:00Z');
const END = new Date('2026-11-01T00:00:00Z');
let schemaCounter = 0;

describe('sync against an E6 that filters on a hidden time (real PostgreSQL, the simulator)', () => {
  it.each(['inclusive', 'exclusive'] as const)(
    'filter time up to 120 s either side of the timestamp, %s toDate: 40 records on every hour stored exactly as E6 serves them',
    async (toDate) => {
      const s = await startSimulator({ port: 0, records: 0, start: START, end: END, filterTimeLagMs: 120_000, toDate });
      closers.push(() => s.close());
      for (let h = 0; h < 24; h++) {
        const at = new Date(START.getTime() + h * HOUR);
        s.insertRecords(s.dataset.plausibleRecords(40, at, at, true, h + 1));
      }
      // What E6 serves for the range (startDate START, toDate END), as its complete paging returns it.
      const served = s.servedJson(START, END).map((text) => canonicalJson(JSON.parse(text)));
      served.sort();
      // The lag is real: some of 01:00's records come with the window before it, the others with the one after.
      const one = new Date(START.getTime() + HOUR);
      const atOne = (texts: string[]) => texts.filter((t) => Date.parse((JSON.parse(t) as { timestamp: string }).timestamp) === one.getTime()).length;
      const early = atOne(s.servedJson(START, one));
      expect(early).toBeGreaterThan(5);
      expect(early).toBeLessThan(35);
      expect(early + atOne(s.servedJson(one, new Date(one.getTime() + HOUR)))).toBe(40);

      const client = simClient(s);
      closers.push(() => client.close());
      const schema = `lag_${++schemaCounter}`;
      await migrate(bed.pool, schema, silentLogger);
      const committed: WindowSummary[] = [];
      const run = (from: Date) =>
        runSync(
          pgDeps({
            pool: bed.pool,
            client,
            ...syncSettings({ SYNC_WINDOW: '1h' }),
            schema,
            log: silentLogger,
            observer: { windowCommitted: (w) => committed.push(w) },
          }),
          { from, to: END },
        );
      expect(await run(START)).toMatchObject({ status: 'succeeded', windows: 24, records: served.length });
      expect(await storedMultiset(bed.pool, schema)).toEqual(served);
      // Each window stored what E6 returned for it: records of the hour at its end among them.
      const { rows } = await bed.pool.query<{ n: number }>(
        `select count(*)::int as n from "${schema}".records r join "${schema}".sync_windows w using (source, window_start) where r.event_time = w.window_end`,
      );
      expect(rows[0]!.n).toBeGreaterThan(23 * 5);
      expect(committed).toHaveLength(24);
      // A re-run reads every window again, a resumed run starts after a committed window: nothing doubles, nothing goes.
      expect(await run(START)).toMatchObject({ status: 'succeeded', records: served.length });
      expect(await run(new Date(START.getTime() + 7 * HOUR))).toMatchObject({ status: 'succeeded' });
      expect(await storedMultiset(bed.pool, schema)).toEqual(served);
    },
  );
});
