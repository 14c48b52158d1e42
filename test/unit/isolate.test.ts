/**
 * Isolating refused rows (src/sync/store/pg/isolate.ts) against a fake database that refuses some rows
 * whole batches at a time, and the list of data refusals (src/db/refusal.ts).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DATA_REFUSAL_CLASSES, dataRefusal } from '../../src/db/refusal.js';
import { isolateRefused } from '../../src/sync/store/pg/isolate.js';

/** pg's error shape for a refused row: the SQLSTATE in `code`, COPY's line in `where`. */
function refusedError(code: string, line?: number): Error {
  return Object.assign(new Error(`refused ${code}`), {
    code,
    ...(code === '23514' ? { constraint: 'records_check' } : {}),
    ...(line === undefined ? {} : { where: `COPY records, line ${line}` }),
  });
}

/** A fake table: an attempt fails whole when one of its rows is bad, naming the first bad line when `lines`. */
function fakeTable(bad: ReadonlySet<number>, lines: boolean) {
  const stored: number[] = [];
  let attempts = 0;
  return {
    stored,
    get attempts() {
      return attempts;
    },
    attempt: async (rows: readonly number[]) => {
      attempts++;
      const at = rows.findIndex((r) => bad.has(r));
      if (at !== -1) throw refusedError(rows[at]! % 2 ? '22003' : '23514', lines ? at + 1 : undefined);
      stored.push(...rows);
    },
  };
}

const position = (err: unknown, rows: number) => {
  const m = /line (\d+)/.exec(String((err as { where?: string }).where));
  return m && Number(m[1]) <= rows ? Number(m[1]) - 1 : undefined;
};

describe('isolateRefused', () => {
  it('stores every row but the refused ones, in order, each refused row with its refusal, with or without a line named', async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 1, max: 300 }), fc.uniqueArray(fc.nat(299), { maxLength: 12 }), fc.boolean(), async (n, badList, lines) => {
        const rows = Array.from({ length: n }, (_, i) => i);
        const bad = new Set(badList.filter((b) => b < n));
        if (bad.size === 0) return;
        const table = fakeTable(bad, lines);
        const firstBad = rows.findIndex((r) => bad.has(r));
        const first = refusedError(firstBad % 2 ? '22003' : '23514', lines ? firstBad + 1 : undefined);
        const result = await isolateRefused(rows, first, { attempt: table.attempt, ...(lines ? { position } : {}) });
        expect(table.stored).toEqual(rows.filter((r) => !bad.has(r)));
        expect(result.stored).toBe(n - bad.size);
        expect(result.refused.map((r) => r.row)).toEqual(rows.filter((r) => bad.has(r)));
        expect(result.refused.every((r) => r.refusal.sqlstate === (r.row % 2 ? '22003' : '23514'))).toBe(true);
        expect(result.attempts).toBe(table.attempts);
        // Halving costs about 2·k·log2(n) statements; the line named, about 3 per refused row.
        const bound = lines ? 3 * bad.size + 1 : 2 * bad.size * Math.ceil(Math.log2(n) + 1) + 1;
        expect(result.attempts).toBeLessThanOrEqual(bound);
      }),
      { numRuns: 200 },
    );
  });

  it('throws an error that is no data refusal, first or in an attempt', async () => {
    const lost = Object.assign(new Error('Connection terminated unexpectedly'), {});
    await expect(isolateRefused([1, 2], lost, { attempt: async () => undefined })).rejects.toBe(lost);
    const cancelled = refusedError('57014');
    await expect(
      isolateRefused([1, 2, 3, 4], refusedError('22003'), {
        attempt: async () => {
          throw cancelled;
        },
      }),
    ).rejects.toBe(cancelled);
  });
});

describe('dataRefusal', () => {
  it('takes the classes documented, with the SQLSTATE and the primary message, and nothing else', () => {
    expect(DATA_REFUSAL_CLASSES).toEqual(['22', '23', '54', 'P0']);
    for (const code of ['22003', '22P02', '22P05', '23502', '23505', '54001', '54000', 'P0001']) {
      expect(dataRefusal(Object.assign(new Error('m'), { code, constraint: 'c' }))).toEqual({ sqlstate: code, message: 'm' });
    }
    for (const code of ['08006', '40001', '40P01', '53100', '57014', '57P01', '58030', '42P01', '25P02', 'XX000', 'ERR_DATABASE', undefined]) {
      expect(dataRefusal(Object.assign(new Error('m'), { code }))).toBeUndefined();
    }
    expect(dataRefusal('22003')).toBeUndefined();
    expect(dataRefusal(null)).toBeUndefined();
  });

  it('is a CHECK constraint refusing a row, but not a row no partition takes (the store did not create it)', () => {
    expect(
      dataRefusal(Object.assign(new Error('new row for relation "records_x" violates check constraint "small"'), { code: '23514', constraint: 'small' })),
    ).toEqual({
      sqlstate: '23514',
      message: 'new row for relation "records_x" violates check constraint "small"',
    });
    expect(dataRefusal(Object.assign(new Error('no partition of relation "records" found for row'), { code: '23514' }))).toBeUndefined();
  });
});
