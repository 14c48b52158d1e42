/**
 * What PostgreSQL jsonb can store of an E6 page, decided by the store rather than by the client
 * that read the page: jsonb refuses a string or key holding U+0000 or an unpaired surrogate, and
 * nesting deeper than its stack allows. Such records are quarantined (kept whole as text in
 * `records_quarantine`) rather than refused: one bad record must not stop its window on every run.
 */
import { InvalidArgumentError } from '../../errors.js';
import type { AnalyticsPage } from '../../upstream/analytics.js';
import { dataElementSpans, dataTextWithout, escapeLoneSurrogates, pageByteSpans, stringifyJson, type Span } from '../../upstream/page-text.js';

/**
 * Records nesting deeper than this (objects and arrays, the record itself being level 1) are
 * quarantined: JSON.stringify overflows the stack from about ten thousand levels and PostgreSQL
 * from a few tens of thousands (`stack depth limit exceeded`).
 */
export const MAX_RECORD_DEPTH = 1000;

/**
 * A record of an E6 page that PostgreSQL jsonb cannot store as it is (see {@link findUnstorable}):
 * a string or key holding U+0000 or an unpaired surrogate, nesting deeper than
 * {@link MAX_RECORD_DEPTH}, or (for a page without text) a number JSON.parse made infinite.
 */
export interface QuarantinedRecord {
  /** Position in the page's `data`, from 0. */
  index: number;
  /** Where in the record, JSONPath-like, as {@link findUnstorable} gives it (`$.customer.name`, `$.tags[2]`). */
  path: string;
  /** What is wrong there, as {@link findUnstorable} gives it (`is a string that holds U+0000 …`). */
  reason: string;
  /**
   * The record's JSON text exactly as in the body (an unpaired surrogate, which a body read off the
   * wire never holds raw, written as its `\uXXXX` escape); for a page without text,
   * JSON.stringify of the parsed record. Never holds a NUL byte: U+0000 is the six characters `\u0000`.
   */
  text: string;
}

/**
 * JSON text can give a string U+0000 or a lone surrogate only through a `\u0000` or surrogate escape
 * (raw control characters are invalid JSON), or a raw surrogate (never from UTF-8 off the wire).
 */
const MAY_HOLD_UNSTORABLE_STRING = /\\u0000|\\u[dD][89abAB]|\\u[dD][c-fC-F]|[\ud800-\udfff]/;
/** `\u`, the start of every escape that can give a string U+0000 or a surrogate. */
const BACKSLASH_U = Buffer.from('\\u', 'latin1');

/**
 * {@link MAY_HOLD_UNSTORABLE_STRING}'s test, cheaper on the common page: one without any `\u`
 * escape (a plain substring search) needs only the raw-surrogate test, which V8 answers without
 * a scan for a one-byte string, and none when the text was decoded from `bytes` (valid UTF-8).
 */
function mayHoldUnstorableString(text: string, bytes: Buffer | undefined): boolean {
  // Valid UTF-8 (AnalyticsPage.bytes is only kept when it is) encodes no surrogate: only an escape can make one.
  if (bytes !== undefined) return bytes.includes(BACKSLASH_U) && MAY_HOLD_UNSTORABLE_STRING.test(text);
  return text.includes('\\u') ? MAY_HOLD_UNSTORABLE_STRING.test(text) : ANY_SURROGATE.test(text);
}

/** What the store keeps of a page: the text to store its records from, and the records it cannot store. */
export interface StorablePage {
  /**
   * The JSON text to store the records from: the body as received, unless it may hold something
   * jsonb refuses (the text holds `\u0000`, a surrogate escape or a raw surrogate; or a record or a
   * field beside the envelope nests too deep): then `{"data":[…]}` holding every record's exact
   * text but `null` at the position of each quarantined one, so positions in `data` still index
   * it, and nothing of the envelope. Absent for a page without text (stored from its records).
   */
  text?: string;
  /** `text` in UTF-8, when it is the body as received and the page has its bytes (AnalyticsPage.bytes). */
  bytes?: Buffer;
  /** The records of `data` jsonb cannot store as they are, in order of position; absent when there are none (most pages). */
  quarantined?: readonly QuarantinedRecord[];
}

/**
 * Finds the records of `page` PostgreSQL jsonb cannot store (see {@link findUnstorable}) and the
 * text to store the others from. When the page's text shows that no string can hold U+0000 or an
 * unpaired surrogate (no `\u0000`, no surrogate escape, no raw surrogate), only depth is checked
 * record by record: a page's strings are most of its values. Only a page the pre-check does not
 * clear, or with something nested too deep, is scanned for its records' text spans; that scan
 * also quarantines a record whose text holds an escape jsonb refuses in a member a duplicate key
 * hid from JSON.parse. Numbers JSON.parse made infinite are storable from the text (jsonb keeps
 * them as numeric); for a page without text they are not.
 *
 * @throws {InvalidArgumentError} when `page.text` is not the JSON text of the page's body.
 */
export function storablePage(page: AnalyticsPage): StorablePage {
  const { text, bytes } = page;
  const strings = text === undefined || mayHoldUnstorableString(text, bytes);
  const numbers = text === undefined;
  // With nothing but depth to check, the scan of the page's bytes (shared with membership and the
  // COPY rows) tells it for every record at once: a parsed record nests no deeper than its text.
  const shallow = !strings && !numbers && bytes !== undefined && (pageByteSpans(bytes)?.maxDepth ?? Infinity) <= MAX_RECORD_DEPTH;
  let found: Omit<QuarantinedRecord, 'text'>[] | undefined;
  for (let i = 0; !shallow && i < page.data.length; i++) {
    const problem = findUnstorable(page.data[i], { strings, numbers });
    if (problem !== undefined) (found ??= []).push({ index: i, path: problem.path, reason: problem.problem });
  }
  if (text === undefined) {
    return found === undefined ? {} : { quarantined: found.map((q) => ({ ...q, text: stringifyJson(page.data[q.index]) })) };
  }
  if (!strings && found === undefined) {
    // PostgreSQL parses the whole body: a field beside `data` must be storable as well. With no
    // string to fear, only depth can be wrong there, and the envelope is a few numbers.
    if (page.extra === undefined || findUnstorable(page.extra, { strings: false, numbers: false }) === undefined)
      return page.bytes === undefined ? { text } : { text, bytes: page.bytes };
  }
  // Rare: store `{"data":[…]}` with every record's exact span but the unstorable ones, which also
  // leaves out the envelope and whatever a duplicate key hid from JSON.parse but not from PostgreSQL.
  const spans = dataElementSpans(text);
  if (spans === undefined || spans.length !== page.data.length) {
    throw new InvalidArgumentError(`page ${page.pageNumber}: its text is not the JSON text of its body (the data array was not found whole)`);
  }
  const byIndex = new Map(found?.map((q) => [q.index, q]));
  // A member overridden by a duplicate key is gone from the parsed record but not from its text.
  const escapes = strings ? unstorableEscapes(text, spans) : undefined;
  const quarantined: QuarantinedRecord[] = [];
  for (let i = 0; i < spans.length; i++) {
    const escape = escapes?.get(i);
    const q = byIndex.get(i) ?? (escape === undefined ? undefined : { index: i, path: '$', reason: HIDDEN_ESCAPE_PROBLEMS[escape] });
    if (q !== undefined) quarantined.push({ ...q, text: escapeLoneSurrogates(text.slice(spans[i]!.start, spans[i]!.end)) });
  }
  const storable = dataTextWithout(text, spans, new Set(quarantined.map((q) => q.index)));
  return quarantined.length === 0 ? { text: storable } : { text: storable, quarantined };
}

/** Problems of a record whose text holds an escape jsonb refuses that its parsed value does not show. */
const HIDDEN_ESCAPE_PROBLEMS: Record<UnstorableEscape, string> = {
  nul: 'has in its text a \\u0000 escape (U+0000), which PostgreSQL jsonb cannot store, in a member JSON.parse does not keep (a duplicate key)',
  surrogate: 'has in its text an unpaired UTF-16 surrogate escape, which PostgreSQL jsonb cannot store, in a member JSON.parse does not keep (a duplicate key)',
};

/** A lone UTF-16 surrogate: a high one not followed by a low one, or a low one not preceded by a high one. */
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
const ANY_SURROGATE = /[\ud800-\udfff]/;
const PLAIN_KEY = /^[A-Za-z_$][\w$]*$/;
/** Longest path quoted in a message; a deep or long-keyed path is shortened in its middle. */
const MAX_PATH_CHARS = 160;

/** Why PostgreSQL jsonb cannot store this string as it is, or undefined when it can. */
function stringProblem(text: string): string | undefined {
  if (text.includes('\u0000')) return 'holds U+0000 (\\u0000), which PostgreSQL jsonb cannot store';
  if (ANY_SURROGATE.test(text) && LONE_SURROGATE.test(text)) return 'holds an unpaired UTF-16 surrogate, which PostgreSQL jsonb cannot store';
  return undefined;
}

/**
 * Finds the first value in an E6 record that PostgreSQL `jsonb` cannot store as it is:
 * a string (value or key) holding U+0000 or an unpaired surrogate, a number that is not finite
 * (JSON.parse turns `1e400` into Infinity, which JSON.stringify would write as null; checked only
 * with `numbers`, for records that are stored re-serialised rather than from E6's text), or nesting
 * deeper than {@link MAX_RECORD_DEPTH}.
 *
 * @returns the JSONPath-like location (`$.a.b[3]`, keys that are not identifiers quoted as JSON,
 *   shortened in the middle with `…` beyond 160 characters) and what is wrong there, or undefined
 *   when the whole record can be stored.
 */
export function findUnstorable(record: unknown, options: { strings?: boolean; numbers?: boolean } = {}): { path: string; problem: string } | undefined {
  const found = scan(record, 1, options.strings ?? true, options.numbers ?? true);
  if (found === undefined) return undefined;
  let path = '$';
  for (let i = found.keys.length - 1; i >= 0; i--) {
    const key = found.keys[i]!;
    path += typeof key === 'number' ? `[${key}]` : PLAIN_KEY.test(key) ? `.${key}` : `[${JSON.stringify(key)}]`;
  }
  if (path.length > MAX_PATH_CHARS) {
    // Cut between code points: half a surrogate pair in a message would be a new unpaired surrogate.
    const head = path.slice(0, MAX_PATH_CHARS - 41).replace(/[\ud800-\udbff]$/, '');
    const tail = path.slice(-40).replace(/^[\udc00-\udfff]/, '');
    path = `${head}…${tail}`;
  }
  return { path, problem: found.problem };
}

/**
 * Depth-first scan; keys are collected innermost first on the way back. Recursion is bounded by
 * MAX_DEPTH. `strings` false skips the string checks (the caller ruled them out on the text).
 */
function scan(value: unknown, depth: number, strings: boolean, numbers: boolean): { keys: (string | number)[]; problem: string } | undefined {
  if (typeof value === 'string') {
    if (!strings) return undefined;
    const problem = stringProblem(value);
    return problem === undefined ? undefined : { keys: [], problem: `is a string that ${problem}` };
  }
  if (typeof value === 'number') {
    return !numbers || Number.isFinite(value) ? undefined : { keys: [], problem: 'is a number beyond the range of a double (it would be stored as null)' };
  }
  if (value === null || typeof value !== 'object') return undefined;
  if (depth > MAX_RECORD_DEPTH) {
    return { keys: [], problem: `nests deeper than ${MAX_RECORD_DEPTH} levels of objects and arrays` };
  }
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = scan(value[i], depth + 1, strings, numbers);
      if (found !== undefined) {
        found.keys.push(i);
        return found;
      }
    }
    return undefined;
  }
  for (const key in value) {
    const keyProblem = strings ? stringProblem(key) : undefined;
    if (keyProblem !== undefined) return { keys: [key], problem: `has a key that ${keyProblem}` };
    const found = scan((value as Record<string, unknown>)[key], depth + 1, strings, numbers);
    if (found !== undefined) {
      found.keys.push(key);
      return found;
    }
  }
  return undefined;
}

/** Why an escape of a JSON text makes it unstorable in jsonb: `\u0000`, or a surrogate escape not in a `\uD8xx\uDCxx` pair. */
export type UnstorableEscape = 'nul' | 'surrogate';

/** A JSON escape: `\uXXXX` with its hex digits, or a backslash and one other character (so `\\u0000` is no `\u0000`). */
const ESCAPE = /\\(?:u([0-9a-fA-F]{4})|[^u])/g;

/**
 * The records of `text` (at `spans`, from {@link dataElementSpans}) whose text holds an escape
 * PostgreSQL jsonb refuses, as its parser decides it: `\u0000`, a low surrogate escape not right
 * after a high one, a high one not right before a low one. One pass over the escapes of the whole
 * array: outside strings valid JSON has no backslash, so every escape lies inside one record.
 *
 * @returns the position of each such record with its first problem (empty for most texts).
 */
export function unstorableEscapes(text: string, spans: readonly Span[]): Map<number, UnstorableEscape> {
  const found = new Map<number, UnstorableEscape>();
  if (spans.length === 0) return found;
  const flag = (record: number, problem: UnstorableEscape): void => {
    if (!found.has(record)) found.set(record, problem);
  };
  const end = spans[spans.length - 1]!.end;
  const re = new RegExp(ESCAPE.source, 'g');
  re.lastIndex = spans[0]!.start;
  let record = 0;
  // Index just after a high surrogate escape waiting for its low half, and the record holding it.
  let pendingAt = -1;
  let pendingRecord = -1;
  for (let m = re.exec(text); m !== null && m.index < end; m = re.exec(text)) {
    while (m.index >= spans[record]!.end) record++;
    const unit = m[1] === undefined ? -1 : Number.parseInt(m[1], 16);
    if (pendingAt >= 0) {
      const paired = m.index === pendingAt && unit >= 0xdc00 && unit <= 0xdfff;
      if (!paired) flag(pendingRecord, 'surrogate');
      pendingAt = -1;
      if (paired) continue;
    }
    if (unit === 0) flag(record, 'nul');
    else if (unit >= 0xd800 && unit <= 0xdbff) {
      pendingAt = m.index + 6;
      pendingRecord = record;
    } else if (unit >= 0xdc00 && unit <= 0xdfff) flag(record, 'surrogate');
  }
  if (pendingAt >= 0) flag(pendingRecord, 'surrogate');
  return found;
}
