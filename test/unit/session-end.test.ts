/**
 * A session the database ended (src/db/session-end.ts): named by its SQLSTATE, condition and
 * setting instead of pg's "not queryable", and never taken for an unreachable database but for a
 * shutdown.
 */
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { syncExit } from '../../src/commands/exit.js';
import { sessionEnded } from '../../src/db/session-end.js';
import { databaseError } from '../../src/db/pool.js';
import { SessionEndedError, UpstreamNetworkError } from '../../src/errors.js';
import { classifyFailure, isDatabaseUnavailable } from '../../src/failures.js';

/** pg's error for a server ErrorResponse. */
function pgError(message: string, code: string, severity = 'FATAL'): pg.DatabaseError {
  const err = new pg.DatabaseError(message, message.length, 'error');
  err.code = code;
  err.severity = severity;
  return err;
}

/** What pg throws for a query on a client after its connection error: no code. */
const notQueryable = () => new Error('Client has encountered a connection error and is not queryable');
const idleTimeout = pgError('terminating connection due to idle-in-transaction timeout', '25P03');

describe('sessionEnded', () => {
  it('names the FATAL event behind "not queryable": SQLSTATE, condition and setting', () => {
    const err = sessionEnded(notQueryable(), idleTimeout);
    expect(err).toBeInstanceOf(SessionEndedError);
    expect(err).toMatchObject({
      sqlstate: '25P03',
      condition: 'idle_in_transaction_session_timeout',
      setting: 'idle_in_transaction_session_timeout',
      code: 'ERR_DATABASE',
    });
    expect(err!.message).toBe(
      'the database ended the session: terminating connection due to idle-in-transaction timeout [SQLSTATE 25P03 idle_in_transaction_session_timeout]: ' +
        'a transaction stayed idle longer than idle_in_transaction_session_timeout, a setting of the server, the role or the database',
    );
    expect(err!.cause).toBe(idleTimeout);
    // Not an outage: `sync` reports the run's error, not "unreachable".
    expect(isDatabaseUnavailable(err)).toBe(false);
    expect(classifyFailure(err)).toEqual({ reason: 'database', exitStatus: 1, level: 'error', windowLocal: false });
    expect(syncExit({ result: { status: 'failed', error: err } as never }, false).kind).toBe('failed');
    // Without it, the same failure reads as a lost connection.
    expect(syncExit({ result: { status: 'failed', error: notQueryable() } as never }, false).kind).toBe('failed_database');
  });

  it("takes a statement's own SQLSTATE first: 57014 is statement_timeout, the chain kept", () => {
    const canceled = pgError('canceling statement due to statement timeout', '57014', 'ERROR');
    const ours = databaseError('migrating schema analytics', canceled);
    const err = sessionEnded(ours, idleTimeout);
    expect(err).toMatchObject({ sqlstate: '57014', condition: 'query_canceled', setting: 'statement_timeout' });
    expect(err!.message).toMatch(
      /^the database canceled a statement: canceling statement due to statement timeout \[SQLSTATE 57014 query_canceled\]: .*statement_timeout/,
    );
    expect(err!.cause).toBe(ours);
    expect(isDatabaseUnavailable(err)).toBe(false);
  });

  it('names an administrator or a shutdown without a setting; a shutdown stays an outage', () => {
    const err = sessionEnded(notQueryable(), pgError('terminating connection due to administrator command', '57P01'));
    expect(err).toMatchObject({ sqlstate: '57P01', condition: 'admin_shutdown', setting: undefined });
    expect(err!.message).toContain(
      '[SQLSTATE 57P01 admin_shutdown]: the server is shutting down, or an administrator ended the session (pg_terminate_backend)',
    );
    expect(isDatabaseUnavailable(err)).toBe(true);
  });

  it('leaves every other failure as it is', () => {
    const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
    // A code of its own: its own failure, whatever the event said.
    expect(sessionEnded(refused, idleTimeout)).toBeUndefined();
    expect(sessionEnded(pgError('syntax error', '42601', 'ERROR'), idleTimeout)).toBeUndefined();
    // E6 failed first: the session's end is not why the window failed.
    expect(sessionEnded(new UpstreamNetworkError('analytics', 'socket hang up'), idleTimeout)).toBeUndefined();
    // No event, or one that is no ending.
    expect(sessionEnded(notQueryable(), undefined)).toBeUndefined();
    expect(sessionEnded(notQueryable(), Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' }))).toBeUndefined();
    // Named once.
    const named = sessionEnded(notQueryable(), idleTimeout)!;
    expect(sessionEnded(named, idleTimeout)).toBeUndefined();
  });
});
