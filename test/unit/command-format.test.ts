/**
 * What the commands print on stdout, from their results alone (src/commands/format/): `state
 * set-watermark` and `state reset`, `check`'s configuration line, `migrate` and `rollup rebuild`.
 */
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { formatConfigurationDetail, formatSection, formatStep } from '../../src/commands/format/check.js';
import { formatMigration, formatRollupRebuild } from '../../src/commands/format/schema.js';
import { formatReloadMarks, formatWatermarkMove } from '../../src/commands/format/state.js';

const DAY = 86_400_000;
const T0 = Date.parse('2026-10-01T00:00:00Z');
const day = (n: number) => new Date(T0 + n * DAY).toISOString();

describe('state set-watermark', () => {
  it('says where the watermark was and is, and what the next run plans from', () => {
    expect(formatWatermarkMove('production', { before: T0, after: T0 + 2 * DAY, skipped: undefined })).toBe(
      `source production: watermark ${day(0)} -> ${day(2)}; the next run plans from ${day(2)} minus SYNC_LOOKBACK\n`,
    );
    expect(formatWatermarkMove('a', { before: undefined, after: T0, skipped: { start: T0 + DAY, end: T0 + 2 * DAY } })).toBe(
      `source a: watermark none -> ${day(0)}; --force: it moved past windows that are not loaded, the first [${day(1)}, ${day(2)}); ` +
        `the next run plans from ${day(0)} minus SYNC_LOOKBACK\n`,
    );
  });
});

describe('state reset', () => {
  const range = { from: new Date(T0), to: new Date(T0 + 5 * DAY) };

  it('names the windows marked, the parked ones among them, and the expired ones left', () => {
    const marks = {
      windows: [
        { start: T0, end: T0 + DAY, status: 'committed' as const },
        { start: T0 + DAY, end: T0 + 2 * DAY, status: 'parked' as const },
      ],
      expired: 3,
    };
    expect(formatReloadMarks('a', range, marks)).toBe(
      `source a: 2 window(s) in [${day(0)}, ${day(2)}) marked for re-load (1 parked); the next sync of the source loads them again; ` +
        '3 expired window(s) left as they are (sync --from/--to loads them)\n',
    );
  });

  it('says when no loaded window overlaps the range', () => {
    expect(formatReloadMarks('a', range, { windows: [], expired: 0 })).toBe(`source a: no loaded window overlaps [${day(0)}, ${day(5)}); nothing marked\n`);
  });
});

describe('check', () => {
  it('pads a step into columns', () => {
    expect(formatStep({ step: 'token', status: 'ok', detail: 'issued' })).toBe('ok    token          issued');
  });

  it("names the environment's one source's upstream, or the demo, or CONFIG_FILE's sources", () => {
    const upstream = loadConfig({
      STATISTICS_URL: 'https://statistics.example.com/',
      AUTH_URL: 'https://identity.example.com/',
      CLIENT_ID: 'c',
      CLIENT_SECRET: 's',
    });
    expect(formatConfigurationDetail(upstream.sources, undefined)).toBe('upstream https://statistics.example.com/');
    expect(formatSection(upstream.sources[0]!)).toBe('source default: upstream https://statistics.example.com/');
    const demo = loadConfig({});
    expect(formatConfigurationDetail(demo.sources, undefined)).toBe('STATISTICS_URL unset: checking against the built-in demo simulator');
    expect(formatConfigurationDetail(demo.sources, '/etc/sources.yaml')).toBe('1 source from /etc/sources.yaml: default');
  });
});

describe('migrate and rollup rebuild', () => {
  it('lists the migrations applied, or says the schema is up to date, and the rollup rebuild', () => {
    expect(formatMigration('analytics', { applied: ['001_init', '002_rollup'], rollupRebuilt: false })).toBe('applied: 001_init, 002_rollup\n');
    expect(formatMigration('analytics', { applied: [], rollupRebuilt: true })).toBe(
      'schema analytics is up to date\nrebuilt the rollup tables for the ROLLUP_* settings\n',
    );
  });

  it('gives each rollup table its rows, or says it was dropped', () => {
    expect(formatRollupRebuild({ hourly: 120, distinct: undefined })).toBe(
      'rebuilt records_hourly: 120 rows\ndropped records_hourly_distinct: not configured\n',
    );
  });
});
