/**
 * The simulator's own errors. It shares no module with the exporter: an argument error here is
 * this package's class, with the same stable code the exporter gives its own.
 */

/** A caller passed an option or argument that breaks its rule (dataset, fault or order options; E6 query parameters). */
export class InvalidArgumentError extends Error {
  /** Stable, safe to match on and to log. */
  readonly code = 'ERR_INVALID_ARGUMENT';

  constructor(message: string) {
    super(message);
    this.name = 'InvalidArgumentError';
  }
}

/**
 * One line for a person: the message of `err` and of each `cause` below it (at most five), joined
 * with `←`, each followed by its code when the message does not already name it (`EADDRINUSE`).
 */
export function describeError(err: unknown): string {
  const parts: string[] = [];
  let current: unknown = err;
  for (let depth = 0; current !== undefined && current !== null && depth < 5; depth++) {
    const e = current instanceof Error ? current : new Error(typeof current === 'string' ? current : JSON.stringify(current));
    const code = (e as { code?: unknown }).code;
    const text = e.message || e.name;
    parts.push(typeof code === 'string' && !text.includes(code) ? `${text} (${code})` : text);
    current = (e as { cause?: unknown }).cause;
  }
  return parts.join(' ← ');
}
