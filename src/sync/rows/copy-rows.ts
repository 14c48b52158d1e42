/**
 * The bytes of `COPY … FROM STDIN` (text format) for a window's records, copied from the page's
 * own bytes, and the ISO 8601 text of instants. Pure: records-copy.ts streams these rows.
 * See docs/design/storable-rows.md.
 */
import { InvalidArgumentError } from '../../errors.js';
import { pageByteSpans } from '../../upstream/page-text.js';
import type { PageRows } from './page-rows.js';
import type { Window } from '../windows.js';

const MS_PER_DAY = 86_400_000;
/** `YYYY-MM-DDT` */
const DATE_BYTES = 11;
/** 10000-01-01T00:00:00Z: from here on `toISOString` writes six-digit years. */
const YEAR_10000_MS = 253_402_300_800_000;
const PAD2 = Array.from({ length: 60 }, (_, n) => String(n).padStart(2, '0'));
const PAD3 = Array.from({ length: 1000 }, (_, n) => String(n).padStart(3, '0'));

/**
 * Writes instants (ms since the epoch) exactly as `toISOString` does, the date formatted once per
 * day: as a string ({@link format}) or as ASCII bytes into a buffer ({@link write}).
 */
export class IsoWriter {
  private day = Number.NaN;
  private dateText = '';
  /** {@link write}'s own day. */
  private bytesDay = Number.NaN;
  private readonly dateBytes: number[] = Array.from({ length: DATE_BYTES }, () => 0);

  /** `new Date(ms).toISOString()`, for any valid time value. */
  format(ms: number): string {
    if (!(Number.isInteger(ms) && ms >= 0 && ms < YEAR_10000_MS)) return new Date(ms).toISOString();
    let rest = ms % MS_PER_DAY;
    const dayStart = ms - rest;
    if (dayStart !== this.day) {
      this.day = dayStart;
      this.dateText = new Date(dayStart).toISOString().slice(0, 11); // YYYY-MM-DDT
    }
    const hours = Math.floor(rest / 3_600_000);
    rest -= hours * 3_600_000;
    const minutes = Math.floor(rest / 60_000);
    rest -= minutes * 60_000;
    const seconds = Math.floor(rest / 1000);
    return `${this.dateText}${PAD2[hours]}:${PAD2[minutes]}:${PAD2[seconds]}.${PAD3[rest - seconds * 1000]}Z`;
  }

  /** Writes {@link format}'s text into `out` at `at` (room for {@link MAX_ISO_BYTES}); returns the index after it. */
  write(out: Buffer, at: number, ms: number): number {
    // Within the last call's day, the time of day is a small integer: no division of a double.
    let rest = ms - this.bytesDay;
    if (!(rest >= 0 && rest < MS_PER_DAY && Number.isInteger(rest))) {
      if (!(Number.isInteger(ms) && ms >= 0 && ms < YEAR_10000_MS)) return at + out.write(new Date(ms).toISOString(), at, 'latin1');
      rest = ms % MS_PER_DAY;
      const dayStart = ms - rest;
      this.bytesDay = dayStart;
      const date = new Date(dayStart).toISOString();
      for (let i = 0; i < DATE_BYTES; i++) this.dateBytes[i] = date.charCodeAt(i);
    }
    rest |= 0;
    const dateBytes = this.dateBytes;
    for (let i = 0; i < DATE_BYTES; i++) out[at + i] = dateBytes[i]!;
    at += DATE_BYTES;
    const hours = (rest / 3_600_000) | 0;
    rest -= hours * 3_600_000;
    const minutes = (rest / 60_000) | 0;
    rest -= minutes * 60_000;
    const seconds = (rest / 1000) | 0;
    const millis = rest - seconds * 1000;
    const hoursTens = (hours / 10) | 0;
    const minutesTens = (minutes / 10) | 0;
    const secondsTens = (seconds / 10) | 0;
    const hundreds = (millis / 100) | 0;
    const tens = ((millis - hundreds * 100) / 10) | 0;
    out[at] = DIGIT_0 + hoursTens;
    out[at + 1] = DIGIT_0 + hours - hoursTens * 10;
    out[at + 2] = COLON;
    out[at + 3] = DIGIT_0 + minutesTens;
    out[at + 4] = DIGIT_0 + minutes - minutesTens * 10;
    out[at + 5] = COLON;
    out[at + 6] = DIGIT_0 + secondsTens;
    out[at + 7] = DIGIT_0 + seconds - secondsTens * 10;
    out[at + 8] = DOT;
    out[at + 9] = DIGIT_0 + hundreds;
    out[at + 10] = DIGIT_0 + tens;
    out[at + 11] = DIGIT_0 + millis - hundreds * 100 - tens * 10;
    out[at + 12] = LETTER_Z;
    return at + 13;
  }
}

const DIGIT_0 = 0x30;
const COLON = 0x3a;
const DOT = 0x2e;
const LETTER_Z = 0x5a;
/** Longest text `toISOString` writes (`+275760-09-13T00:00:00.000Z`), in bytes. */
const MAX_ISO_BYTES = 27;

/** The timestamptz[] literal of instants in milliseconds ({@link IsoWriter}), nulls as NULL. */
export function timestampArray(values: readonly (number | null)[]): string {
  const iso = new IsoWriter();
  let text = '{';
  for (let i = 0; i < values.length; i++) {
    if (i > 0) text += ',';
    const ms = values[i];
    text += ms === null || ms === undefined ? 'NULL' : iso.format(ms);
  }
  return `${text}}`;
}

/** What COPY's text format escapes inside a column. */
const COPY_SPECIAL = /[\\\n\r\t]/g;
const COPY_ESCAPES: Record<string, string> = { '\\': '\\\\', '\n': '\\n', '\r': '\\r', '\t': '\\t' };

/** A value as a column of COPY's text format. */
function copyText(value: string): string {
  return value.replace(COPY_SPECIAL, (c) => COPY_ESCAPES[c]!);
}

const NO_BYTES = Buffer.alloc(0);

const COPY_UNESCAPES: Record<string, string> = { '\\': '\\', n: '\n', r: '\r', t: '\t' };

/** The payload's text and event time (ms, null for `\N`) of one line {@link CopyRows} wrote. */
export function copyRowRecord(line: Buffer): { text: string; eventTime: number | null } {
  const row = line.toString('utf8');
  const payloadStart = row.indexOf('\t') + 1;
  const payloadEnd = row.indexOf('\t', payloadStart);
  const timeEnd = row.indexOf('\t', payloadEnd + 1);
  const time = row.slice(payloadEnd + 1, timeEnd);
  return {
    text: row.slice(payloadStart, payloadEnd).replace(/\\([\\nrt])/g, (_, c: string) => COPY_UNESCAPES[c]!),
    eventTime: time === '\\N' ? null : Date.parse(time),
  };
}

/** The rows (lines, without their `\n`) of COPY text-format bytes. */
export function copyLines(chunks: readonly Buffer[]): Buffer[] {
  const lines: Buffer[] = [];
  for (const bytes of chunks) {
    let start = 0;
    for (let end = bytes.indexOf(LF); end !== -1; end = bytes.indexOf(LF, start)) {
      lines.push(bytes.subarray(start, end));
      start = end + 1;
    }
  }
  return lines;
}

/**
 * One window's rows for RecordsCopy: each kept record a line `source, payload, event_time,
 * window_start` (tab-separated, UTF-8), the payload its exact text from the page.
 */
export class CopyRows {
  private readonly prefixText: string;
  private readonly suffixText: string;
  private readonly prefix: Buffer;
  private readonly suffix: Buffer;
  private readonly between: Buffer;
  private readonly iso = new IsoWriter();
  /** The buffer {@link of} is filling. */
  private out: Buffer = NO_BYTES;

  constructor(source: string, window: Window) {
    this.prefixText = `${copyText(source)}\t`;
    this.suffixText = `\t${new Date(window.start).toISOString()}\n`;
    this.prefix = Buffer.from(this.prefixText, 'utf8');
    this.suffix = Buffer.from(this.suffixText, 'utf8');
    this.between = Buffer.concat([this.suffix, this.prefix]);
  }

  /** @throws {InvalidArgumentError} when the page's text holds no `data` array covering its kept positions. */
  of(page: PageRows): Buffer {
    const { keep, eventTimes } = page;
    if (!('text' in page)) {
      let text = '';
      for (let k = 0; k < keep.length; k++) text += this.row(JSON.stringify(page.records[keep[k]!]), eventTimes[k] ?? null);
      return Buffer.from(text, 'utf8');
    }
    const bytes = page.bytes ?? Buffer.from(page.text, 'utf8');
    const scan = pageByteSpans(bytes);
    const spans = scan?.spans;
    if (scan === undefined || spans === undefined || keep[keep.length - 1]! >= spans.length / 2) {
      throw new InvalidArgumentError('a page to store has no data array holding its records in its text');
    }
    // No backslash, tab, LF or CR in any record: no payload needs COPY's escaping.
    const plain = !scan.escapes && !scan.controls;
    let size = 0;
    for (let k = 0; k < keep.length; k++) size += spans[2 * keep[k]! + 1]! - spans[2 * keep[k]!]!;
    const fixed = this.prefix.length + 1 + MAX_ISO_BYTES + this.suffix.length;
    const out = Buffer.allocUnsafe((plain ? size : 2 * size) + keep.length * fixed);
    this.out = out;
    let at = this.prefix.copy(out, 0);
    // Where `between` was first written: later rows copy it from there.
    let between = -1;
    const betweenLength = this.between.length;
    for (let k = 0; k < keep.length; k++) {
      const start = spans[2 * keep[k]!]!;
      const end = spans[2 * keep[k]! + 1]!;
      if (between >= 0) {
        out.copyWithin(at, between, between + betweenLength);
        at += betweenLength;
      } else if (k > 0) {
        between = at;
        at += this.between.copy(out, at);
      }
      at = plain ? at + bytes.copy(out, at, start, end) : this.copyEscaped(bytes, start, end, at);
      out[at++] = TAB;
      const ms = eventTimes[k] ?? null;
      if (ms === null) {
        out[at++] = BACKSLASH;
        out[at++] = LETTER_N;
      } else {
        at = this.iso.write(out, at, ms);
      }
    }
    at += this.suffix.copy(out, at);
    this.out = NO_BYTES; // not held here until the next page
    return out.subarray(0, at);
  }

  /** {@link copyText} of bytes [start, end) of `from` into {@link out} at `at`; returns the index after it. */
  private copyEscaped(from: Buffer, start: number, end: number, at: number): number {
    const out = this.out;
    for (let i = start; i < end; i++) {
      const c = from[i]!;
      if (c === BACKSLASH) {
        out[at++] = BACKSLASH;
        out[at++] = BACKSLASH;
      } else if (c === LF) {
        out[at++] = BACKSLASH;
        out[at++] = LETTER_LOWER_N;
      } else if (c === CR) {
        out[at++] = BACKSLASH;
        out[at++] = LETTER_R;
      } else if (c === TAB) {
        out[at++] = BACKSLASH;
        out[at++] = LETTER_T;
      } else {
        out[at++] = c;
      }
    }
    return at;
  }

  private row(payload: string, eventTime: number | null): string {
    return `${this.prefixText}${copyText(payload)}\t${eventTime === null ? '\\N' : this.iso.format(eventTime)}${this.suffixText}`;
  }
}

const TAB = 0x09;
const LF = 0x0a;
const CR = 0x0d;
const BACKSLASH = 0x5c;
const LETTER_N = 0x4e;
const LETTER_T = 0x74;
const LETTER_R = 0x72;
const LETTER_LOWER_N = 0x6e;
