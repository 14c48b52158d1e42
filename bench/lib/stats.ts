/** Medians and number formatting for the report. */

/** Median of a non-empty list (the mean of the middle two for an even count). */
export function median(values: readonly number[]): number {
  if (values.length === 0) throw new RangeError('median of no values');
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** Median of the values that are defined, or undefined when none is. */
export function medianOf(values: readonly (number | undefined)[]): number | undefined {
  const known = values.filter((v): v is number => v !== undefined);
  return known.length === 0 ? undefined : median(known);
}

/** `1234567` → `1,234,567`. */
export function int(n: number): string {
  return Math.round(n).toLocaleString('en-US');
}

export function fixed(n: number | undefined, digits: number): string {
  return n === undefined ? 'n/a' : n.toFixed(digits);
}

export function mib(bytes: number): string {
  return `${(bytes / 2 ** 20).toFixed(1)} MiB`;
}

/** Spread of a sample as `min–max`, to show how noisy a median is. */
export function range(values: readonly number[], digits: number): string {
  return `${Math.min(...values).toFixed(digits)}–${Math.max(...values).toFixed(digits)}`;
}

export function verdict(met: boolean): string {
  return met ? 'met' : '**missed**';
}
