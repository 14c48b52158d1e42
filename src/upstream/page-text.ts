/**
 * The E6 body's own text (reference E6: `{pageNumber, pageSize, totalRecords, totalPages, data}`):
 * where each record of `data` lies in it, so that a page can be stored from the text as sent while
 * some of its records are left out (the store's quarantine, src/sync/rows/storable.ts), and the JSON
 * text of a record that has no text of its own.
 *
 * Glossary: a *span* is the [start, end) range of UTF-16 code units one JSON value occupies in a
 * text, without the whitespace around it.
 */

/** [start, end) of one JSON value in a text, in UTF-16 code units. */
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

/** Thrown inside the scanner when the text is not the JSON it expects; {@link dataElementSpans} turns it into undefined. */
class NotJson extends Error {}

/** The first index from `i` that is not JSON whitespace (space, tab, LF, CR: all JSON.parse allows). */
function skipWhitespace(text: string, i: number): number {
  for (;;) {
    const c = text.charCodeAt(i);
    if (c !== 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0d) return i;
    i++;
  }
}

/**
 * The end of the string whose opening quote is at `i`: the index after its closing quote, the first
 * quote not escaped, i.e. preceded by an even number of backslashes. Linear: every run of
 * backslashes is counted once, for the quote that ends it.
 */
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

/**
 * The end of the value starting at `i`: a string, an object or array of any depth (one counter,
 * no recursion, so a body nested a million levels deep is no problem), or a number or literal,
 * which runs to the next delimiter.
 */
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
 * Finds the span of every element of the top-level `data` array of a JSON object text, in order:
 * the exact text of each record of an E6 page as sent. As JSON.parse and PostgreSQL do, the last
 * `data` member counts when the key appears more than once, and a key written with escapes
 * (`"d\u0061ta"`) is the key it decodes to.
 *
 * The text must be valid JSON (what JSON.parse accepted); the scan relies on that and checks only
 * the structure it walks. Linear in the text's length; allocates one span per record.
 *
 * @returns the spans, or undefined when the text is not a JSON object with a `data` array.
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
/** A tab, LF or CR: whitespace outside strings (inside them valid JSON holds none raw). */
const KIND_CONTROL = 4;
/** What each byte is to the scan of a container: 0 for most. */
const BYTE_KIND = new Uint8Array(256);
BYTE_KIND[QUOTE] = KIND_QUOTE;
BYTE_KIND[OPEN_BRACE] = KIND_OPEN;
BYTE_KIND[OPEN_BRACKET] = KIND_OPEN;
BYTE_KIND[CLOSE_BRACE] = KIND_CLOSE;
BYTE_KIND[CLOSE_BRACKET] = KIND_CLOSE;
BYTE_KIND[0x09] = KIND_CONTROL;
BYTE_KIND[0x0a] = KIND_CONTROL;
BYTE_KIND[0x0d] = KIND_CONTROL;

/** Whether the scan met a backslash inside a string (an escape), and a tab, LF or CR inside a container, since last reset. */
let sawBackslash = false;
let sawControl = false;

/** The index after the closing quote of the string whose opening quote is at `i` in UTF-8 bytes. */
function byteStringEnd(bytes: Uint8Array, i: number): number {
  const n = bytes.length;
  for (i++; i < n; i++) {
    const c = bytes[i];
    if (c === QUOTE) return i + 1;
    if (c === BACKSLASH) {
      sawBackslash = true;
      i++; // the escaped byte is never the end
    }
  }
  throw new NotJson('unterminated string');
}

/** Deepest nesting of the last container {@link byteValueEnd} walked (1: the container itself). */
let lastDepth = 0;

/** {@link valueEnd} over UTF-8 bytes: outside strings JSON is ASCII, and no byte of a multi-byte character is below 0x80. */
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
        // The string's bytes, inline: most of a record's bytes are inside strings.
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

/** Whether bytes [start, end) are a JSON string literal that reads `data`. */
function isDataKey(bytes: Uint8Array, start: number, end: number): boolean {
  if (end - start === DATA_KEY.length && DATA_KEY.every((b, k) => bytes[start + k] === b)) return true;
  return bytes.subarray(start, end).includes(BACKSLASH) && JSON.parse(new TextDecoder().decode(bytes.subarray(start, end))) === 'data';
}

/** Deepest nesting of an element of the last array {@link byteArrayElements} walked (1: an object or array element itself; 0: none). */
let arrayDepth = 0;

/**
 * The elements of the array whose `[` is at `i`, pushed flat onto `spans` as [start, end) pairs.
 *
 * @returns the index after its `]`.
 */
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

/** The records of an E6 body found in its UTF-8 bytes ({@link pageByteSpans}). */
export interface ByteSpans {
  /** [start, end) of each element of `data`, flat: `[start0, end0, start1, end1, …]`, in bytes. */
  spans: number[];
  /**
   * Deepest nesting of objects and arrays in an element's text, the element itself being level 1
   * (0 when no element is an object or array): a record's parsed value nests no deeper.
   */
  maxDepth: number;
  /**
   * Whether an element's text holds a backslash (an escape: valid JSON has none elsewhere), and
   * a tab, LF or CR (whitespace inside an element: none raw in a string of valid JSON). Without
   * either, no byte of the elements needs COPY's text-format escaping.
   */
  escapes: boolean;
  controls: boolean;
}

const SCANNED = new WeakMap<Uint8Array, ByteSpans | null>();

/**
 * {@link dataElementSpans} over the UTF-8 encoding of a page's text (the same elements, with the
 * same rules for duplicate and escaped `data` keys, in byte offsets; the bytes must be valid JSON),
 * with the deepest nesting of its records and whether they hold an escape or a tab, LF or CR; found
 * in one pass once per bytes and cached with them (a WeakMap: gone with the bytes): window
 * membership, the storable checks and the COPY rows all read the same scan.
 *
 * @returns undefined when the bytes are not a JSON object with a `data` array. The bytes must
 *   not change once scanned.
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
    // The last `data` member's elements; undefined while there is none, or when it is no array.
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

/**
 * `{"data":[…]}` from the records of `text` at `spans`, each kept as its exact span except those
 * whose position is in `left`, written `null`: positions do not move, and nothing else of the
 * body (its envelope) is carried over.
 */
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

/**
 * JSON text with each unpaired surrogate written as its `\uXXXX` escape, the same JSON value: in
 * JSON text such a code unit can only stand inside a string. Encoding to UTF-8 (a `text` column)
 * would otherwise replace it with U+FFFD. Never the case for a body read off the wire, which is
 * decoded from UTF-8; the text is returned as is when it holds no surrogate at all.
 */
export function escapeLoneSurrogates(json: string): string {
  if (!ANY_SURROGATE.test(json)) return json;
  return json.replace(LONE_SURROGATES, (unit) => `\\u${unit.charCodeAt(0).toString(16)}`);
}

/**
 * JSON.stringify of a value parsed from JSON, even one nested too deep for JSON.stringify's
 * recursion (a RangeError from about ten thousand levels): then the same text is written with an
 * explicit stack. Like JSON.stringify, a number that is not finite is written `null`.
 */
export function stringifyJson(value: unknown): string {
  try {
    return JSON.stringify(value);
  } catch (err) {
    if (!(err instanceof RangeError)) throw err;
  }
  return stringifyDeep(value);
}

type Frame = { array: unknown[]; next: number } | { object: Record<string, unknown>; keys: string[]; next: number; written: number };

/** JSON.stringify's output for JSON values (no toJSON, functions or undefined inside), without recursion. */
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
