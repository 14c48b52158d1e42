/**
 * A history of hourly windows seeded straight into a schema from what a simulator serves, as a
 * sync stores it, for the audit's tests and bench (loading 8,760 windows through the sync would
 * take minutes): the ledger's windows, the watermark, and each record in the window that owns it
 * under an inclusive toDate, (s, e]: a record exactly at a boundary belongs to the window ending
 * there, as the sync stores it (the earlier slice owns a record at a cut). The simulator's data
 * must start after `start` (a record at the origin would belong to no window).
 */
import { migrate } from '../../src/db/migrate.js';
import { withClient, type Pool } from '../../src/db/pool.js';
import { silentLogger } from './silent-logger.js';
import { ensurePartitions } from '../../src/sync/store/pg/partitions.js';
import { Tables } from '../../src/sync/store/pg/tables.js';
import type { Simulator } from '@analytics-exporter/simulator';

export const HOUR_MS = 3_600_000;

/**
 * Migrates `schema` and seeds `windows` hourly windows from `start` (ms, a whole hour) for source
 * `default`, with what `sim` serves for them now.
 *
 * @returns the records seeded.
 */
export async function seedHourlyHistory(pool: Pool, schema: string, sim: Simulator, start: number, windows: number): Promise<number> {
  await migrate(pool, schema, silentLogger);
  const t = new Tables(schema);
  const end = start + windows * HOUR_MS;
  const payloads: string[] = [];
  const windowStarts: string[] = [];
  const eventTimes: string[] = [];
  for (const text of sim.servedJson(new Date(start), new Date(end))) {
    const ms = Date.parse((JSON.parse(text) as { timestamp: string }).timestamp);
    if (ms <= start) throw new Error(`seedHourlyHistory: a record at ${new Date(ms).toISOString()}, not after the origin`);
    payloads.push(text);
    windowStarts.push(new Date(start + (Math.ceil((ms - start) / HOUR_MS) - 1) * HOUR_MS).toISOString());
    eventTimes.push(new Date(ms).toISOString());
  }
  const months: number[] = [];
  for (let ms = start; ms < end; ms += 28 * 24 * HOUR_MS) months.push(ms);
  await withClient(pool, async (client) => {
    await ensurePartitions(client, t, [...months, end - HOUR_MS], 'month');
    await client.query(
      `insert into ${t.records} (source, payload, event_time, window_start)
       select 'default', u.p::jsonb, u.et, u.ws
         from unnest($1::text[], $2::timestamptz[], $3::timestamptz[]) as u(p, ws, et)`,
      [payloads, windowStarts, eventTimes],
    );
    await client.query(
      `insert into ${t.windows} (source, window_start, window_end, record_count, total_records, pages, run_id)
       select 'default', g, g + interval '1 hour', coalesce(c.n, 0), coalesce(c.n, 0), 1, 0
         from generate_series($1::timestamptz, $2::timestamptz - interval '1 hour', interval '1 hour') as g
         left join (select window_start, count(*) as n from ${t.records} group by window_start) as c on c.window_start = g`,
      [new Date(start), new Date(end)],
    );
    await client.query(`insert into ${t.state} (source, watermark) values ('default', $1)`, [new Date(end)]);
  });
  return payloads.length;
}
