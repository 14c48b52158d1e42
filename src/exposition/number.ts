/** Numbers of the text format: floats as Go's `strconv.ParseFloat` reads them, timestamps as promlex does. */
import { DOT, MINUS, PLUS, UNDERSCORE, isDigit } from './lexical.js';

/**
 * Go's `strconv.ParseFloat(s, 64)`, what Prometheus reads values, `le` and `quantile` with:
 * decimal, hex with a binary exponent (`0x1.8p3`), `1_000`, `NaN`, `[+-]Inf`, `[+-]Infinity`.
 *
 * @returns undefined where Go errs: bad syntax, or a finite literal rounding to ±Inf (`ErrRange`).
 */
export function parseGoFloat(s: string): number | undefined {
  const n = s.length;
  if (n === 0) return undefined;
  let i = 0;
  let negative = false;
  const first = s.charCodeAt(0);
  if (first === PLUS || first === MINUS) {
    negative = first === MINUS;
    i = 1;
  }
  const rest = n - i;
  if (rest === 3 || rest === 8) {
    const word = s.slice(i).toLowerCase();
    if (word === 'inf' || word === 'infinity') return negative ? -Infinity : Infinity;
    // Go's special() accepts a sign only before Inf, not before NaN.
    if (word === 'nan') return i === 0 ? NaN : undefined;
  }
  if (rest > 2 && s.charCodeAt(i) === 48 && (s.charCodeAt(i + 1) | 0x20) === 0x78) return parseHexFloat(s, i + 2, negative);

  let sawDigits = false;
  let sawDot = false;
  for (; i < n; i++) {
    const c = s.charCodeAt(i);
    if (isDigit(c)) sawDigits = true;
    else if (c === DOT && !sawDot) sawDot = true;
    else if (c !== UNDERSCORE) break;
  }
  if (!sawDigits) return undefined;
  if (i < n && (s.charCodeAt(i) | 0x20) === 0x65) {
    i = skipExponent(s, i + 1);
    if (i < 0) return undefined;
  }
  if (i !== n) return undefined;
  const underscores = s.includes('_');
  if (underscores && !underscoreOK(s)) return undefined;
  const value = Number(underscores ? s.replaceAll('_', '') : s);
  // Infinite here is an overflow: Go's ErrRange.
  return Number.isFinite(value) ? value : undefined;
}

/** The index after `[+-]?[0-9][0-9_]*` from `i`, or -1 without a digit. */
function skipExponent(s: string, i: number): number {
  const n = s.length;
  if (i < n && (s.charCodeAt(i) === PLUS || s.charCodeAt(i) === MINUS)) i++;
  if (i >= n || !isDigit(s.charCodeAt(i))) return -1;
  while (i < n && (isDigit(s.charCodeAt(i)) || s.charCodeAt(i) === UNDERSCORE)) i++;
  return i;
}

/** Go's `underscoreOK`: underscores only between digits (a base prefix counts as a digit). */
function underscoreOK(s: string): boolean {
  let i = 0;
  if (s.charCodeAt(0) === PLUS || s.charCodeAt(0) === MINUS) i = 1;
  let saw = '^';
  let hex = false;
  if (s.length - i >= 2 && s.charCodeAt(i) === 48) {
    const p = s.charCodeAt(i + 1) | 0x20;
    if (p === 0x62 || p === 0x6f || p === 0x78) {
      i += 2;
      saw = '0';
      hex = p === 0x78;
    }
  }
  for (; i < s.length; i++) {
    const c = s.charCodeAt(i);
    const lower = c | 0x20;
    if (isDigit(c) || (hex && lower >= 0x61 && lower <= 0x66)) {
      saw = '0';
      continue;
    }
    if (c === UNDERSCORE) {
      if (saw !== '0') return false;
      saw = '_';
      continue;
    }
    if (saw === '_') return false;
    saw = '!';
  }
  return saw !== '_';
}

function isHexDigit(c: number): boolean {
  const lower = c | 0x20;
  return isDigit(c) || (lower >= 0x61 && lower <= 0x66);
}

/** Go's hex float: mantissa with one optional dot, then a required `p` exponent. */
function parseHexFloat(s: string, start: number, negative: boolean): number | undefined {
  const n = s.length;
  let fractionDigits = 0;
  let sawDot = false;
  let sawDigits = false;
  let i = start;
  for (; i < n; i++) {
    const c = s.charCodeAt(i);
    if (isHexDigit(c)) {
      sawDigits = true;
      if (sawDot) fractionDigits++;
    } else if (c === UNDERSCORE) {
      // checked by underscoreOK below
    } else if (c === DOT && !sawDot) {
      sawDot = true;
    } else {
      break;
    }
  }
  if (!sawDigits || i >= n || (s.charCodeAt(i) | 0x20) !== 0x70) return undefined;
  const digits = s.slice(start, i).replace(/[._]/g, '').replace(/^0+/, '');
  const expStart = i + 1;
  i = skipExponent(s, expStart);
  if (i !== n) return undefined;
  if (s.includes('_') && !underscoreOK(s)) return undefined;
  // Like Go, stop growing the exponent at 10000: beyond it the result is 0 or out of range anyway.
  let exponent = 0;
  let k = expStart;
  const expSign = s.charCodeAt(k) === MINUS ? -1 : 1;
  if (s.charCodeAt(k) === PLUS || s.charCodeAt(k) === MINUS) k++;
  for (; k < n; k++) {
    const c = s.charCodeAt(k);
    if (isDigit(c) && exponent < 10_000) exponent = exponent * 10 + (c - 48);
  }
  const value = scaleBinary(digits, expSign * exponent - 4 * fractionDigits);
  if (value === undefined) return undefined;
  return negative ? -value : value;
}

/** The float64 nearest `0x<digits> × 2^exponent`, rounded once (ties to even); undefined on overflow. */
function scaleBinary(digits: string, exponent: number): number | undefined {
  if (digits.length === 0) return 0;
  const bits = (digits.length - 1) * 4 + (32 - Math.clz32(parseInt(digits[0]!, 16)));
  const top = bits - 1 + exponent; // exponent of the leading bit
  if (top > 1023) return undefined;
  const keep = top >= -1022 ? 53 : 53 - (-1022 - top);
  let mantissa = BigInt(`0x${digits}`);
  let scale = exponent;
  const drop = bits - keep;
  if (drop > 0) {
    const shift = BigInt(drop);
    let kept = mantissa >> shift;
    const remainder = mantissa - (kept << shift);
    const half = 1n << (shift - 1n);
    if (remainder > half || (remainder === half && (kept & 1n) === 1n)) kept += 1n;
    mantissa = kept;
    scale += drop;
  }
  // Exact from here on: powers of two on a 53-bit mantissa, no second rounding.
  let value = Number(mantissa);
  while (scale > 1023) {
    value *= 2 ** 1023;
    scale -= 1023;
  }
  while (scale < -1022) {
    value *= 2 ** -1022;
    scale += 1022;
  }
  value *= 2 ** scale;
  return Number.isFinite(value) ? value : undefined;
}

/** Milliseconds: digits only (promlex fails a scrape on a sign), at most 2^53 − 1. */
export function parseTimestamp(s: string): number | undefined {
  for (let i = 0; i < s.length; i++) if (!isDigit(s.charCodeAt(i))) return undefined;
  const value = Number(s);
  return s.length > 0 && Number.isSafeInteger(value) ? value : undefined;
}

/** `text[start, end)` as 1 to 15 digits (exact), without making a string; else undefined. */
export function digitsValue(text: string, start: number, end: number): number | undefined {
  if (start === end) return undefined;
  let value = 0;
  for (let i = start; i < end; i++) {
    const d = text.charCodeAt(i) - 48;
    if (d < 0 || d > 9) return undefined;
    value = value * 10 + d;
  }
  return value;
}
