/**
 * The quarantine's storage against a real PostgreSQL: records_quarantine (migrations/) holds each
 * quarantined record's JSON text byte for byte (`\u0000` and unpaired surrogate escapes, which
 * jsonb refuses, included), clearWindow replaces a window's quarantined rows with its records, and
 * a page read from E6 with a bad record stores its other records exactly from page.text while the
 * bad one goes to the quarantine.
 */
import { storablePage, unstorableEscapes } from '../../src/sync/rows/storable.js';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrate } from '../../src/db/migrate.js';
import { createPool, withClient, type Pool } from '../../src/db/pool.js';
import { silentLogger } from '../helpers/silent-logger.js';
import { ensurePartitions } from '../../src/sync/store/pg/partitions.js';
import { PgLedger } from '../../src/sync/store/pg/ledger.js';
import { deleteQuarantined, insertQuarantined, prepareInsertQuarantined, prepareInsertRecords } from '../../src/sync/store/pg/records.js';
import { Tables } from '../../src/sync/store/pg/tables.js';
import type { QuarantineRow } from '../../src/sync/rows/page-rows.js';
import type { PoolClient } from '../../src/db/pool.js';
import type { Window } from '../../src/sync/windows.js';
import { decodePage, parsePage } from '../../src/upstream/analytics.js';
import { dataElementSpans } from '../../src/upstream/page-text.js';
import { useTestDatabase } from '../helpers/db.js';

/** What a window's load clears before it is loaded again: its records, quarantined records and ledger rows. @returns the records deleted. */
async function clearWindow(db: PoolClient, t: Tables, source: string, window: Window): Promise<number> {
  const { rowCount } = await db.query(`delete from ${t.records} where source = $3 and window_start >= $1 and window_start < $2`, [
    new Date(window.start),
    new Date(window.end),
    source,
  ]);
  await deleteQuarantined(db, { t, source, window });
  await new PgLedger(db, t, source).clearWindows(window);
  return rowCount ?? 0;
}

const db = useTestDatabase();
let pool: Pool;
const SCHEMA = 'quarantine';
const t = new Tables(SCHEMA);
const SOURCE = 'default';
const url = new URL('https://stats.test/analytics');
const DAY = { start: Date.parse('2026-10-01T00:00:00Z'), end: Date.parse('2026-10-02T00:00:00Z') };
const NEXT_DAY = { start: DAY.end, end: DAY.end + 86_400_000 };

beforeAll(async () => {
  pool = createPool(db.url, silentLogger, { max: 2 });
  await migrate(pool, SCHEMA, silentLogger);
  // records is partitioned: rows of these days need their partition, as a run creates it first.
  await withClient(pool, (c) => ensurePartitions(c, t, [DAY.start, NEXT_DAY.start], 'month'));
});
afterAll(async () => {
  await pool?.end();
});

interface StoredRow {
  payload_text: string;
  json_path: string;
  reason: string;
  event_time: Date | null;
  window_start: Date;
  window_end: Date;
  run_id: string;
}

async function quarantined(window = DAY): Promise<StoredRow[]> {
  const { rows } = await pool.query<StoredRow>(
    `select payload_text, json_path, reason, event_time, window_start, window_end, run_id from ${t.quarantine} where window_start = $1 order by id`,
    [new Date(window.start)],
  );
  return rows;
}

describe('records_quarantine', () => {
  it('holds each payload_text byte for byte: \\u0000, unpaired surrogate escapes, quotes, backslashes, braces', async () => {
    const texts = [
      '{"name":"a\\u0000b"}',
      '{"s":"x\\ud800"}',
      '{"s":"\\udfffy","t":"\\udc00\\ud800"}',
      JSON.stringify({ nul: 'a\u0000b', lone: 'x\ud800', pair: '😀' }), // JSON.stringify escapes U+0000 and lone surrogates
      '{"k\\u0000":1, "q":"\\"{}[],NULL\\\\", "n":1e400,\n "deep":[[[]]]}',
      '{"empty":""}',
      'NULL',
      '',
    ];
    const rows: QuarantineRow[] = texts.map((text, i) => ({
      text,
      path: `$["p${i}"]`,
      reason: `reason ${i} "quoted" \\`,
      eventTime: i === 0 ? null : DAY.start + i,
    }));
    await withClient(pool, (c) => insertQuarantined(c, { t, source: SOURCE, window: DAY, runId: 7 }, rows));
    const stored = await quarantined();
    expect(stored.map((r) => r.payload_text)).toEqual(texts);
    expect(stored.map((r, i) => Buffer.from(r.payload_text, 'utf8').equals(Buffer.from(texts[i]!, 'utf8')))).toEqual(texts.map(() => true));
    expect(stored.map((r) => [r.json_path, r.reason])).toEqual(rows.map((r) => [r.path, r.reason]));
    expect(stored.map((r) => r.event_time?.getTime() ?? null)).toEqual(rows.map((r) => r.eventTime));
    expect(stored.every((r) => r.window_start.getTime() === DAY.start && r.window_end.getTime() === DAY.end && r.run_id === '7')).toBe(true);
    // The json type (unlike jsonb) takes such text as it is: an operator can cast and inspect it.
    const { rows: json } = await pool.query<{ n: number }>(
      `select count(*)::int as n from ${t.quarantine} where payload_text like '{%' and json_typeof(payload_text::json) = 'object'`,
    );
    expect(json[0]!.n).toBe(6);
    await withClient(pool, (c) => clearWindow(c, t, SOURCE, DAY));
  });

  it('round-trips any text a quarantined record can have (no NUL byte, no raw unpaired surrogate)', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          fc.string({
            unit: fc.oneof(
              fc.constantFrom('"', '\\', '{', '}', ',', 'NULL', ' ', '\n', '\\u0000', '\\ud800'),
              fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }).filter((c) => c !== '\u0000'),
            ),
          }),
          {
            minLength: 1,
            maxLength: 5,
          },
        ),
        async (texts) => {
          await withClient(pool, async (c) => {
            await clearWindow(c, t, SOURCE, NEXT_DAY);
            await insertQuarantined(
              c,
              { t, source: SOURCE, window: NEXT_DAY, runId: 1 },
              texts.map((text) => ({ text, path: '$', reason: 'r', eventTime: null })),
            );
          });
          expect((await quarantined(NEXT_DAY)).map((r) => r.payload_text)).toEqual(texts);
        },
      ),
      { numRuns: 50 },
    );
    await withClient(pool, (c) => clearWindow(c, t, SOURCE, NEXT_DAY));
  });

  it('prepares nothing for no rows', () => {
    expect(prepareInsertQuarantined({ t, source: SOURCE, window: DAY, runId: 1 }, [])).toBeUndefined();
  });
});

describe('a page with a record jsonb cannot store, stored as run.ts is to store it', () => {
  const GOOD = [
    '{"id":12345678901234567891,"timestamp":"2026-10-01T01:00:00Z","amount":1.10}',
    '{"id":3,"timestamp":"2026-10-01T03:00:00Z","note":"\\ud83d\\ude00","huge":1e400}',
  ];
  const BAD = [
    '{"id":2,"timestamp":"2026-10-01T02:00:00Z","customerName":"a\\u0000b"}',
    '{"id":4, "timestamp":"2026-10-01T04:00:00Z", "s":"\\ud800"}',
    `{"id":5,"timestamp":"2026-10-01T05:00:00Z","deep":${'['.repeat(60_000)}${']'.repeat(60_000)}}`,
  ];

  /** Stores a page the way the sync does: its records from page.text at the kept positions, its quarantined ones beside. */
  async function store(pageText: { text: string } | { records: readonly Record<string, unknown>[] }, keep: number[], rows: QuarantineRow[]): Promise<void> {
    await withClient(pool, async (c) => {
      await c.query('begin');
      await clearWindow(c, t, SOURCE, DAY);
      const insert = prepareInsertRecords({ t, source: SOURCE, window: DAY, runId: 9 }, { ...pageText, keep, eventTimes: keep.map(() => null) });
      if (insert) await c.query(insert.text, insert.values);
      const isolate = prepareInsertQuarantined({ t, source: SOURCE, window: DAY, runId: 9 }, rows);
      if (isolate) await c.query(isolate.text, isolate.values);
      await c.query('commit');
    });
  }

  it('stores the other records exactly from page.text and the bad ones whole in the quarantine (page read from E6)', async () => {
    const data = [GOOD[0], BAD[0], BAD[1], GOOD[1], BAD[2]];
    const body = `{"pageNumber":1,"pageSize":5,"totalRecords":5,"totalPages":1,"note":"\\u0000","data":[${data.join(' , ')}]}`;
    const read = decodePage({ headers: { 'content-type': 'application/json' }, body }, 1, url);
    const page = { ...read, ...storablePage(read) };
    expect(page.quarantined?.map((q) => q.index)).toEqual([1, 2, 4]);
    const bad = new Set(page.quarantined!.map((q) => q.index));
    const keep = data.map((_, i) => i).filter((i) => !bad.has(i));
    await store(
      { text: page.text! },
      keep,
      page.quarantined!.map((q) => ({ text: q.text, path: q.path, reason: q.reason, eventTime: null })),
    );

    const { rows } = await pool.query<{ same: boolean }>(
      `select count(*) = 2 and bool_and(r.payload = e.payload) as same
         from (select payload, row_number() over (order by id) as n from ${t.records}) r
         join jsonb_array_elements($1::jsonb) with ordinality as e(payload, n) using (n)`,
      [`[${GOOD.join(',')}]`],
    );
    expect(rows[0]!.same).toBe(true);
    const { rows: ids } = await pool.query<{ id: string }>(`select payload->>'id' as id from ${t.records} order by id`);
    expect(ids.map((r) => r.id)).toEqual(['12345678901234567891', '3']);
    const stored = await quarantined();
    expect(stored.map((r) => r.payload_text)).toEqual(BAD);
    expect(stored.map((r) => r.json_path)).toEqual(['$.customerName', '$.s', expect.stringMatching(/^\$\.deep\[0\]/)]);

    // Re-loading the window replaces its quarantined rows like its records.
    const records = await withClient(pool, (c) => clearWindow(c, t, SOURCE, DAY));
    expect(records).toBe(2);
    expect(await quarantined()).toEqual([]);
  });

  it('judges escapes as jsonb does: an escaped backslash between surrogate halves parts them', async () => {
    // The fourth is a property test's counterexample (test/unit/page-text.test.ts, seed 1203472038).
    const texts = [
      '"\\ud800\\\\\\udc00"',
      '"\\ud800\\\\udc00"',
      '"a\\\\\\udc00"',
      '{"𐀀𐀀𐀀": {\t"\\"\\"\\"\\"": 0,\t"\\ud800\\\\\\udc00":null}}',
      '"\\ud83d\\ude00"',
      '"\\\\ud800"',
      '"\\\\\\\\ud800\\\\udc00"',
    ];
    const body = `{"data":[${texts.join(',')}]}`;
    const flagged = unstorableEscapes(body, dataElementSpans(body)!);
    const refused: boolean[] = [];
    for (const text of texts) {
      refused.push(
        await pool.query('select $1::jsonb', [text]).then(
          () => false,
          (err: { code?: string }) => {
            expect(err.code).toBe('22P02');
            return true;
          },
        ),
      );
    }
    expect(refused).toEqual([true, true, true, true, false, false, false]);
    expect(texts.map((_, i) => flagged.has(i))).toEqual(refused);
  });

  it('stores a page without text from its kept records only (a quarantined one may not even serialise)', async () => {
    let deep: unknown = 1;
    for (let i = 0; i < 100_000; i++) deep = [deep];
    const data = [{ id: 1 }, { id: 2, s: 'a\u0000b' }, { id: 3, deep }, { id: 4, n: Infinity }, { id: 5 }];
    const read = parsePage({ pageNumber: 1, pageSize: 5, totalRecords: 5, totalPages: 1, data }, 1, url);
    const page = { ...read, ...storablePage(read) };
    expect(page.quarantined?.map((q) => q.index)).toEqual([1, 2, 3]);
    await store(
      { records: page.data },
      [0, 4],
      page.quarantined!.map((q) => ({ text: q.text, path: q.path, reason: q.reason, eventTime: null })),
    );
    const { rows } = await pool.query<{ payload: unknown }>(`select payload from ${t.records} order by id`);
    expect(rows.map((r) => r.payload)).toEqual([{ id: 1 }, { id: 5 }]);
    const stored = await quarantined();
    expect(stored.map((r) => r.payload_text)).toEqual([
      JSON.stringify(data[1]),
      `{"id":3,"deep":${'['.repeat(100_000)}1${']'.repeat(100_000)}}`,
      '{"id":4,"n":null}',
    ]);
    await withClient(pool, (c) => clearWindow(c, t, SOURCE, DAY));
  });

  it('clears only the windows inside the range, by window_start, as for records', async () => {
    const row = (n: number): QuarantineRow => ({ text: `{"n":${n}}`, path: '$.s', reason: 'r', eventTime: null });
    await withClient(pool, async (c) => {
      await insertQuarantined(c, { t, source: SOURCE, window: DAY, runId: 1 }, [row(1)]);
      await insertQuarantined(c, { t, source: SOURCE, window: NEXT_DAY, runId: 1 }, [row(2)]);
      expect(await clearWindow(c, t, SOURCE, { start: DAY.start + 1, end: NEXT_DAY.start })).toBe(0);
      expect((await quarantined()).length).toBe(1);
      expect(await clearWindow(c, t, SOURCE, { start: DAY.start, end: NEXT_DAY.start })).toBe(0);
    });
    expect(await quarantined()).toEqual([]);
    expect((await quarantined(NEXT_DAY)).map((r) => r.payload_text)).toEqual(['{"n":2}']);
    await withClient(pool, (c) => clearWindow(c, t, SOURCE, NEXT_DAY));
  });
});
