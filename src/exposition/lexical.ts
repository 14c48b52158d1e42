/**
 * Characters, names and tokens of the Prometheus text format 0.0.4, shared by the scanner
 * (parse.ts), the number reader (number.ts) and the family rules (family.ts).
 */

const TAB = 9;
export const CR = 13;
const SPACE = 32;
export const QUOTE = 34;
export const HASH = 35;
export const PLUS = 43;
export const COMMA = 44;
export const MINUS = 45;
export const DOT = 46;
export const EQUALS = 61;
export const BACKSLASH = 92;
export const UNDERSCORE = 95;
export const LBRACE = 123;
export const RBRACE = 125;

function isLetter(c: number): boolean {
  return (c >= 97 && c <= 122) || (c >= 65 && c <= 90);
}

export function isDigit(c: number): boolean {
  return c >= 48 && c <= 57;
}

export function isBlank(c: number): boolean {
  return c === SPACE || c === TAB;
}

export function isMetricNameStart(c: number): boolean {
  return isLetter(c) || c === UNDERSCORE || c === 58;
}

export function isMetricNameChar(c: number): boolean {
  return isMetricNameStart(c) || isDigit(c);
}

export function isLabelNameStart(c: number): boolean {
  return isLetter(c) || c === UNDERSCORE;
}

export function isLabelNameChar(c: number): boolean {
  return isLabelNameStart(c) || isDigit(c);
}

/** Whether `name` matches `[a-zA-Z_:][a-zA-Z0-9_:]*`, the metric names of the text format. */
export function isValidMetricName(name: string): boolean {
  if (name.length === 0 || !isMetricNameStart(name.charCodeAt(0))) return false;
  for (let i = 1; i < name.length; i++) if (!isMetricNameChar(name.charCodeAt(i))) return false;
  return true;
}

/** Whether `name` matches `[a-zA-Z_][a-zA-Z0-9_]*` and does not start with `__` (reserved for Prometheus). */
export function isValidLabelName(name: string): boolean {
  if (name.length === 0 || !isLabelNameStart(name.charCodeAt(0))) return false;
  if (name.length > 1 && name.charCodeAt(0) === UNDERSCORE && name.charCodeAt(1) === UNDERSCORE) return false;
  for (let i = 1; i < name.length; i++) if (!isLabelNameChar(name.charCodeAt(i))) return false;
  return true;
}

export function skipBlanks(text: string, i: number, end: number): number {
  while (i < end && isBlank(text.charCodeAt(i))) i++;
  return i;
}

export function skipToken(text: string, i: number, end: number): number {
  while (i < end && !isBlank(text.charCodeAt(i))) i++;
  return i;
}
