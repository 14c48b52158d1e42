/** Code point order of strings, the order of PostgreSQL's `collate "C"`, in which the distinct rollups keep their values. */

/**
 * Orders strings by code point, as PostgreSQL's `collate "C"` orders their UTF-8 bytes (a plain
 * `<` compares UTF-16 code units, which puts U+10000 and above before U+E000–U+FFFF).
 */
export function compareCodePoints(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x === y) continue;
    // Surrogates (D800–DFFF) encode code points above FFFF: they sort after E000–FFFF.
    const rank = (c: number): number => (c >= 0xd800 && c <= 0xdfff ? c + 0x2000 : c >= 0xe000 ? c - 0x800 : c);
    return rank(x) - rank(y);
  }
  return a.length - b.length;
}

/** Code units from which UTF-16 order and code point order may differ (surrogates, then U+E000–U+FFFF). */
const NOT_BMP_ORDERED = /[\uD800-\uFFFF]/;

/**
 * Sorts `values` in place by code point ({@link compareCodePoints}): by the engine's own string
 * order (UTF-16 code units, the same order when no value holds a code unit from U+D800 up),
 * else by {@link compareCodePoints}.
 */
export function sortCodePoints(values: string[]): string[] {
  for (const v of values) if (NOT_BMP_ORDERED.test(v)) return values.sort(compareCodePoints);
  return values.sort();
}
