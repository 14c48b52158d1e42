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

/**
 * The pages a data set needs: Σ over windows of max(1, ceil(records in the window ÷ pageSize)),
 * what exact offset paging needs and the least any reader of one page per request needs (an
 * empty window still takes one request).
 *
 * @throws RangeError when pageSize is not a positive integer or a count is negative.
 */
export function pagesNeeded(recordsPerWindow: readonly number[], pageSize: number): number {
  if (!Number.isInteger(pageSize) || pageSize < 1) throw new RangeError(`pageSize must be a positive integer, not ${pageSize}`);
  return recordsPerWindow.reduce((n, records) => {
    if (!(records >= 0)) throw new RangeError(`a window cannot hold ${records} records`);
    return n + Math.max(1, Math.ceil(records / pageSize));
  }, 0);
}
