/**
 * JSON in one canonical form, for comparing stored payloads with the simulator's records. Free of
 * vitest, so the soak (soak/verify.ts) can use it too.
 */

/** JSON with object keys sorted at every level: jsonb re-orders keys, so both sides are compared in this form. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const keys = Object.keys(value).sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`).join(',')}}`;
  }
  return JSON.stringify(value);
}
