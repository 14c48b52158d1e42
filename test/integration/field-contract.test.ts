/**
 * Schema changes are visible (issue 26 item 5), against real PostgreSQL and the simulator with
 * `admin`: the first run of a source reports nothing; records added later with a new field are
 * reported once (a warning naming the source, field, type and window; record_fields_new_total;
 * record_fields and record_field_changes); under FIELD_CONTRACT=freeze the records bringing a new
 * field or type go to records_quarantine with reason `contract:` and the rest of the window loads;
 * back under evolve, a reload of the window stores them and drops their quarantine rows (under
 * SYNC_SHRINK=keep, the default). Exactness is judged by what E6 serves (servedJson).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { startSimulator, type Simulator } from '@analytics-exporter/simulator';
import type { Dashboard, Panel, RowPanel } from '@grafana/grafana-foundation-sdk/dashboard';
import { describe, expect, it } from 'vitest';
import { DASHBOARDS_DIR } from '../../grafana/src/generate.js';
import { renderSql } from '../../grafana/src/interpolate.js';
import { migrate } from '../../src/db/migrate.js';
import { createLogger } from '../../src/log.js';
import { silentLogger } from '../helpers/silent-logger.js';
import { ExporterMetrics } from '../../src/metrics/registry.js';
import { runSync } from '../../src/sync/run/run.js';
import { useAppPool, useTestDatabase } from '../helpers/db.js';
import { captureLog } from '../helpers/log-capture.js';
import { canonicalJson, simClient, storedMultiset, syncSettings } from '../helpers/sync.js';
import { pgDeps } from '../helpers/pg-deps.js';

const db = useTestDatabase();
const bed = useAppPool(db);
const closers = bed.closers;

const START = new Date('2026-10-31T00:00:00Z');
const END = new Date('2026-11-01T00:00:00Z');
const ENV = { SYNC_WINDOW: '1h', SYNC_SETTLE: '0', SYNC_PAGE_SIZE: '100' };
const SCHEMA = 'field_contract';

/** Adds `records` to the simulator through POST /admin/records. */
async function addRecords(s: Simulator, records: readonly Record<string, unknown>[]): Promise<void> {
  const response = await fetch(`${s.url}/admin/records`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ records }),
  });
  expect(response.status).toBe(200);
}

/** A record shaped as the simulator's own (its base record `i`), stamped `at`, with `extra` fields. */
function recordLike(s: Simulator, i: number, at: string, extra: Record<string, unknown>): Record<string, unknown> {
  return { ...s.dataset.record(i), timestamp: at, ...extra };
}

/** What E6 serves for the day, canonical and sorted. */
const served = (s: Simulator): string[] =>
  s
    .servedJson(START, END)
    .map((text) => canonicalJson(JSON.parse(text)))
    .sort();

describe('schema changes (real PostgreSQL, the simulator)', () => {
  it(
    'first run silent; a new field warned once and counted; freeze quarantines with reason contract; evolve and a reload load them',
    { timeout: 120_000 },
    async () => {
      const s = await startSimulator({ port: 0, records: 480, start: START, end: END, admin: true });
      closers.push(() => s.close());
      await migrate(bed.pool, SCHEMA, silentLogger);
      const metrics = new ExporterMetrics({ processMetrics: false });
      const observer = metrics.syncObserver('default');
      const value = async (name: string) => (await metrics.registry.getSingleMetric(name)!.get()).values[0]?.value;
      const counter = () => value('analytics_exporter_record_fields_new_total');
      const log = captureLog();
      const logger = createLogger('info', { format: 'json', destination: log }).child({ source: 'default' });
      const run = async (env: Record<string, string> = {}, range = { from: START, to: END }) => {
        const client = simClient(s);
        try {
          return await runSync(pgDeps({ pool: bed.pool, client, ...syncSettings({ ...ENV, ...env }), schema: SCHEMA, log: logger, observer }), {
            ...range,
            now: () => END.getTime(),
          });
        } finally {
          await client.close();
        }
      };
      const fieldWarnings = () => log.lines().filter((l) => l.level === 'warn' && typeof l.field === 'string');
      const catalogue = async (path: string) =>
        (await bed.pool.query<{ types: string[] }>(`select types from "${SCHEMA}".record_fields where source = 'default' and path = $1`, [path])).rows[0]
          ?.types;
      const changes = async () =>
        (
          await bed.pool.query<{ path: string; type: string; new_field: boolean; window_start: Date }>(
            `select path, type, new_field, window_start from "${SCHEMA}".record_field_changes where source = 'default' order by path, type`,
          )
        ).rows;
      const quarantine = async () =>
        (
          await bed.pool.query<{ payload_text: string; json_path: string; reason: string; window_start: Date }>(
            `select payload_text, json_path, reason, window_start from "${SCHEMA}".records_quarantine where source = 'default' order by json_path, payload_text`,
          )
        ).rows;

      // 1. The source's first run: every field is new to it, and none is reported.
      expect(await run()).toMatchObject({ status: 'succeeded', windows: 24, records: 480, quarantined: 0 });
      expect(fieldWarnings()).toEqual([]);
      expect(await counter()).toBe(0);
      expect(await changes()).toEqual([]);
      expect(await catalogue('eventType')).toEqual(['string']);

      // 2. Records with a new field arrive in [10h, 11h): one warning, the counter at 1, the catalogue and the change table show it.
      await addRecords(s, [recordLike(s, 0, '2026-10-31T10:30:00Z', { amount_v2: 12.5 }), recordLike(s, 1, '2026-10-31T10:31:00Z', { amount_v2: 7 })]);
      expect(await run()).toMatchObject({ status: 'succeeded', records: 482, quarantined: 0, fieldsNew: 1 });
      expect(fieldWarnings()).toEqual([
        expect.objectContaining({
          source: 'default',
          field: 'amount_v2',
          type: 'number',
          change: 'new field',
          window: ['2026-10-31T10:00:00.000Z', '2026-10-31T11:00:00.000Z'],
        }),
      ]);
      expect(await counter()).toBe(1);
      expect(await catalogue('amount_v2')).toEqual(['number']);
      expect(await changes()).toEqual([{ path: 'amount_v2', type: 'number', new_field: true, window_start: new Date('2026-10-31T10:00:00Z') }]);
      expect(await storedMultiset(bed.pool, SCHEMA)).toEqual(served(s));
      // Loading the day again reports nothing more: the catalogue holds the field now.
      expect(await run()).toMatchObject({ status: 'succeeded', records: 482 });
      expect(fieldWarnings()).toHaveLength(1);
      expect(await counter()).toBe(1);

      // 3. Under freeze: a new field (region) and a new type of a known one (amount_v2 as a string) in [14h, 15h).
      await addRecords(s, [
        recordLike(s, 2, '2026-10-31T14:10:00Z', { region: 'north' }),
        recordLike(s, 3, '2026-10-31T14:20:00Z', { region: 'south' }),
        recordLike(s, 4, '2026-10-31T14:30:00Z', { amount_v2: '12,5' }),
        recordLike(s, 5, '2026-10-31T14:40:00Z', { amount_v2: 3 }),
      ]);
      const frozen = await run({ FIELD_CONTRACT: 'freeze' });
      expect(frozen).toMatchObject({ status: 'succeeded', records: 483, quarantined: 3 });
      const held = await quarantine();
      expect(held.map((q) => [q.json_path, q.window_start])).toEqual([
        ['$.amount_v2', new Date('2026-10-31T14:00:00Z')],
        ['$.region', new Date('2026-10-31T14:00:00Z')],
        ['$.region', new Date('2026-10-31T14:00:00Z')],
      ]);
      expect(held[0]!.reason).toMatch(
        /^contract: new type string of field "amount_v2", not in the field catalogue record_fields before the window \(FIELD_CONTRACT=freeze\)$/,
      );
      expect(held[1]!.reason).toMatch(/^contract: new field "region" \(string\)/);
      // The rest of the window loaded (the record with amount_v2 a number among them); stored + quarantined is what E6 serves.
      const quarantinedTexts = held.map((q) => canonicalJson(JSON.parse(q.payload_text)));
      expect([...(await storedMultiset(bed.pool, SCHEMA)), ...quarantinedTexts].sort()).toEqual(served(s));
      expect(await catalogue('region')).toBeUndefined();
      expect(await catalogue('amount_v2')).toEqual(['number']);
      expect(await counter()).toBe(1);
      expect(await value('analytics_exporter_sync_records_quarantined_total')).toBe(3);
      const contractWarnings = log.lines().filter((l) => l.level === 'warn' && String(l.msg).includes('FIELD_CONTRACT=freeze'));
      expect(contractWarnings).toEqual([
        expect.objectContaining({ source: 'default', quarantined: 3, window: ['2026-10-31T14:00:00.000Z', '2026-10-31T15:00:00.000Z'] }),
      ]);

      // 4. evolve, and the window loaded again: the records stored, their quarantine rows gone, the changes reported.
      const evolved = await run({}, { from: new Date('2026-10-31T14:00:00Z'), to: new Date('2026-10-31T15:00:00Z') });
      expect(evolved).toMatchObject({ status: 'succeeded', windows: 1, quarantined: 0, fieldsNew: 2 });
      expect(await quarantine()).toEqual([]);
      expect(await storedMultiset(bed.pool, SCHEMA)).toEqual(served(s));
      expect(await catalogue('region')).toEqual(['string']);
      expect(await catalogue('amount_v2')).toEqual(['number', 'string']);
      expect((await changes()).map((c) => [c.path, c.type, c.new_field])).toEqual([
        ['amount_v2', 'number', true],
        ['amount_v2', 'string', false],
        ['region', 'string', true],
      ]);
      expect(await counter()).toBe(3);

      // The Analytics history dashboard's table lists them, newest first, as Grafana would query it.
      const { sql: panelSql, variables } = newFieldsPanel();
      const sql = renderSql(
        panelSql,
        { variables, selections: { schema: { values: [SCHEMA] }, source: { values: ['default'] } } },
        { from: new Date(Date.now() - 3_600_000), to: new Date(Date.now() + 60_000) },
      );
      const shown = (await bed.pool.query<{ Field: string; Type: string; Change: string }>(sql)).rows;
      expect(shown.map((r) => `${r.Field} ${r.Type} ${r.Change}`).sort()).toEqual([
        'amount_v2 number new field',
        'amount_v2 string new type',
        'region string new field',
      ]);
    },
  );
});

/** The SQL of the Analytics history panel "New fields and types", from the generated dashboard file, and the dashboard's variables. */
function newFieldsPanel(): { sql: string; variables: NonNullable<NonNullable<Dashboard['templating']>['list']> } {
  const dashboard = JSON.parse(readFileSync(join(DASHBOARDS_DIR, 'analytics-history.json'), 'utf8')) as Dashboard;
  const panels = (dashboard.panels ?? []).flatMap((p) => [p as Panel, ...((p as RowPanel).panels ?? [])]);
  const panel = panels.find((p) => p.title === 'New fields and types');
  expect(panel, 'the dashboard has the panel').toBeDefined();
  return { sql: (panel!.targets![0] as unknown as { rawSql: string }).rawSql, variables: dashboard.templating.list! };
}
