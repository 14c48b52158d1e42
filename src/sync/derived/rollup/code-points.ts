/** Code point order, PostgreSQL's `collate "C"`, in which the distinct rollups keep their values. */

/** As `collate "C"` orders UTF-8 bytes; `<` on UTF-16 code units puts U+10000 and above before U+E000–U+FFFF. */
export function compareCodePoints(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x === y) continue;
    // Surrogates encode code points above FFFF: after E000–FFFF.
    const rank = (c: number): number => (c >= 0xd800 && c <= 0xdfff ? c + 0x2000 : c >= 0xe000 ? c - 0x800 : c);
    return rank(x) - rank(y);
  }
  return a.length - b.length;
}

/** Where UTF-16 order and code point order may differ. */
const NOT_BMP_ORDERED = /[\uD800-\uFFFF]/;

/** In place; the engine's own order when no value holds a code unit from U+D800 up. */
export function sortCodePoints(values: string[]): string[] {
  for (const v of values) if (NOT_BMP_ORDERED.test(v)) return values.sort(compareCodePoints);
  return values.sort();
}
