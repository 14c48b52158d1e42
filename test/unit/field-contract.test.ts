/**
 * Schema changes (issue 26 item 5): the contract's rules (src/sync/derived/fields/schema-changes.ts), and whole
 * runs against an in-memory store and a fake E6 (src/sync/run/field-contract.ts in the run): a field or type
 * new after the source's first run is warned about once and counted, FIELD_CONTRACT=freeze
 * quarantines the records bringing one and loads the rest, and evolve plus a reload takes them.
 * The SQL is test/integration/field-contract.test.ts's to prove.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { ConfigError } from '../../src/errors.js';
import { ExporterMetrics } from '../../src/metrics/registry.js';
import type { WindowFields } from '../../src/sync/derived/index.js';
import {
  breaksFreeze,
  contractReason,
  fieldChanges,
  fieldJsonPath,
  mayBreakFreeze,
  recordBreaches,
  type KnownFields,
} from '../../src/sync/derived/fields/schema-changes.js';
import { catalogueRecords } from '../../src/sync/derived/fields/catalogue.js';
import type { SyncObserver, SyncResult } from '../../src/sync/run/run.js';
import { FakeE6, record, type FakeRecord } from '../helpers/fake-e6.js';
import { captureLog } from '../helpers/log-capture.js';
import { MemoryStore } from '../helpers/memory-store.js';
import { runUnitSync } from '../helpers/unit-sync.js';

const HOUR = 3_600_000;
const T0 = Date.parse('2026-11-01T00:00:00Z');
const NOW = T0 + 10 * HOUR;

const known = (entries: Record<string, string[]>): KnownFields => new Map(Object.entries(entries).map(([k, v]) => [k, new Set(v)]));
const fieldsOf = (records: readonly unknown[]): WindowFields =>
  catalogueRecords(
    records,
    records.map((_, i) => i),
    records.map(() => null),
  );

describe('the contract rules', () => {
  const catalogue = known({ id: ['number'], timestamp: ['date-time'], name: ['string'], tags: ['array'] });

  it('lists what a window brings that the catalogue does not hold, new fields and new types, sorted', () => {
    const fields = fieldsOf([
      { id: 1, name: 'a', amount: 3 },
      { id: '2', name: null, amount: 4 },
    ]);
    expect(fieldChanges(catalogue, fields)).toEqual([
      { path: 'amount', type: 'number', newField: true },
      { path: 'id', type: 'string', newField: false },
      { path: 'name', type: 'null', newField: false },
    ]);
    expect(fieldChanges(catalogue, fieldsOf([{ id: 1, name: 'x', tags: [] }]))).toEqual([]);
  });

  it('under freeze: null is never new, a date-time in a string field is a string, any other unseen type or field is new', () => {
    expect(breaksFreeze(undefined, 'number')).toBe(true);
    expect(breaksFreeze(undefined, 'null')).toBe(false);
    expect(breaksFreeze(new Set(['number']), 'null')).toBe(false);
    expect(breaksFreeze(new Set(['string']), 'date-time')).toBe(false);
    expect(breaksFreeze(new Set(['date-time']), 'string')).toBe(true);
    expect(breaksFreeze(new Set(['object']), 'array')).toBe(true);
    expect(breaksFreeze(new Set(['number']), 'number')).toBe(false);
  });

  it('finds the records that break freeze, and tells a page that has none by its totals', () => {
    expect(recordBreaches(catalogue, { id: 1, name: 'a', timestamp: '2026-11-01T00:00:00Z' })).toEqual([]);
    expect(recordBreaches(catalogue, { id: 1, name: 'a', extra: null })).toEqual([]);
    expect(recordBreaches(catalogue, { id: 'x', amount: 2, name: '2026-11-01T00:00:00Z' })).toEqual([
      { path: 'id', type: 'string', newField: false },
      { path: 'amount', type: 'number', newField: true },
    ]);
    expect(recordBreaches(catalogue, ['not', 'an', 'object'])).toEqual([]);
    expect(mayBreakFreeze(catalogue, fieldsOf([{ id: 1, name: 'a' }, { extra: null }]))).toBe(false);
    expect(mayBreakFreeze(catalogue, fieldsOf([{ id: 1 }, { tags: {} }]))).toBe(true);
  });

  it('names the changes in the quarantine reason and the first field in json_path', () => {
    const reason = contractReason([
      { path: 'amount', type: 'number', newField: true },
      { path: 'id', type: 'string', newField: false },
    ]);
    expect(reason).toBe(
      'contract: new field "amount" (number), new type string of field "id", not in the field catalogue record_fields before the window (FIELD_CONTRACT=freeze)',
    );
    const many = contractReason(['a', 'b', 'c', 'd', 'e'].map((path) => ({ path, type: 'number', newField: true })));
    expect(many).toContain('new field "c" (number) and 2 more,');
    expect(fieldJsonPath('amount')).toBe('$.amount');
    expect(fieldJsonPath('order id')).toBe('$["order id"]');
    expect(fieldJsonPath('x'.repeat(200)).length).toBeLessThan(100);
  });
});

/** Records every 20 minutes over [T0, T0 + 3h), ids from 1: the first run's baseline. */
function baseline(): FakeRecord[] {
  return Array.from({ length: 9 }, (_, i) => record(i + 1, T0 + i * 20 * 60_000, { eventType: 'view', customerId: 'c1' }));
}

function harness(data: readonly FakeRecord[]) {
  const store = new MemoryStore();
  const e6 = new FakeE6(data);
  const log = captureLog();
  const events = { changed: [] as { window: unknown; changes: readonly unknown[] }[] };
  const metrics = new ExporterMetrics({ processMetrics: false });
  const counting = metrics.syncObserver('default');
  const observer: SyncObserver = {
    ...counting,
    fieldsChanged: (e) => {
      events.changed.push(e);
      counting.fieldsChanged?.(e);
    },
  };
  const run = async (env: Record<string, string> = {}, range?: { from: Date; to: Date }): Promise<Exclude<SyncResult, { status: 'locked' }>> => {
    return runUnitSync({ store, client: e6, log, level: 'debug', observer }, env, {
      now: () => NOW,
      ...(range ?? { from: new Date(T0), to: new Date(T0 + 6 * HOUR) }),
    });
  };
  const warnings = (field: string) => log.lines().filter((l) => l.level === 'warn' && l.field === field);
  const value = async (name: string) => (await metrics.families()).find((f) => f.name === name)!.samples[0]!.value;
  const counter = () => value('analytics_exporter_record_fields_new_total');
  const quarantinedCounter = () => value('analytics_exporter_sync_records_quarantined_total');
  return { store, e6, log, events, run, warnings, counter, quarantinedCounter };
}

const LATE = T0 + 4 * HOUR + 30 * 60_000;
/** Records of the window [4h, 5h): one with a new field, one with a new type, two as before. */
function changed(): FakeRecord[] {
  return [
    record(100, LATE, { eventType: 'view', customerId: 'c1', amount: 12.5 }),
    record(101, LATE + 60_000, { eventType: 7, customerId: 'c1' }),
    record(102, LATE + 120_000, { eventType: 'view', customerId: 'c2' }),
    record(103, LATE + 180_000, { eventType: 'view', customerId: 'c2', note: null }),
  ];
}

describe('schema changes in a run (in-memory store, fake E6)', () => {
  it('evolve: the first run reports nothing; a later new field and a new type are warned about once each, counted and recorded with their window', async () => {
    const h = harness(baseline());
    const first = await h.run();
    expect(first).toMatchObject({ status: 'succeeded', records: 9 });
    expect(first.fieldsNew ?? 0).toBe(0);
    expect(h.events.changed).toEqual([]);
    expect(h.log.lines().filter((l) => l.level === 'warn')).toEqual([]);

    h.e6.records.push(...changed());
    const second = await h.run();
    expect(second).toMatchObject({ status: 'succeeded', records: 13, quarantined: 0, fieldsNew: 3 });
    const window = { start: T0 + 4 * HOUR, end: T0 + 5 * HOUR };
    const changes = [
      { path: 'amount', type: 'number', newField: true },
      { path: 'eventType', type: 'number', newField: false },
      { path: 'note', type: 'null', newField: true },
    ];
    expect(h.events.changed).toEqual([{ window, changes }]);
    expect(h.store.derived.find((d) => d.window.start === window.start && d.changes.length > 0)?.changes).toEqual(changes);
    const [amount] = h.warnings('amount');
    expect(h.warnings('amount')).toHaveLength(1);
    expect(amount).toMatchObject({ type: 'number', change: 'new field', window: ['2026-11-01T04:00:00.000Z', '2026-11-01T05:00:00.000Z'] });
    expect(String(amount!.msg)).toContain('new field "amount" (number)');
    expect(h.warnings('eventType')).toEqual([expect.objectContaining({ type: 'number', change: 'new type' })]);
    expect(await h.counter()).toBe(3);

    // Known now: a reload of the same windows reports nothing again.
    const third = await h.run();
    expect(third.fieldsNew ?? 0).toBe(0);
    expect(h.warnings('amount')).toHaveLength(1);
    expect(await h.counter()).toBe(3);
  });

  it('freeze: the records bringing a change are quarantined with reason contract, the rest load; evolve and a reload store them', async () => {
    const h = harness(baseline());
    // The first run is the baseline even under freeze: everything in it is taken.
    expect(await h.run({ FIELD_CONTRACT: 'freeze' })).toMatchObject({ status: 'succeeded', records: 9, quarantined: 0 });

    h.e6.records.push(...changed());
    const frozen = await h.run({ FIELD_CONTRACT: 'freeze' });
    // 100 (new field amount) and 101 (eventType a number) are refused; 103's new field holds null: taken.
    expect(frozen).toMatchObject({ status: 'succeeded', records: 11, quarantined: 2, fieldsNew: 1 });
    expect(h.events.changed.map((e) => e.changes)).toEqual([[{ path: 'note', type: 'null', newField: true }]]);
    const quarantine = h.store.quarantine.map((q) => ({ id: (JSON.parse(q.text) as FakeRecord).id, path: q.path, reason: q.reason }));
    expect(quarantine).toEqual([
      { id: 100, path: '$.amount', reason: expect.stringMatching(/^contract: new field "amount" \(number\), not in the field catalogue/) },
      { id: 101, path: '$.eventType', reason: expect.stringMatching(/^contract: new type number of field "eventType"/) },
    ]);
    expect(h.store.records.map((r) => (r.payload as FakeRecord).id)).not.toContain(100);
    // The catalogue did not take them: no amount, no number among eventType's types.
    const catalogued = h.store.derived.flatMap((d) => [...d.fields.keys()]);
    expect(catalogued).not.toContain('amount');
    expect(h.store.derived.every((d) => !d.fields.get('eventType')?.types.has('number'))).toBe(true);
    const contractWarnings = h.log.lines().filter((l) => l.level === 'warn' && String(l.msg).includes('FIELD_CONTRACT=freeze'));
    expect(contractWarnings).toHaveLength(1);
    expect(contractWarnings[0]).toMatchObject({ quarantined: 2, changes: ['new field "amount" (number)', 'new type number of field "eventType"'] });
    // Counted like every quarantined record, and not as the other kind's warning.
    expect(await h.quarantinedCounter()).toBe(2);
    expect(h.log.lines().filter((l) => String(l.msg).startsWith('E6 returned records PostgreSQL cannot store'))).toEqual([]);

    // A second frozen run refuses them again and keeps one quarantined copy each (SYNC_SHRINK=keep, the default).
    expect(await h.run({ FIELD_CONTRACT: 'freeze' })).toMatchObject({ records: 11, quarantined: 2 });
    expect(h.store.quarantine).toHaveLength(2);

    // evolve, and the window loaded again: stored, the quarantine of the window gone, the changes reported.
    const evolved = await h.run({}, { from: new Date(T0 + 4 * HOUR), to: new Date(T0 + 5 * HOUR) });
    expect(evolved).toMatchObject({ status: 'succeeded', records: 4, quarantined: 0, fieldsNew: 2 });
    expect(h.store.quarantine).toEqual([]);
    expect(
      h.store.records
        .map((r) => (r.payload as FakeRecord).id)
        .filter((id) => id >= 100)
        .sort(),
    ).toEqual([100, 101, 102, 103]);
    expect(await h.counter()).toBe(3);
  });
});

describe('FIELD_CONTRACT settings', () => {
  it('defaults to evolve, takes freeze, refuses another value, and refuses freeze without the catalogue', () => {
    expect(loadConfig({}).sources[0]!.sync.fieldContract).toBe('evolve');
    expect(loadConfig({ FIELD_CONTRACT: 'freeze' }).sources[0]!.sync.fieldContract).toBe('freeze');
    expect(() => loadConfig({ FIELD_CONTRACT: 'discard' })).toThrow(/FIELD_CONTRACT must be 'evolve' or 'freeze'/);
    expect(() => loadConfig({ FIELD_CONTRACT: 'freeze', FIELD_CATALOGUE: 'off' })).toThrow(ConfigError);
    expect(() => loadConfig({ FIELD_CONTRACT: 'freeze', FIELD_CATALOGUE: 'off' })).toThrow(/FIELD_CATALOGUE=on/);
  });

  it('is a per-source setting of CONFIG_FILE (sync.field_contract)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'field-contract-'));
    const file = join(dir, 'sources.yaml');
    const entry = (name: string, extra: string[] = []) =>
      [
        `  - name: ${name}`,
        `    statistics_url: https://${name}.test/`,
        `    auth_url: https://${name}.test/`,
        `    client_id: ${name}`,
        `    client_secret: s3cret-${name}`,
        ...extra.map((l) => `    ${l}`),
      ].join('\n');
    writeFileSync(file, `sources:\n${entry('a', ['sync: {field_contract: freeze}'])}\n${entry('b')}\n`);
    const [a, b] = loadConfig({ CONFIG_FILE: file }).sources;
    expect([a!.sync.fieldContract, b!.sync.fieldContract]).toEqual(['freeze', 'evolve']);
  });
});
