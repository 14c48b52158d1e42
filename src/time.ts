/**
 * Durations and date-times: the one place their text is read and written. Durations are
 * Prometheus style (`1h30m`, units largest first, each once); date-times are ISO 8601 with a zone,
 * as the reference writes E6/E7's dates, impossible dates refused, never rolled over.
 */

const DURATION_UNITS_MS: Record<string, number> = {
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
  d: 86_400_000,
  w: 604_800_000,
};

/** `500ms`, `30s`, `15m`, `1h30m`, `7d`, `1w` in milliseconds; undefined when not a duration. */
export function parseDuration(text: string): number | undefined {
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

/** {@link parseDuration}, and `0` with or without a unit. */
export function parseDurationOrZero(text: string): number | undefined {
  return /^0+(ms|s|m|h|d|w)?$/.test(text) ? 0 : parseDuration(text);
}

/** `86400000` → `24h`, `5400000` → `1h30m`. */
export function formatDuration(ms: number): string {
  let rest = Math.floor(ms / 1000);
  let text = '';
  for (const [unit, size] of [
    ['h', 3600],
    ['m', 60],
    ['s', 1],
  ] as const) {
    if (rest >= size) {
      text += `${Math.floor(rest / size)}${unit}`;
      rest %= size;
    }
  }
  return text || `${ms}ms`;
}

const ISO_DATE_TIME = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?([Zz]|[+-]\d{2}:?\d{2})$/;

/** ISO 8601 / RFC 3339 with a zone, as epoch ms (sub-ms cut); undefined without time or zone, or for February 30. */
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
  if (date.getUTCMonth() !== month - 1) return undefined;
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

/** {@link parseIsoDateTime} as a Date. */
export function parseIsoDate(text: string): Date | undefined {
  const ms = parseIsoDateTime(text);
  return ms === undefined ? undefined : new Date(ms);
}

const EVENT_TIME_PREFIX = /^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}/;
const ZONE_SUFFIX = /(Z|[+-]\d{2}:?\d{2})$/i;

/**
 * A record's event time (RECORD_TIME_FIELD), more leniently than {@link parseIsoDateTime} (the
 * record schema is not published): a space for `T`, no zone read as UTC. Hot: once per record.
 */
export function parseEventTime(text: string): number | undefined {
  const fast = parseUtcTimestamp(text);
  if (fast !== undefined) return fast;
  if (!EVENT_TIME_PREFIX.test(text)) return undefined;
  const ms = Date.parse(ZONE_SUFFIX.test(text) ? text : `${text.replace(' ', 'T')}Z`);
  return Number.isNaN(ms) ? undefined : ms;
}

const CHAR_0 = 0x30;

/** NaN when either is not a digit. */
function twoDigits(text: string, i: number): number {
  const a = text.charCodeAt(i) - CHAR_0;
  const b = text.charCodeAt(i + 1) - CHAR_0;
  return a >= 0 && a <= 9 && b >= 0 && b <= 9 ? a * 10 + b : Number.NaN;
}

/**
 * `YYYY-MM-DDTHH:MM:SS[.sss]Z` from its digits, as Date.parse reads it; anything else, or a field
 * out of its usual range, is undefined, for the general path.
 */
function parseUtcTimestamp(text: string): number | undefined {
  const length = text.length;
  if (length !== 20 && length !== 24) return undefined;
  if (text.charCodeAt(4) !== 0x2d || text.charCodeAt(7) !== 0x2d || text.charCodeAt(10) !== 0x54 || text.charCodeAt(13) !== 0x3a) return undefined;
  if (text.charCodeAt(16) !== 0x3a || text.charCodeAt(length - 1) !== 0x5a) return undefined;
  let millis = 0;
  if (length === 24) {
    if (text.charCodeAt(19) !== 0x2e) return undefined;
    const hundreds = text.charCodeAt(20) - CHAR_0;
    const rest = twoDigits(text, 21);
    if (!(hundreds >= 0 && hundreds <= 9)) return undefined;
    millis = hundreds * 100 + rest;
  }
  const year = twoDigits(text, 0) * 100 + twoDigits(text, 2);
  const month = twoDigits(text, 5);
  const day = twoDigits(text, 8);
  const hour = twoDigits(text, 11);
  const minute = twoDigits(text, 14);
  const second = twoDigits(text, 17);
  // NaN fails every comparison, so a non-digit anywhere takes the general path.
  if (!(year >= 100 && month >= 1 && month <= 12 && day >= 1 && day <= 31 && hour <= 23 && minute <= 59 && second <= 59 && millis >= 0)) return undefined;
  return Date.UTC(year, month - 1, day, hour, minute, second, millis);
}

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
const IMF_FIXDATE = /^(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun), (\d{2}) ([A-Z][a-z]{2}) (\d{4}) (\d{2}):(\d{2}):(\d{2}) GMT$/;

/** An HTTP `Date` header's IMF-fixdate (RFC 9110 5.6.7, `Sun, 06 Nov 1994 08:49:37 GMT`) as epoch ms; undefined otherwise. */
export function parseHttpDate(text: string): number | undefined {
  const m = IMF_FIXDATE.exec(text.trim());
  if (m === null) return undefined;
  const month = MONTHS.indexOf(m[2]!);
  const [day, year, hour, minute, second] = [m[1], m[3], m[4], m[5], m[6]].map(Number) as [number, number, number, number, number];
  if (month < 0 || day < 1 || hour > 23 || minute > 59 || second > 60) return undefined;
  const ms = Date.UTC(year, month, day, hour, minute, Math.min(second, 59));
  return new Date(ms).getUTCDate() === day ? ms : undefined;
}
