/**
 * What PostgreSQL jsonb can store of an E6 page: not a string or key holding U+0000 or an unpaired
 * surrogate, nor nesting past its stack. Such records are quarantined, kept whole as text, so one
 * bad record never stops its window. See docs/design/storable-rows.md.
 */
import { InvalidArgumentError } from '../../errors.js';
import type { AnalyticsPage } from '../../upstream/analytics.js';
import { dataElementSpans, dataTextWithout, escapeLoneSurrogates, pageByteSpans, stringifyJson, type Span } from '../../upstream/page-text.js';

/** Levels of objects and arrays (the record is 1) past which a record is quarantined. */
const MAX_RECORD_DEPTH = 1000;

/** A record of a page jsonb cannot store as it is (see {@link findUnstorable}). */
interface QuarantinedRecord {
  /** Position in `data`. */
  index: number;
  /** JSONPath-like: `$.customer.name`, `$.tags[2]`. */
  path: string;
  reason: string;
  /** Its exact JSON text (a lone surrogate as its escape; JSON.stringify without text); no NUL byte. */
  text: string;
}

/** The only ways JSON text gives a string U+0000 or a lone surrogate. */
const MAY_HOLD_UNSTORABLE_STRING = /\\u0000|\\u[dD][89abAB]|\\u[dD][c-fC-F]|[\ud800-\udfff]/;
const BACKSLASH_U = Buffer.from('\\u', 'latin1');

/** {@link MAY_HOLD_UNSTORABLE_STRING}'s test, cheap without any `\u` and for text from valid UTF-8. */
function mayHoldUnstorableString(text: string, bytes: Buffer | undefined): boolean {
  if (bytes !== undefined) return bytes.includes(BACKSLASH_U) && MAY_HOLD_UNSTORABLE_STRING.test(text);
  return text.includes('\\u') ? MAY_HOLD_UNSTORABLE_STRING.test(text) : ANY_SURROGATE.test(text);
}

/** The text to store a page's records from, and the records it cannot store. */
export interface StorablePage {
  /** The body, or `{"data":[…]}` with `null` at each quarantined position; absent without text. */
  text?: string;
  /** `text` in UTF-8, when it is the body and the page has its bytes. */
  bytes?: Buffer;
  /** In order of position; absent when there are none. */
  quarantined?: readonly QuarantinedRecord[];
}

/** @throws {InvalidArgumentError} when `page.text` is not the JSON text of the page's body. */
export function storablePage(page: AnalyticsPage): StorablePage {
  const { text, bytes } = page;
  const strings = text === undefined || mayHoldUnstorableString(text, bytes);
  const numbers = text === undefined;
  // Only depth to check: the one byte scan of the page tells it for every record at once.
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
    // PostgreSQL parses the whole body: fields beside `data` too.
    if (page.extra === undefined || findUnstorable(page.extra, { strings: false, numbers: false }) === undefined)
      return page.bytes === undefined ? { text } : { text, bytes: page.bytes };
  }
  const spans = dataElementSpans(text);
  if (spans === undefined || spans.length !== page.data.length) {
    throw new InvalidArgumentError(`page ${page.pageNumber}: its text is not the JSON text of its body (the data array was not found whole)`);
  }
  const byIndex = new Map(found?.map((q) => [q.index, q]));
  // A member a duplicate key hid from JSON.parse is still in the text, and PostgreSQL reads it.
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

/** A record whose text holds an escape jsonb refuses that its parsed value does not show. */
const HIDDEN_ESCAPE_PROBLEMS: Record<UnstorableEscape, string> = {
  nul: 'has in its text a \\u0000 escape (U+0000), which PostgreSQL jsonb cannot store, in a member JSON.parse does not keep (a duplicate key)',
  surrogate: 'has in its text an unpaired UTF-16 surrogate escape, which PostgreSQL jsonb cannot store, in a member JSON.parse does not keep (a duplicate key)',
};

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
 * Where (`$.a.b[3]`, at most 160 characters) and what the first value of a record jsonb cannot
 * store is; with `numbers` (a record stored re-serialised), a number JSON.parse made infinite too.
 */
function findUnstorable(record: unknown, options: { strings?: boolean; numbers?: boolean } = {}): { path: string; problem: string } | undefined {
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

/** Depth-first, keys collected innermost first; recursion bounded by MAX_RECORD_DEPTH. */
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

/** `\u0000`, or a surrogate escape not in a `\uD8xx\uDCxx` pair. */
export type UnstorableEscape = 'nul' | 'surrogate';

/** A JSON escape: `\uXXXX` with its hex digits, or a backslash and one other character (so `\\u0000` is no `\u0000`). */
const ESCAPE = /\\(?:u([0-9a-fA-F]{4})|[^u])/g;

/** The records of `text` (at `spans`) holding an escape jsonb's parser refuses, with the first one each. */
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
