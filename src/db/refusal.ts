/**
 * Which database errors are a row's fault: the one list that decides whether a refused record is
 * quarantined (records_quarantine) and the rest of its window loaded, or the window fails.
 */

/**
 * SQLSTATE classes of a refusal of the data itself, the same whatever the session or time: `22`
 * data exception (numeric range, invalid JSON, `\u0000`), `23` a constraint someone added, `54`
 * program limit (nesting, size), `P0` a PL/pgSQL `RAISE`. Others (08, 40, 42, 53, 57, 58) are not
 * the record's fault.
 */
export const DATA_REFUSAL_CLASSES: readonly string[] = ['22', '23', '54', 'P0'];

export interface DataRefusal {
  sqlstate: string;
  message: string;
}

/**
 * The SQLSTATE and primary message (not the detail: it may quote the row) when `err` refuses the data; a
 * 23514 without a constraint is a row no partition takes, the store's fault. Else undefined.
 */
export function dataRefusal(err: unknown): DataRefusal | undefined {
  if (typeof err !== 'object' || err === null) return undefined;
  const { code, message, constraint } = err as { code?: unknown; message?: unknown; constraint?: unknown };
  if (typeof code !== 'string' || !/^[0-9A-Z]{5}$/.test(code)) return undefined;
  if (!DATA_REFUSAL_CLASSES.includes(code.slice(0, 2))) return undefined;
  if (code === '23514' && constraint === undefined) return undefined;
  return { sqlstate: code, message: typeof message === 'string' ? message : '' };
}
