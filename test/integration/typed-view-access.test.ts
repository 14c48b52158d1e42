/**
 * records_typed is dropped and created again when a new field arrives (src/sync/derived/fields/typed-view.ts):
 * its owner and every privilege other roles hold on it (PUBLIC's, WITH GRANT OPTION, on a column)
 * stay as they were, and default privileges add nothing; an owner the syncing role may not give the
 * view back to leaves the view as it was, with a warning, and the window commits.
 */
import { describe, expect, it } from 'vitest';
import { startSimulator, type Simulator } from '@analytics-exporter/simulator';
import { migrate } from '../../src/db/migrate.js';
import type { Pool } from '../../src/db/pool.js';
import { createLogger, type Logger } from '../../src/log.js';
import { silentLogger } from '../helpers/silent-logger.js';
import { runSync } from '../../src/sync/run/run.js';
import { useAppPool, useTestDatabase } from '../helpers/db.js';
import { captureLog } from '../helpers/log-capture.js';
import { holds, privilegeLines } from '../helpers/privileges.js';
import { simClient, syncSettings } from '../helpers/sync.js';
import { pgDeps } from '../helpers/pg-deps.js';

const db = useTestDatabase();
const bed = useAppPool(db);
const closers = bed.closers;

const HOUR_MS = 3_600_000;
const START = new Date('2026-10-30T18:00:00Z');
const END = new Date(START.getTime() + 4 * HOUR_MS);
/** The first run loads up to here; the new fields appear after it. */
const HALF = new Date(START.getTime() + 2 * HOUR_MS);

/** A simulator whose records of the third hour hold a new field, `score`, and those of the fourth another, `grade`. */
async function simulator(): Promise<Simulator> {
  const s = await startSimulator({ port: 0, records: 100, start: START, end: END });
  closers.push(() => s.close());
  const third = s.dataset.plausibleRecords(5, HALF, new Date(HALF.getTime() + HOUR_MS), false, 7);
  const fourth = s.dataset.plausibleRecords(5, new Date(END.getTime() - HOUR_MS), END, false, 8);
  s.insertRecords([...third.map((r, i) => ({ ...r, score: i }) as typeof r), ...fourth.map((r) => ({ ...r, grade: 'a' }) as typeof r)]);
  return s;
}

async function sync(pool: Pool, s: Simulator, schema: string, from: Date, to: Date, log: Logger = silentLogger): Promise<void> {
  const client = simClient(s);
  try {
    const result = await runSync(pgDeps({ pool, client, ...syncSettings({ SYNC_WINDOW: '1h' }), schema, log }), { from, to });
    expect(result.status).toBe('succeeded');
  } finally {
    await client.close();
  }
}

async function createRoles(...roles: string[]): Promise<void> {
  for (const role of roles) {
    await bed.pool.query(`do $$ begin if not exists (select from pg_roles where rolname = '${role}') then create role ${role}; end if; end $$`);
  }
}

/** records_typed's privileges of other roles, one line each with its owner (test/helpers/privileges.ts). */
function accessOf(schema: string): Promise<string[]> {
  return privilegeLines(bed.pool, [`${schema}.records_typed`]);
}

async function columnsOf(schema: string): Promise<string[]> {
  const { rows } = await bed.pool.query<{ name: string }>(
    `select attname as name from pg_attribute where attrelid = $1::regclass and attnum > 0 and not attisdropped order by attnum`,
    [`${schema}.records_typed`],
  );
  return rows.map((r) => r.name);
}

describe('records_typed recreated for a new field (real PostgreSQL)', () => {
  it('keeps its owner and every grant: to a role, with grant option, by another grantor, to PUBLIC, on a column; adds none from default privileges', async () => {
    const s = await simulator();
    const schema = 'typed_access';
    await createRoles('tv_owner', 'tv_reader', 'tv_lead', 'tv_analyst', 'tv_columns', 'tv_default');
    await migrate(bed.pool, schema, silentLogger);
    await sync(bed.pool, s, schema, START, HALF);
    expect(await columnsOf(schema)).not.toContain('score');

    const view = `${schema}.records_typed`;
    await bed.pool.query(`grant usage on schema ${schema} to tv_lead`);
    await bed.pool.query(`alter view ${view} owner to tv_owner`);
    await bed.pool.query(`grant select on ${view} to tv_reader`);
    await bed.pool.query(`grant select, references on ${view} to tv_lead with grant option`);
    await bed.pool.query(`set role tv_lead`);
    await bed.pool.query(`grant select on ${view} to tv_analyst`);
    await bed.pool.query(`reset role`);
    await bed.pool.query(`grant select on ${view} to public`);
    await bed.pool.query(`grant select (event_type) on ${view} to tv_columns`);
    // Default privileges of the syncing role: the recreated view must not gain them.
    await bed.pool.query(`alter default privileges in schema ${schema} grant insert on tables to tv_default`);
    const before = await accessOf(schema);
    // What the setup made, read back: the comparison below is of something.
    expect(before).toEqual([
      'records_typed tv_owner - tv_lead tv_analyst SELECT false',
      'records_typed tv_owner - tv_owner PUBLIC SELECT false',
      'records_typed tv_owner - tv_owner tv_lead REFERENCES true',
      'records_typed tv_owner - tv_owner tv_lead SELECT true',
      'records_typed tv_owner - tv_owner tv_reader SELECT false',
      'records_typed tv_owner event_type tv_owner tv_columns SELECT false',
    ]);

    const third = new Date(HALF.getTime() + HOUR_MS);
    await sync(bed.pool, s, schema, HALF, third);
    expect(await columnsOf(schema)).toContain('score');
    // The same, but that tv_lead's grant to tv_analyst is now the owner's.
    const kept = before.map((line) => line.replace('- tv_lead tv_analyst', '- tv_owner tv_analyst')).sort();
    expect(await accessOf(schema)).toEqual(kept);

    // Owned by the syncing role (every grant now by it): the next field keeps the grants as they are.
    await bed.pool.query(`alter view ${view} owner to postgres`);
    await sync(bed.pool, s, schema, third, END);
    expect(await columnsOf(schema)).toContain('grade');
    expect(await accessOf(schema)).toEqual(kept.map((line) => line.replaceAll(' tv_owner ', ' postgres ')).sort());
    expect([await holds(bed.pool, 'tv_analyst', view, 'select'), await holds(bed.pool, 'tv_default', view, 'insert')]).toEqual([true, false]);
    await bed.pool.query(`alter default privileges in schema ${schema} revoke insert on tables from tv_default`);
  });

  it('an owner the syncing role may not give the view back to: the view stays as it was, with a warning, and the window commits', async () => {
    const s = await simulator();
    const schema = 'typed_owner';
    await createRoles('tv_exporter', 'tv_view_owner', 'tv_reader');
    await bed.pool.query(`create schema ${schema} authorization tv_exporter`);
    await bed.pool.query(`do $$ begin execute format('grant create on database %I to tv_exporter', current_database()); end $$`);
    // The exporter may act as the view's owner (drop the view), but that role may not create in the schema.
    await bed.pool.query(`grant tv_view_owner to tv_exporter`);
    const exporter = db.pool({ options: '-c role=tv_exporter', max: 2 });
    await migrate(exporter, schema, silentLogger);
    await sync(exporter, s, schema, START, HALF);
    await bed.pool.query(`alter view ${schema}.records_typed owner to tv_view_owner`);
    await bed.pool.query(`grant select on ${schema}.records_typed to tv_reader`);
    const before = await accessOf(schema);
    const columns = await columnsOf(schema);
    expect(before).toEqual(['records_typed tv_view_owner - tv_view_owner tv_reader SELECT false']);

    const log = captureLog();
    await sync(exporter, s, schema, HALF, END, createLogger('info', { format: 'json', destination: log }));
    expect(await accessOf(schema)).toEqual(before);
    expect(await columnsOf(schema)).toEqual(columns);
    const warned = log.lines().filter((l) => String(l.msg).startsWith('records_typed could not be recreated'));
    // One for each window with a new field (score, then grade), each tried again and refused.
    expect(warned).toHaveLength(2);
    for (const line of warned) expect(JSON.stringify(line.err)).toContain('permission denied for schema typed_owner');
    const stored = await bed.pool.query<{ n: number }>(`select count(*)::int as n from ${schema}.records where payload ? 'score' or payload ? 'grade'`);
    expect(stored.rows[0]!.n).toBe(10);
  });
});
