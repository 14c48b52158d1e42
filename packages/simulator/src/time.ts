/**
 * Durations and date-times as the simulator reads them: its flags (`--latency 250ms`), E6/E7's
 * `startDate` and `toDate`, and record timestamps.
 *
 * - duration: Prometheus style, `500ms`, `30s`, `15m`, `1h30m`, `7d`, `1w`; units from largest to
 *   smallest, each at most once; `0` (with or without a unit) for none.
 * - date-time: ISO 8601 / RFC 3339 with a zone (`Z` or `±HH:MM`), as the reference's examples
 *   write E6/E7's `startDate` and `toDate`; impossible dates (February 30) are refused, never
 *   rolled over.
 */

const DURATION_UNITS_MS: Record<string, number> = {
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
  d: 86_400_000,
  w: 604_800_000,
};

/**
 * Parses a Prometheus-style duration (`500ms`, `1h30m`), or `0` / `0s` for none, into milliseconds.
 *
 * @returns milliseconds (0 for zero), or `undefined` when the text is not a duration.
 */
export function parseDurationOrZero(text: string): number | undefined {
  if (/^0+(ms|s|m|h|d|w)?$/.test(text)) return 0;
  if (!/^(\d+(ms|s|m|h|d|w))+$/.test(text)) return undefined;
  let total = 0;
  let lastUnitMs = Infinity;
  for (const [, amount, unit] of text.matchAll(/(\d+)(ms|s|m|h|d|w)/g)) {
    const unitMs = DURATION_UNITS_MS[unit!]!;
    if (unitMs >= lastUnitMs) return undefined;
    lastUnitMs = unitMs;
    total += Number(amount) * unitMs;
  }
  return total;
}

const ISO_DATE_TIME = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?([Zz]|[+-]\d{2}:?\d{2})$/;

/**
 * Parses an ISO 8601 / RFC 3339 date-time with a zone (`Z` or `±HH:MM`), the form of E6/E7's
 * `startDate` and `toDate` and of record timestamps. Fractions beyond milliseconds are cut.
 *
 * @returns milliseconds since the epoch, or `undefined` for anything else (a date without a
 *   time, no zone, or impossible fields such as February 30).
 */
export function parseIsoDateTime(text: string): number | undefined {
  const m = ISO_DATE_TIME.exec(text);
  if (m === null) return undefined;
  const [, ys, mos, ds, hs, mis, ss, fs, zone] = m;
  const year = Number(ys);
  const month = Number(mos);
  const day = Number(ds);
  const hour = Number(hs);
  const minute = Number(mis);
  const second = ss === undefined ? 0 : Number(ss);
  const millis = fs === undefined ? 0 : Number(fs.slice(0, 3).padEnd(3, '0'));
  if (month < 1 || month > 12 || day < 1 || hour > 23 || minute > 59 || second > 59) return undefined;
  const date = new Date(0);
  date.setUTCFullYear(year, month - 1, day);
  if (date.getUTCMonth() !== month - 1) return undefined; // day overflowed into the next month
  date.setUTCHours(hour, minute, second, millis);
  let offsetMinutes = 0;
  if (zone !== undefined && zone !== 'Z' && zone !== 'z') {
    const digits = zone.slice(1).replace(':', '');
    const oh = Number(digits.slice(0, 2));
    const om = Number(digits.slice(2));
    if (oh > 23 || om > 59) return undefined;
    offsetMinutes = (zone.startsWith('-') ? -1 : 1) * (oh * 60 + om);
  }
  return date.getTime() - offsetMinutes * 60_000;
}
