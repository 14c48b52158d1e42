/**
 * The exit status of each command that judges results (src/commands/exit.ts), as tables: what a
 * source's run or audit came to (or what was thrown), whether the command received a signal, and
 * the status and kind of ending that follow. The README's exit statuses are these rows.
 */
import { describe, expect, it } from 'vitest';
import { AbortedError, ConfigError, DataDirLockedError, DatabaseError, InvalidArgumentError, UpstreamHttpError } from '../../src/errors.js';
import { checkExitStatus, stateExitStatus, syncErrorExit, syncExit, verifyExit, worstExitStatus } from '../../src/commands/exit.js';
import type { SyncResult } from '../../src/sync/run/run.js';
import type { AuditResult } from '../../src/sync/audit/source.js';

/** A finished run of `status`, with `extra` fields. */
function ran(status: 'succeeded' | 'failed' | 'interrupted', extra: Partial<Exclude<SyncResult, { status: 'locked' }>> = {}): SyncResult {
  return {
    status,
    runId: 1,
    range: { start: 0, end: 3_600_000 },
    windowsPlanned: 1,
    windows: 1,
    pages: 1,
    records: 10,
    quarantined: 0,
    watermark: 3_600_000,
    durationSeconds: 1,
    ...extra,
  };
}

/** The errors a command meets, one per row of src/failures.ts that matters here. */
const lostConnection = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
const upstream = new UpstreamHttpError('analytics', 503, 'E6: HTTP 503');
const usage = new InvalidArgumentError('--from 2026-11-01T00:00:00.000Z must be before the end of the range');
const config = new ConfigError('DATABASE_URL', 'DATABASE_URL must be a URL');
const aborted = new AbortedError();
const locked = new DataDirLockedError('/data', undefined);
const queryFailed = new DatabaseError('relation does not exist');

describe('sync: one source', () => {
  it.each([
    ['succeeded', ran('succeeded'), false, 0, 'succeeded'],
    ['succeeded, after a signal', ran('succeeded'), true, 0, 'succeeded'],
    ['another run holds the lock', { status: 'locked' } as const, false, 0, 'locked'],
    ['succeeded but parked a window', ran('succeeded', { parked: 2 }), false, 1, 'parked'],
    ['succeeded with windows parked by earlier runs', ran('succeeded', { parkedWindows: 1 }), false, 1, 'still_parked'],
    ['parked now and before: this run says so', ran('succeeded', { parked: 1, parkedWindows: 3 }), false, 1, 'parked'],
    ['succeeded, no window parked (0)', ran('succeeded', { parked: 0, parkedWindows: 0 }), false, 0, 'succeeded'],
    ['interrupted by the signal the command received', ran('interrupted'), true, 0, 'interrupted'],
    ['interrupted by anything else', ran('interrupted'), false, 1, 'interrupted'],
    ['failed', ran('failed', { error: upstream }), false, 1, 'failed'],
    ['failed, after a signal', ran('failed', { error: upstream }), true, 1, 'failed'],
    ['failed with its database connection lost', ran('failed', { error: lostConnection }), false, 1, 'failed_database'],
    ['failed, a query error', ran('failed', { error: queryFailed }), false, 1, 'failed'],
  ])('%s', (_name, result, signalled, status, kind) => {
    expect(syncExit({ result }, signalled)).toEqual({ status, kind });
  });

  it.each([
    ['a bad --from/--to', usage, false, 2, 'usage'],
    ['a signal while waiting for the lock or the database', aborted, true, 0, 'stopped_before_start'],
    ['an abort no signal asked for', aborted, false, 1, 'error'],
    ['the database unreachable', lostConnection, false, 1, 'database_unavailable'],
    ['the database unreachable, after a signal', lostConnection, true, 1, 'database_unavailable'],
    ['DATA_DIR held by another process', locked, false, 1, 'error'],
    ['a bad configuration', config, false, 2, 'error'],
    ['an upstream failure', upstream, false, 1, 'error'],
    ['something not an error', 'boom', false, 1, 'error'],
  ])('thrown: %s', (_name, error, signalled, status, kind) => {
    expect(syncErrorExit(error, signalled)).toEqual({ status, kind });
    // A source's outcome without a result is judged by what was thrown.
    expect(syncExit({ error: error as Error }, signalled)).toEqual({ status, kind });
  });
});

describe('verify: one source', () => {
  const audit = (left: number): AuditResult => ({
    windows: 4,
    drifted: [],
    left: Array.from({ length: left }, () => ({ start: 0, end: 3_600_000, stored: 10, upstream: 12 })),
    requests: 4,
    verifiedThrough: undefined,
    repairs: [],
  });

  it.each([
    ['no difference left', { result: audit(0) }, false, 0, 'clean'],
    ['no difference left, after a signal', { result: audit(0) }, true, 0, 'clean'],
    ['a difference left', { result: audit(2) }, false, 1, 'differences_left'],
    ['stopped by the signal the command received', { error: aborted }, true, 1, 'stopped'],
    ['an abort no signal asked for', { error: aborted }, false, 1, 'error'],
    ['E6 failed', { error: upstream }, false, 1, 'error'],
    ['the database unreachable', { error: lostConnection }, false, 1, 'error'],
    ['a bad --source', { error: usage }, false, 2, 'error'],
  ])('%s', (_name, outcome, signalled, status, kind) => {
    expect(verifyExit(outcome, signalled)).toEqual({ status, kind });
  });
});

describe('state: a subcommand whose work ran', () => {
  it.each([
    ['done', { locked: false, value: 'anything' } as const, 0],
    ["another process holds the source's lock", { locked: true, source: 'production' } as const, 1],
    ['the work refused its arguments', 'usage' as const, 2],
  ])('%s', (_name, done, status) => {
    expect(stateExitStatus(done)).toBe(status);
  });
});

describe('check', () => {
  it.each([
    ['every step passed', { passed: true }, 0],
    ['a step failed', { passed: false }, 1],
    ['a bad configuration', { configuration: 'bad' } as const, 2],
  ])('%s', (_name, check, status) => {
    expect(checkExitStatus(check)).toBe(status);
  });
});

describe('several sources: the worst status', () => {
  it.each([
    [[], 0],
    [[0, 0], 0],
    [[0, 1], 1],
    [[1, 0, 2], 2],
    [[2, 0], 2],
  ] as const)('%j gives %i', (statuses, status) => {
    expect(worstExitStatus(statuses)).toBe(status);
  });
});
