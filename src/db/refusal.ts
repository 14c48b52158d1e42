/**
 * Which database errors are a row's fault: the one list that decides whether a record the
 * database refuses is quarantined (records_quarantine, with the SQLSTATE and the message) and the
 * rest of its window loaded, or whether the error fails the window as any outage does.
 */

/**
 * SQLSTATE classes (the first two characters) of a refusal of the data itself, the same for a row
 * whatever the session, the load or the time:
 *
 * - `22` data exception: a number numeric cannot hold (22003: `1e200000`, `1e-20000`), text jsonb
 *   refuses (22P02 invalid JSON, 22P05 `\u0000`), a value too long (22001);
 * - `23` integrity constraint violation: a CHECK, NOT NULL, UNIQUE, foreign key or exclusion
 *   constraint someone added to `records` (but see {@link dataRefusal}: a row no partition takes);
 * - `54` program limit exceeded: nesting deeper than the server's stack (54001), a value over a
 *   size limit (54000);
 * - `P0` an error raised by PL/pgSQL, such as a trigger's `RAISE EXCEPTION` refusing a row (P0001).
 *
 * Every other class fails the window as before: a connection lost (08), a transaction rolled back
 * or deadlocked (40), insufficient resources such as a full disk (53), an operator intervention or
 * shutdown (57), a system error (58), a missing table or privilege (42): they are not the record's.
 */
export const DATA_REFUSAL_CLASSES: readonly string[] = ['22', '23', '54', 'P0'];

/** A row refused for a data reason: the database's SQLSTATE and its primary message. */
export interface DataRefusal {
  sqlstate: string;
  message: string;
}

/**
 * Whether `err` (pg's error, or any thrown value) is the database refusing the data it was given,
 * by {@link DATA_REFUSAL_CLASSES}. A row that no partition of a partitioned table takes is refused
 * with 23514 like a CHECK constraint, but names no constraint: that is the store's fault (a
 * partition not created), so it is not a data refusal.
 *
 * @returns the SQLSTATE and pg's primary message (without its detail, which may quote the row);
 *   undefined for any other error.
 */
export function dataRefusal(err: unknown): DataRefusal | undefined {
  if (typeof err !== 'object' || err === null) return undefined;
  const { code, message, constraint } = err as { code?: unknown; message?: unknown; constraint?: unknown };
  if (typeof code !== 'string' || !/^[0-9A-Z]{5}$/.test(code)) return undefined;
  if (!DATA_REFUSAL_CLASSES.includes(code.slice(0, 2))) return undefined;
  if (code === '23514' && constraint === undefined) return undefined;
  return { sqlstate: code, message: typeof message === 'string' ? message : '' };
}
