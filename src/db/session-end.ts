/**
 * A session the database ended, named: the SQLSTATE PostgreSQL sent (as the FATAL pg delivers as
 * the client's 'error' event, or as a statement's error), its condition and the setting that
 * caused it, instead of pg's "not queryable" that reads as a lost server. See docs/runbook.md.
 */
import { ExporterError, DatabaseError, SessionEndedError } from '../errors.js';

/** By SQLSTATE: the condition name, the server setting behind it (if one), and what happened. */
const ENDINGS: ReadonlyMap<string, { condition: string; setting?: string; why: string }> = new Map([
  ['25P03', { condition: 'idle_in_transaction_session_timeout', setting: 'idle_in_transaction_session_timeout', why: 'a transaction stayed idle longer than' }],
  ['25P04', { condition: 'transaction_timeout', setting: 'transaction_timeout', why: 'a transaction lasted longer than' }],
  ['57P05', { condition: 'idle_session_timeout', setting: 'idle_session_timeout', why: 'the session stayed idle longer than' }],
  ['57014', { condition: 'query_canceled', setting: 'statement_timeout', why: 'a cancel request (pg_cancel_backend), or a statement ran longer than' }],
  ['57P01', { condition: 'admin_shutdown', why: 'the server is shutting down, or an administrator ended the session (pg_terminate_backend)' }],
  ['57P02', { condition: 'crash_shutdown', why: 'another server process crashed and the server restarted' }],
  ['57P04', { condition: 'database_dropped', why: 'the database was dropped' }],
]);

/** The first error in `err`'s cause chain with a `code` (a SQLSTATE, an errno) other than ours (`ERR_…`). */
function coded(err: unknown): (Error & { code: string }) | undefined {
  let current: unknown = err;
  for (let depth = 0; current instanceof Error && depth < 5; depth++) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === 'string' && !code.startsWith('ERR_')) return current as Error & { code: string };
    current = current.cause;
  }
  return undefined;
}

/**
 * What to throw for `thrown`, a failure on a connection whose first 'error' event was `event`:
 * a {@link SessionEndedError} when `thrown`'s SQLSTATE, or without one the event's, is an ending of
 * {@link ENDINGS}; else undefined (`thrown` stands, as does an error of ours but a database one).
 */
export function sessionEnded(thrown: unknown, event: Error | undefined): SessionEndedError | undefined {
  if (thrown instanceof SessionEndedError) return undefined;
  if (thrown instanceof ExporterError && !(thrown instanceof DatabaseError)) return undefined;
  // pg's "not queryable" after the event carries no code; a code of its own is its own failure.
  const own = coded(thrown);
  const found = own ?? coded(event);
  if (found === undefined || !ENDINGS.has(found.code)) return undefined;
  const { condition, setting, why } = ENDINGS.get(found.code)!;
  const lead = found.code === '57014' ? 'the database canceled a statement' : 'the database ended the session';
  const cause = setting === undefined ? why : `${why} ${setting}, a setting of the server, the role or the database`;
  return new SessionEndedError(found.code, condition, setting, `${lead}: ${found.message} [SQLSTATE ${found.code} ${condition}]: ${cause}`, {
    cause: own === undefined ? found : thrown,
  });
}
