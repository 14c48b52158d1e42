/**
 * Several sources in one database: each source's records, ledger and watermark are its own and
 * exact by itself, a source whose upstream is down fails alone, and the migration that added the
 * `source` column converts a populated database in place.
 */
import { request } from 'undici';
import { describe, expect, it } from 'vitest';
import { startServe } from '../../src/serve/lifecycle.js';
import { syncSources, type SourceOutcome } from '../../src/app/sync.js';
import { loadConfig, type Config, type SourceConfig } from '../../src/config.js';
import { migrate } from '../../src/db/migrate.js';
import { silentLogger } from '../helpers/silent-logger.js';
import { startSimulator, type Simulator } from '@analytics-exporter/simulator';
import { runSync } from '../../src/sync/run/run.js';
import { useAppPool, useTestDatabase } from '../helpers/db.js';
import { MIGRATIONS, migrateUpTo } from '../helpers/migrations.js';
import { canonicalJson, expectedMultiset, simClient, syncSettings } from '../helpers/sync.js';
import { until } from '../helpers/wait.js';
import { pgDeps } from '../helpers/pg-deps.js';

const db = useTestDatabase();
const bed = useAppPool(db);
const closers = bed.closers;

const START = new Date('2026-10-30T00:00:00Z');
const END = new Date('2026-10-31T00:00:00Z');
const SYNC_ENV = { SYNC_WINDOW: '6h', UPSTREAM_MAX_ATTEMPTS: '1', LOG_LEVEL: 'silent' };

async function sim(options: Parameters<typeof startSimulator>[0]): Promise<Simulator> {
  const s = await startSimulator({ port: 0, start: START, end: END, ...options });
  closers.push(() => s.close());
  return s;
}

/** The environment's configuration for `schema`, its one source renamed `name` and pointed at `s` with the simulator's credentials. */
function sourceFor(name: string, s: Simulator, credentials: { clientId: string; clientSecret: string }): SourceConfig {
  const config = loadConfig({ STATISTICS_URL: s.url, AUTH_URL: s.url, CLIENT_ID: credentials.clientId, CLIENT_SECRET: credentials.clientSecret, ...SYNC_ENV });
  return { ...config.sources[0]!, name };
}

function configWith(schema: string, sources: SourceConfig[]): Config {
  const config = loadConfig({ DATABASE_URL: db.url, DATABASE_SCHEMA: schema, ...SYNC_ENV });
  return { ...config, sources };
}

/** The stored payloads of one source, canonical and sorted. */
async function storedOf(schema: string, source: string): Promise<string[]> {
  const { rows } = await bed.pool.query<{ payload: unknown }>(`select payload from ${schema}.records where source = $1`, [source]);
  return rows.map((r) => canonicalJson(r.payload)).sort();
}

/** Per source: windows in the ledger, their summed record counts, the watermark, rows of records_hourly summed. */
async function bookkeeping(schema: string, source: string): Promise<{ windows: number; recorded: number; watermark: string | null; hourly: number }> {
  const ledger = await bed.pool.query<{ windows: number; recorded: number }>(
    `select count(*)::int as windows, coalesce(sum(record_count), 0)::int as recorded from ${schema}.sync_windows where source = $1`,
    [source],
  );
  const state = await bed.pool.query<{ watermark: Date | null }>(`select watermark from ${schema}.sync_state where source = $1`, [source]);
  const hourly = await bed.pool.query<{ n: number }>(`select coalesce(sum(records), 0)::int as n from ${schema}.records_hourly where source = $1`, [source]);
  return { ...ledger.rows[0]!, watermark: state.rows[0]?.watermark?.toISOString() ?? null, hourly: hourly.rows[0]!.n };
}

function statusOf(outcomes: readonly SourceOutcome[]): Record<string, string> {
  return Object.fromEntries(outcomes.map((o) => [o.source, o.result?.status ?? `error: ${o.error?.message}`]));
}

describe('several sources in one database (real PostgreSQL)', () => {
  it('loads two sources with different credentials and data, each exact by itself; a source whose upstream is down fails alone and the next run completes it', async () => {
    const production = await sim({ records: 300, seed: 1, clientId: 'prod-client', clientSecret: 'prod-secret-value' });
    const sandbox = await sim({ records: 200, seed: 2, clientId: 'sandbox-client', clientSecret: 'sandbox-secret-value' });
    const schema = 'two_sources';
    const sources = [
      sourceFor('production', production, { clientId: 'prod-client', clientSecret: 'prod-secret-value' }),
      sourceFor('sandbox', sandbox, { clientId: 'sandbox-client', clientSecret: 'sandbox-secret-value' }),
    ];
    const first = await syncSources(configWith(schema, sources), silentLogger, { from: START, to: END });
    expect(statusOf(first)).toEqual({ production: 'succeeded', sandbox: 'succeeded' });
    expect(await storedOf(schema, 'production')).toEqual(expectedMultiset(production, START, END));
    expect(await storedOf(schema, 'sandbox')).toEqual(expectedMultiset(sandbox, START, END));
    expect(await bookkeeping(schema, 'production')).toEqual({ windows: 4, recorded: 300, watermark: END.toISOString(), hourly: 300 });
    expect(await bookkeeping(schema, 'sandbox')).toEqual({ windows: 4, recorded: 200, watermark: END.toISOString(), hourly: 200 });
    const runs = await bed.pool.query<{ source: string; n: number }>(`select source, count(*)::int as n from ${schema}.sync_runs group by 1 order by 1`);
    expect(runs.rows).toEqual([
      { source: 'production', n: 1 },
      { source: 'sandbox', n: 1 },
    ]);
    // The catalogue is per source; records_typed is one view with the source column.
    const fields = await bed.pool.query<{ source: string; records: number }>(
      `select source, records::int from ${schema}.record_fields where path = 'eventType' order by 1`,
    );
    expect(fields.rows).toEqual([
      { source: 'production', records: 300 },
      { source: 'sandbox', records: 200 },
    ]);
    const typed = await bed.pool.query<{ source: string; n: number }>(`select source, count(*)::int as n from ${schema}.records_typed group by 1 order by 1`);
    expect(typed.rows).toEqual([
      { source: 'production', n: 300 },
      { source: 'sandbox', n: 200 },
    ]);

    // A second day: sandbox's upstream is down (its simulator closed); production is loaded anyway.
    const DAY2 = new Date('2026-10-31T00:00:00Z');
    const DAY2_END = new Date('2026-11-01T00:00:00Z');
    const production2 = await sim({ records: 150, seed: 3, start: DAY2, end: DAY2_END, clientId: 'prod-client', clientSecret: 'prod-secret-value' });
    const sandbox2 = await sim({ records: 100, seed: 4, start: DAY2, end: DAY2_END, clientId: 'sandbox-client', clientSecret: 'sandbox-secret-value' });
    const down = sourceFor('sandbox', sandbox2, { clientId: 'sandbox-client', clientSecret: 'sandbox-secret-value' });
    await sandbox2.close();
    const prodSource = sourceFor('production', production2, { clientId: 'prod-client', clientSecret: 'prod-secret-value' });
    const second = await syncSources(configWith(schema, [prodSource, down]), silentLogger, { from: DAY2, to: DAY2_END });
    expect(statusOf(second)).toEqual({ production: 'succeeded', sandbox: 'failed' });
    expect(await storedOf(schema, 'production')).toEqual(
      [...expectedMultiset(production, START, END), ...expectedMultiset(production2, DAY2, DAY2_END)].sort(),
    );
    expect(await bookkeeping(schema, 'production')).toMatchObject({ windows: 8, recorded: 450, watermark: DAY2_END.toISOString(), hourly: 450 });
    expect(await storedOf(schema, 'sandbox')).toEqual(expectedMultiset(sandbox, START, END));
    expect(await bookkeeping(schema, 'sandbox')).toEqual({ windows: 4, recorded: 200, watermark: END.toISOString(), hourly: 200 });

    // The upstream is back (the same data, served again): only sandbox runs now, and completes.
    const sandboxBack = await sim({ records: 100, seed: 4, start: DAY2, end: DAY2_END, clientId: 'sandbox-client', clientSecret: 'sandbox-secret-value' });
    const back = sourceFor('sandbox', sandboxBack, { clientId: 'sandbox-client', clientSecret: 'sandbox-secret-value' });
    const third = await syncSources(configWith(schema, [prodSource, back]), silentLogger, { from: DAY2, to: DAY2_END, sources: ['sandbox'] });
    expect(statusOf(third)).toEqual({ sandbox: 'succeeded' });
    expect(await storedOf(schema, 'sandbox')).toEqual([...expectedMultiset(sandbox, START, END), ...expectedMultiset(sandboxBack, DAY2, DAY2_END)].sort());
    expect(await bookkeeping(schema, 'sandbox')).toEqual({ windows: 8, recorded: 300, watermark: DAY2_END.toISOString(), hourly: 300 });
    expect(await bookkeeping(schema, 'production')).toMatchObject({ windows: 8, recorded: 450 });
  });

  it('loads two sources with different credentials, data and faults in one run, each exact by itself', async () => {
    // production reorders the records of one instant on every request (ties at minute precision,
    // exact duplicates among them) over pages of 20; sandbox answers 503s, a 429, a truncated page
    // and a connection cut mid-body before it answers properly. Neither source's faults reach the other.
    const production = await sim({
      records: 300,
      seed: 11,
      timePrecisionMs: 60_000,
      duplicateEvery: 9,
      order: 'ties',
      clientId: 'prod-client',
      clientSecret: 'prod-secret-value',
    });
    const sandbox = await sim({ records: 200, seed: 12, clientId: 'sandbox-client', clientSecret: 'sandbox-secret-value' });
    sandbox.queueFault({ status: 503 }, 2, 'analytics');
    sandbox.queueFault({ status: 429, retryAfter: '0' }, 1, 'analytics');
    sandbox.queueFault('malformed-json', 1, 'analytics');
    sandbox.queueFault('reset-mid-body', 1, 'analytics');
    const faulty = { UPSTREAM_MAX_ATTEMPTS: '10', UPSTREAM_RETRY_MAX_DELAY: '50ms', SYNC_PAGE_SIZE: '20' };
    const sourceWithFaults = (name: string, s: Simulator, clientId: string, clientSecret: string): SourceConfig => ({
      ...loadConfig({ STATISTICS_URL: s.url, AUTH_URL: s.url, CLIENT_ID: clientId, CLIENT_SECRET: clientSecret, ...SYNC_ENV, ...faulty }).sources[0]!,
      name,
    });
    const schema = 'sources_with_faults';
    const outcomes = await syncSources(
      configWith(schema, [
        sourceWithFaults('production', production, 'prod-client', 'prod-secret-value'),
        sourceWithFaults('sandbox', sandbox, 'sandbox-client', 'sandbox-secret-value'),
      ]),
      silentLogger,
      { from: START, to: END },
    );
    expect(statusOf(outcomes)).toEqual({ production: 'succeeded', sandbox: 'succeeded' });
    // Every queued fault was served, and only sandbox answered anything but 200.
    expect(sandbox.pendingFaults()).toBe(0);
    expect(Object.keys(sandbox.stats.responses).sort()).toEqual(['200', '429', '503']);
    expect(Object.keys(production.stats.responses)).toEqual(['200']);
    const productionExpected = expectedMultiset(production, START, END);
    expect(productionExpected.length).toBeGreaterThan(new Set(productionExpected).size);
    expect(await storedOf(schema, 'production')).toEqual(productionExpected);
    expect(await storedOf(schema, 'sandbox')).toEqual(expectedMultiset(sandbox, START, END));
    expect(await bookkeeping(schema, 'production')).toEqual({
      windows: 4,
      recorded: productionExpected.length,
      watermark: END.toISOString(),
      hourly: productionExpected.length,
    });
    expect(await bookkeeping(schema, 'sandbox')).toEqual({ windows: 4, recorded: 200, watermark: END.toISOString(), hourly: 200 });
  });

  it("serve runs each source on its own schedule: a source whose upstream is down fails alone, labelled by source, and the other's data is loaded exactly", async () => {
    const now = Date.now();
    const dataStart = new Date(now - 20 * 3_600_000);
    const dataEnd = new Date(now - 2 * 3_600_000);
    const up = await sim({ records: 200, seed: 6, start: dataStart, end: dataEnd, clientId: 'up-client', clientSecret: 'up-secret-value' });
    const gone = await sim({ records: 100, seed: 7, start: dataStart, end: dataEnd });
    const env = { SYNC_START_DATE: '1d', SYNC_SCHEDULE: '0 0 1 1 *' };
    const sourceOf = (name: string, s: Simulator, clientId: string, clientSecret: string): SourceConfig => ({
      ...loadConfig({ STATISTICS_URL: s.url, AUTH_URL: s.url, CLIENT_ID: clientId, CLIENT_SECRET: clientSecret, ...SYNC_ENV, ...env }).sources[0]!,
      name,
    });
    const down = sourceOf('sandbox', gone, 'demo-client', 'demo-secret');
    await gone.close();
    const config = {
      ...loadConfig({ DATABASE_URL: db.url, DATABASE_SCHEMA: 'serve_sources', METRICS_LISTEN: '127.0.0.1:0', ...SYNC_ENV, ...env }),
      sources: [sourceOf('production', up, 'up-client', 'up-secret-value'), down],
    };
    const server = await startServe(config, silentLogger);
    closers.push(() => server.stop());
    expect([...server.schedulers.keys()]).toEqual(['production', 'sandbox']);
    const runs = async (name: string, source: string): Promise<number> => {
      const { values } = await server.metrics.registry.getSingleMetric(`analytics_exporter_${name}`)!.get();
      return values.filter((v) => v.labels.source === source).reduce((sum, v) => sum + v.value, 0);
    };
    await until('a finished run of each source', async () =>
      (await runs('sync_runs_total', 'production')) >= 1 && (await runs('sync_runs_total', 'sandbox')) >= 1 ? true : undefined,
    );
    expect(await runs('sync_failures_total', 'production')).toBe(0);
    expect(await runs('sync_failures_total', 'sandbox')).toBe(1);
    expect(await runs('sync_records_total', 'production')).toBe(200);
    expect(await storedOf('serve_sources', 'production')).toEqual(expectedMultiset(up, dataStart, dataEnd));
    expect(await storedOf('serve_sources', 'sandbox')).toEqual([]);
    // The failure is sandbox's upstream's, not the database's: taken for the database, it would
    // set database_up 0 and rerun every source's sync as soon as a probe found the database up.
    await until('sandbox run settled', () => (server.schedulers.get('sandbox')!.running ? undefined : true));
    expect((await server.metrics.process.databaseUp.get()).values.map((v) => v.value)).toEqual([1]);
    // A scrape meanwhile serves production's samples, with sandbox's upstream_up 0.
    const scrape = await request(`${server.url}/metrics`);
    const text = await scrape.body.text();
    expect(scrape.statusCode).toBe(200);
    expect(text).toContain('analytics_exporter_upstream_up{source="production"} 1');
    expect(text).toContain('analytics_exporter_upstream_up{source="sandbox"} 0');
    expect(text).toMatch(/^userlogin_event_count\{source="production",/m);
    expect(text).not.toMatch(/^\w+_event_count\{source="sandbox"/m);
  });

  it("serve without a schedule runs each source's first sync at once on a new schema: one migration shared, no run finding the rollup's rebuild in its way", async () => {
    const production = await sim({ records: 100, seed: 21, clientId: 'prod-client', clientSecret: 'prod-secret-value' });
    const sandbox = await sim({ records: 50, seed: 22, clientId: 'sandbox-client', clientSecret: 'sandbox-secret-value' });
    const sourceOf = (name: string, s: Simulator, clientId: string, clientSecret: string): SourceConfig => ({
      ...loadConfig({
        STATISTICS_URL: s.url,
        AUTH_URL: s.url,
        CLIENT_ID: clientId,
        CLIENT_SECRET: clientSecret,
        ...SYNC_ENV,
        SYNC_START_DATE: START.toISOString(),
        SYNC_SCHEDULE: 'off',
      }).sources[0]!,
      name,
    });
    const config = {
      ...loadConfig({ DATABASE_URL: db.url, DATABASE_SCHEMA: 'first_runs', METRICS_LISTEN: '127.0.0.1:0', SYNC_SCHEDULE: 'off', ...SYNC_ENV }),
      sources: [sourceOf('production', production, 'prod-client', 'prod-secret-value'), sourceOf('sandbox', sandbox, 'sandbox-client', 'sandbox-secret-value')],
    };
    const server = await startServe(config, silentLogger);
    closers.push(() => server.stop());
    // Triggered while the start's own migration (no schedule: it migrates in the background) runs.
    const results = await Promise.all([...server.schedulers.values()].map((s) => s.trigger('test')));
    expect(results.map((r) => r?.status)).toEqual(['succeeded', 'succeeded']);
    expect(await storedOf('first_runs', 'production')).toEqual(expectedMultiset(production, START, END));
    expect(await storedOf('first_runs', 'sandbox')).toEqual(expectedMultiset(sandbox, START, END));
  });

  it('migrates a populated database in place: every row kept, each one source default, the rollup converted rather than rebuilt', async () => {
    const s = await sim({ records: 400, seed: 5 });
    // A database as the previous release left it, filled by a sync of this release into a scratch
    // schema and copied over without the source column.
    const previous = MIGRATIONS[MIGRATIONS.indexOf('20261126000000000_sources') - 1]!;
    const scratch = 'populated_scratch';
    const schema = 'populated';
    await migrate(bed.pool, scratch, silentLogger);
    const client = simClient(s);
    closers.push(() => client.close());
    const loaded = await runSync(pgDeps({ pool: bed.pool, client, ...syncSettings(SYNC_ENV), schema: scratch, log: silentLogger }), { from: START, to: END });
    expect(loaded).toMatchObject({ status: 'succeeded', records: 400 });
    await migrateUpTo(bed.pool, schema, previous);
    const copy = async (table: string, columns: string, from = `select ${columns} from ${scratch}.${table}`): Promise<void> => {
      await bed.pool.query(`insert into ${schema}.${table} (${columns}) overriding system value ${from}`);
      // Identities continue after the ids copied, as they would after the previous release's own inserts.
      if (columns.startsWith('id,')) {
        await bed.pool.query(`select setval(pg_get_serial_sequence($1, 'id'), max(id)) from ${schema}.${table}`, [`${schema}.${table}`]);
      }
    };
    await bed.pool.query(`create table ${schema}.records_20261001_20261101 partition of ${schema}.records for values from ('2026-10-01Z') to ('2026-11-01Z')`);
    // This release keeps a record's window end, load time and run in the ledger only (20261129000000000_footprint, 20261201000000000_records_run_id).
    await copy(
      'records',
      'id, payload, event_time, window_start, window_end, loaded_at, run_id',
      `select r.id, r.payload, r.event_time, r.window_start, w.window_end, w.loaded_at, w.run_id
         from ${scratch}.records r join ${scratch}.sync_windows w using (source, window_start)`,
    );
    await copy('sync_windows', 'window_start, window_end, record_count, total_records, pages, loaded_at, run_id, expired_at');
    await copy('sync_runs', 'id, started_at, finished_at, status, range_start, range_end, windows, pages, records, error');
    await bed.pool.query(`update ${schema}.sync_state set watermark = (select watermark from ${scratch}.sync_state)`);
    await copy('record_fields', 'path, view_column, types, records, first_seen, last_seen, example');
    await bed.pool.query(
      `insert into ${schema}.records_quarantine (payload_text, json_path, reason, window_start, window_end, run_id)
       values ('{"a":"\\u0000"}', '$.a', 'U+0000', '2026-10-30T00:00:00Z', '2026-10-30T06:00:00Z', 1)`,
    );
    // records_hourly of the previous shape (2): without source, its key leading with window_start.
    await bed.pool.query(
      `create table ${schema}.records_hourly (bucket timestamptz not null, window_start timestamptz not null, event_type text, customer_id text, records bigint not null check (records > 0))`,
    );
    await bed.pool.query(
      `create unique index on ${schema}.records_hourly (window_start, bucket, (coalesce(event_type, '')), ((event_type is null)), (coalesce(customer_id, '')), ((customer_id is null)))`,
    );
    await bed.pool.query(`insert into ${schema}.records_hourly select bucket, window_start, event_type, customer_id, records from ${scratch}.records_hourly`);
    await bed.pool.query(
      `insert into ${schema}.derived_settings (name, value) values ('rollup_dimensions', '{"shape": 2, "dimensions": ["event_type=eventType", "customer_id=customerId"]}')`,
    );
    const digest = (target: string, table: string, columns: string) =>
      bed.pool.query<{ n: number; digest: string | null }>(
        `select count(*)::int as n, md5(string_agg(concat_ws(' ', ${columns}), E'\\n' order by ${columns})) as digest from ${target}.${table}`,
      );
    const tables: [string, string][] = [
      // The columns every later migration keeps (20261129000000000_footprint moves window_end and loaded_at to the ledger, 20261201000000000_records_run_id run_id).
      ['records', 'id, payload::text, event_time, window_start'],
      ['sync_windows', 'window_start, window_end, record_count, total_records, pages, run_id'],
      ['sync_runs', 'id, started_at, status, range_start, range_end, records'],
      ['record_fields', 'path, view_column, types::text, records, first_seen, last_seen'],
      ['records_hourly', 'bucket, window_start, event_type, customer_id, records'],
      ['records_quarantine', 'payload_text, json_path, window_start'],
    ];
    const before = await Promise.all(tables.map(([table, columns]) => digest(schema, table, columns)));
    expect(before[0]!.rows[0]!.n).toBe(400);

    // That migration and every later one (they keep the rows as well).
    expect(await migrate(bed.pool, schema, silentLogger)).toEqual(MIGRATIONS.slice(MIGRATIONS.indexOf('20261126000000000_sources')));
    const after = await Promise.all(tables.map(([table, columns]) => digest(schema, table, columns)));
    expect(after.map((r) => r.rows[0])).toEqual(before.map((r) => r.rows[0]));
    for (const [table] of [...tables, ['sync_state', '']]) {
      const sources = await bed.pool.query<{ source: string }>(`select distinct source from ${schema}.${table}`);
      expect(sources.rows, table).toEqual([{ source: 'default' }]);
    }
    const setting = await bed.pool.query<{ shape: number }>(
      `select (value ->> 'shape')::int as shape from ${schema}.derived_settings where name = 'rollup_dimensions'`,
    );
    expect(setting.rows[0]!.shape).toBe(3);

    // A sync afterwards finds the rollup current (not rebuilt) and stays exact.
    const hourlyOid = await bed.pool.query<{ oid: number }>(`select $1::regclass::oid::int as oid`, [`${schema}.records_hourly`]);
    const again = await runSync(pgDeps({ pool: bed.pool, client, ...syncSettings(SYNC_ENV), schema, log: silentLogger }), { from: START, to: END });
    expect(again).toMatchObject({ status: 'succeeded', records: 400 });
    const hourlyOidAfter = await bed.pool.query<{ oid: number }>(`select $1::regclass::oid::int as oid`, [`${schema}.records_hourly`]);
    expect(hourlyOidAfter.rows[0]!.oid).toBe(hourlyOid.rows[0]!.oid);
    expect(await storedOf(schema, 'default')).toEqual(expectedMultiset(s, START, END));
    expect(await bookkeeping(schema, 'default')).toEqual({ windows: 4, recorded: 400, watermark: END.toISOString(), hourly: 400 });
  });
});
