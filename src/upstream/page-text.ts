/**
 * Where each record of an E6 body's `data` lies in its text or bytes, so a page is stored from the
 * text as sent, some records left out; and the JSON text of a record that has none. Scans are
 * linear and never recurse. Design: docs/design/e6-pages.md.
 */

/** [start, end) of one JSON value without surrounding whitespace, in UTF-16 code units. */
export interface Span {
  start: number;
  end: number;
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const COLON = 0x3a;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;

/** Thrown inside the scanners; turned into undefined. */
class NotJson extends Error {}

function skipWhitespace(text: string, i: number): number {
  for (;;) {
    const c = text.charCodeAt(i);
    if (c !== 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0d) return i;
    i++;
  }
}

/** After the first quote from `i + 1` preceded by an even number of backslashes. */
function stringEnd(text: string, i: number): number {
  let from = i + 1;
  for (;;) {
    const quote = text.indexOf('"', from);
    if (quote < 0) throw new NotJson('unterminated string');
    let before = quote - 1;
    while (text.charCodeAt(before) === BACKSLASH) before--; // stops at the opening quote at the latest
    if ((quote - 1 - before) % 2 === 0) return quote + 1;
    from = quote + 1;
  }
}

/** The end of the value at `i`; containers of any depth with one counter. */
function valueEnd(text: string, i: number): number {
  const first = text.charCodeAt(i);
  if (first === QUOTE) return stringEnd(text, i);
  if (first === OPEN_BRACE || first === OPEN_BRACKET) {
    let depth = 0;
    for (;;) {
      const c = text.charCodeAt(i);
      if (c === QUOTE) {
        i = stringEnd(text, i);
        continue;
      }
      if (c === OPEN_BRACE || c === OPEN_BRACKET) depth++;
      else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) {
        if (--depth === 0) return i + 1;
      } else if (Number.isNaN(c)) throw new NotJson('unterminated container');
      i++;
    }
  }
  const start = i;
  for (; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === COMMA || c === CLOSE_BRACE || c === CLOSE_BRACKET || c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d) break;
  }
  if (i === start) throw new NotJson('missing value');
  return i;
}

/**
 * The span of every element of the top-level `data` array, in order; the last `data` key counts,
 * escaped keys as decoded (as JSON.parse does). `text` must be valid JSON.
 *
 * @returns undefined when the text is not an object with a `data` array.
 */
export function dataElementSpans(text: string): Span[] | undefined {
  try {
    let i = skipWhitespace(text, 0);
    if (text.charCodeAt(i) !== OPEN_BRACE) return undefined;
    i = skipWhitespace(text, i + 1);
    let data: Span | undefined;
    if (text.charCodeAt(i) !== CLOSE_BRACE) {
      for (;;) {
        if (text.charCodeAt(i) !== QUOTE) return undefined;
        const keyEnd = stringEnd(text, i);
        const key = text.slice(i, keyEnd);
        i = skipWhitespace(text, keyEnd);
        if (text.charCodeAt(i) !== COLON) return undefined;
        i = skipWhitespace(text, i + 1);
        const end = valueEnd(text, i);
        if (key === '"data"' || (key.includes('\\') && JSON.parse(key) === 'data')) data = { start: i, end };
        i = skipWhitespace(text, end);
        const c = text.charCodeAt(i);
        if (c === CLOSE_BRACE) break;
        if (c !== COMMA) return undefined;
        i = skipWhitespace(text, i + 1);
      }
    }
    if (data === undefined || text.charCodeAt(data.start) !== OPEN_BRACKET) return undefined;
    const spans: Span[] = [];
    i = skipWhitespace(text, data.start + 1);
    if (text.charCodeAt(i) === CLOSE_BRACKET) return spans;
    for (;;) {
      const end = valueEnd(text, i);
      spans.push({ start: i, end });
      i = skipWhitespace(text, end);
      const c = text.charCodeAt(i);
      if (c === CLOSE_BRACKET) return i + 1 === data.end ? spans : undefined;
      if (c !== COMMA) return undefined;
      i = skipWhitespace(text, i + 1);
    }
  } catch (err) {
    if (err instanceof NotJson || err instanceof SyntaxError) return undefined;
    throw err;
  }
}

const KIND_QUOTE = 1;
const KIND_OPEN = 2;
const KIND_CLOSE = 3;
/** Tab, LF, CR: none raw inside strings of valid JSON. */
const KIND_CONTROL = 4;
const BYTE_KIND = new Uint8Array(256);
BYTE_KIND[QUOTE] = KIND_QUOTE;
BYTE_KIND[OPEN_BRACE] = KIND_OPEN;
BYTE_KIND[OPEN_BRACKET] = KIND_OPEN;
BYTE_KIND[CLOSE_BRACE] = KIND_CLOSE;
BYTE_KIND[CLOSE_BRACKET] = KIND_CLOSE;
BYTE_KIND[0x09] = KIND_CONTROL;
BYTE_KIND[0x0a] = KIND_CONTROL;
BYTE_KIND[0x0d] = KIND_CONTROL;

/** Since the last reset: a backslash (escape), a tab, LF or CR inside a container. */
let sawBackslash = false;
let sawControl = false;

function byteStringEnd(bytes: Uint8Array, i: number): number {
  const n = bytes.length;
  for (i++; i < n; i++) {
    const c = bytes[i];
    if (c === QUOTE) return i + 1;
    if (c === BACKSLASH) {
      sawBackslash = true;
      i++;
    }
  }
  throw new NotJson('unterminated string');
}

/** Deepest nesting of the last container walked (1: itself). */
let lastDepth = 0;

/** {@link valueEnd} over UTF-8: no byte of a multi-byte character is below 0x80. */
function byteValueEnd(bytes: Uint8Array, i: number): number {
  const n = bytes.length;
  const first = bytes[i];
  lastDepth = 0;
  if (first === QUOTE) return byteStringEnd(bytes, i);
  if (first === OPEN_BRACE || first === OPEN_BRACKET) {
    let depth = 0;
    let deepest = 0;
    while (i < n) {
      const kind = BYTE_KIND[bytes[i]!]!;
      if (kind === KIND_QUOTE) {
        // Inline: most bytes are inside strings.
        for (i++; i < n; i++) {
          const c = bytes[i]!;
          if (c === QUOTE) break;
          if (c === BACKSLASH) {
            sawBackslash = true;
            i++;
          }
        }
        if (i >= n) break;
      } else if (kind === KIND_CONTROL) {
        sawControl = true;
      } else if (kind === KIND_OPEN) {
        if (++depth > deepest) deepest = depth;
      } else if (kind === KIND_CLOSE && --depth === 0) {
        lastDepth = deepest;
        return i + 1;
      }
      i++;
    }
    throw new NotJson('unterminated container');
  }
  const start = i;
  for (; i < n; i++) {
    const c = bytes[i];
    if (c === COMMA || c === CLOSE_BRACE || c === CLOSE_BRACKET || c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d) break;
  }
  if (i === start) throw new NotJson('missing value');
  return i;
}

function byteSkipWhitespace(bytes: Uint8Array, i: number): number {
  for (;;) {
    const c = bytes[i];
    if (c !== 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0d) return i;
    i++;
  }
}

const DATA_KEY = [QUOTE, 0x64, 0x61, 0x74, 0x61, QUOTE]; // "data"

function isDataKey(bytes: Uint8Array, start: number, end: number): boolean {
  if (end - start === DATA_KEY.length && DATA_KEY.every((b, k) => bytes[start + k] === b)) return true;
  return bytes.subarray(start, end).includes(BACKSLASH) && JSON.parse(new TextDecoder().decode(bytes.subarray(start, end))) === 'data';
}

/** Deepest element nesting of the last array walked (0: no container element). */
let arrayDepth = 0;

/** Pushes the array's elements at `i` flat onto `spans`; returns the index after `]`. */
function byteArrayElements(bytes: Uint8Array, i: number, spans: number[]): number {
  i = byteSkipWhitespace(bytes, i + 1);
  arrayDepth = 0;
  sawBackslash = false;
  sawControl = false;
  if (bytes[i] === CLOSE_BRACKET) return i + 1;
  for (;;) {
    const end = byteValueEnd(bytes, i);
    if (lastDepth > arrayDepth) arrayDepth = lastDepth;
    spans.push(i, end);
    i = byteSkipWhitespace(bytes, end);
    const c = bytes[i];
    if (c === CLOSE_BRACKET) return i + 1;
    if (c !== COMMA) throw new NotJson('expected , or ]');
    i = byteSkipWhitespace(bytes, i + 1);
  }
}

export interface ByteSpans {
  /** Flat `[start0, end0, start1, end1, …]`, in bytes. */
  spans: number[];
  /** Deepest nesting of any element (itself 1; 0: none is a container). */
  maxDepth: number;
  /** A backslash in an element; without it and `controls`, COPY needs no escaping. */
  escapes: boolean;
  /** A raw tab, LF or CR in an element. */
  controls: boolean;
}

const SCANNED = new WeakMap<Uint8Array, ByteSpans | null>();

/**
 * {@link dataElementSpans} over a page's UTF-8 bytes, in one pass cached with them (a WeakMap), so
 * every step of a sync reads the same scan. The bytes must be valid JSON and must not change.
 *
 * @returns undefined when the bytes are not an object with a `data` array.
 */
export function pageByteSpans(bytes: Uint8Array): ByteSpans | undefined {
  let found = SCANNED.get(bytes);
  if (found === undefined) {
    found = scanDataElements(bytes) ?? null;
    SCANNED.set(bytes, found);
  }
  return found ?? undefined;
}

function scanDataElements(bytes: Uint8Array): ByteSpans | undefined {
  try {
    let i = byteSkipWhitespace(bytes, 0);
    if (bytes[i] !== OPEN_BRACE) return undefined;
    i = byteSkipWhitespace(bytes, i + 1);
    let spans: number[] | undefined;
    let maxDepth = 0;
    let escapes = false;
    let controls = false;
    if (bytes[i] !== CLOSE_BRACE) {
      for (;;) {
        if (bytes[i] !== QUOTE) return undefined;
        const keyEnd = byteStringEnd(bytes, i);
        const data = isDataKey(bytes, i, keyEnd);
        i = byteSkipWhitespace(bytes, keyEnd);
        if (bytes[i] !== COLON) return undefined;
        i = byteSkipWhitespace(bytes, i + 1);
        let end: number;
        if (data && bytes[i] === OPEN_BRACKET) {
          spans = [];
          end = byteArrayElements(bytes, i, spans);
          maxDepth = arrayDepth;
          escapes = sawBackslash;
          controls = sawControl;
        } else {
          if (data) spans = undefined;
          end = byteValueEnd(bytes, i);
        }
        i = byteSkipWhitespace(bytes, end);
        const c = bytes[i];
        if (c === CLOSE_BRACE) break;
        if (c !== COMMA) return undefined;
        i = byteSkipWhitespace(bytes, i + 1);
      }
    }
    return spans === undefined ? undefined : { spans, maxDepth, escapes, controls };
  } catch (err) {
    if (err instanceof NotJson || err instanceof SyntaxError) return undefined;
    throw err;
  }
}

/** `{"data":[…]}` of the records at `spans`, those in `left` written `null` (positions kept). */
export function dataTextWithout(text: string, spans: readonly Span[], left: ReadonlySet<number>): string {
  let out = '{"data":[';
  for (let i = 0; i < spans.length; i++) {
    if (i > 0) out += ',';
    out += left.has(i) ? 'null' : text.slice(spans[i]!.start, spans[i]!.end);
  }
  return `${out}]}`;
}

const LONE_SURROGATES = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;
const ANY_SURROGATE = /[\ud800-\udfff]/;

/** Each unpaired surrogate as its `\uXXXX` escape (UTF-8 would make it U+FFFD); same JSON value. */
export function escapeLoneSurrogates(json: string): string {
  if (!ANY_SURROGATE.test(json)) return json;
  return json.replace(LONE_SURROGATES, (unit) => `\\u${unit.charCodeAt(0).toString(16)}`);
}

/** JSON.stringify of a parsed JSON value, even one nested too deep for its recursion (~10,000 levels). */
export function stringifyJson(value: unknown): string {
  try {
    return JSON.stringify(value);
  } catch (err) {
    if (!(err instanceof RangeError)) throw err;
  }
  return stringifyDeep(value);
}

type Frame = { array: unknown[]; next: number } | { object: Record<string, unknown>; keys: string[]; next: number; written: number };

/** For JSON values only (no toJSON, functions or undefined inside). */
function stringifyDeep(root: unknown): string {
  const parts: string[] = [];
  const stack: Frame[] = [];
  const open = (value: unknown): void => {
    if (Array.isArray(value)) {
      parts.push('[');
      stack.push({ array: value, next: 0 });
    } else if (value !== null && typeof value === 'object') {
      parts.push('{');
      stack.push({ object: value as Record<string, unknown>, keys: Object.keys(value), next: 0, written: 0 });
    } else {
      parts.push(JSON.stringify(value) ?? 'null');
    }
  };
  open(root);
  while (stack.length > 0) {
    const top = stack[stack.length - 1]!;
    if ('array' in top) {
      if (top.next === top.array.length) {
        parts.push(']');
        stack.pop();
        continue;
      }
      if (top.next > 0) parts.push(',');
      open(top.array[top.next++]);
    } else {
      if (top.next === top.keys.length) {
        parts.push('}');
        stack.pop();
        continue;
      }
      const key = top.keys[top.next++]!;
      const value = top.object[key];
      if (value === undefined || typeof value === 'function' || typeof value === 'symbol') continue;
      parts.push(`${top.written++ > 0 ? ',' : ''}${JSON.stringify(key)}:`);
      open(value);
    }
  }
  return parts.join('');
}
