/**
 * Masking of secrets in every text that leaves the process, in every form a secret may come back
 * in (encoded, Base64, JSON-escaped, cut short). A secret of {@link MIN_FRAGMENT_LENGTH} or more
 * leaves no window of that length of any form; a shorter one is masked where a form stands whole.
 * One scan per text. A leaf: imports nothing of the exporter. Design: docs/design/secret-masking.md.
 */

export const REDACTED = '[redacted]';

/** The shortest fragment masked wherever it appears; shorter secrets are masked whole only. */
const MIN_FRAGMENT_LENGTH = 8;

/** Transient secrets kept at most, the oldest forgotten first. */
const MAX_TRANSIENT_SECRETS = 8;

/** As URLSearchParams writes it: space as `+`. */
function formEncode(value: string): string {
  return new URLSearchParams({ v: value }).toString().slice(2);
}

/** `\uXXXX` for every code unit outside ASCII, as some JSON writers escape them. */
function unicodeEscaped(json: string, upper: boolean): string {
  return json.replace(/[^\x20-\x7f]/g, (c) => {
    const hex = c.charCodeAt(0).toString(16).padStart(4, '0');
    return `\\u${upper ? hex.toUpperCase() : hex}`;
  });
}

/** The Base64 characters that depend on `bytes` alone when `offset` (0–2) bytes precede them. */
function base64At(bytes: Buffer, offset: number): string {
  const text = Buffer.concat([Buffer.alloc(offset), bytes]).toString('base64');
  return offset === 0 ? text : text.slice(offset + 1);
}

/** Every form `secret` may come back in, itself first (docs/design/secret-masking.md); `whole`: a short secret's. */
function secretForms(secret: string, whole = false): string[] {
  const plain = new Set([secret, encodeURIComponent(secret), formEncode(secret)]);
  for (const text of [...plain]) plain.add(text.replace(/%[0-9A-F]{2}/g, (hex) => hex.toLowerCase()));
  const encoded = new Set(plain);
  for (const text of plain) {
    const bytes = Buffer.from(text, 'utf8');
    for (const offset of whole ? [0] : [0, 1, 2]) {
      const base64 = base64At(bytes, offset);
      for (const form of [base64, base64.replaceAll('+', '-').replaceAll('/', '_').replace(/=+$/, '')]) {
        encoded.add(form);
        encoded.add(encodeURIComponent(form));
      }
    }
  }
  const forms = new Set<string>();
  for (const text of encoded) {
    const json = JSON.stringify(text).slice(1, -1);
    for (const escaped of [json, unicodeEscaped(json, false), unicodeEscaped(json, true)]) {
      forms.add(escaped);
      forms.add(escaped.replaceAll('/', '\\/'));
    }
    forms.add(text);
    forms.add(text.replaceAll('\\', '\\\\').replaceAll('\n', '\\n'));
  }
  forms.delete('');
  return [...forms];
}

/** Of the rolling hash over {@link MIN_FRAGMENT_LENGTH} code units. */
const BASE = 0x01000193;
/** The weight of a window's first character, modulo 2^32. */
const BASE_TOP = Array.from({ length: MIN_FRAGMENT_LENGTH - 1 }).reduce<number>((power) => Math.imul(power, BASE), 1);
/** 128 KiB: few false hits for a few hundred thousand windows. */
const TABLE_BITS = 20;

/** Mixed top bits: a polynomial hash's low bits are weak. */
function tableBit(hash: number): number {
  return Math.imul(hash, 0x9e3779b1) >>> (32 - TABLE_BITS);
}

/** What a short secret's occurrence must not run into. */
const WORD_CHARACTER = '[\\p{L}\\p{N}_]';

/** Masks one set of secrets: built once, used for every text. */
class Masker {
  /** Every window of every form of every long secret. */
  readonly #windows = new Set<string>();
  readonly #table = new Uint32Array(2 ** TABLE_BITS / 32);
  /** Short secrets' whole forms, longest first. */
  readonly #whole: RegExp | undefined;

  constructor(secrets: Iterable<string>) {
    const short: string[] = [];
    for (const secret of secrets) {
      if (secret.length < MIN_FRAGMENT_LENGTH) {
        short.push(...secretForms(secret, true));
        continue;
      }
      for (const form of formsOf(secret)) {
        for (let i = 0; i + MIN_FRAGMENT_LENGTH <= form.length; i++) this.#windows.add(form.slice(i, i + MIN_FRAGMENT_LENGTH));
      }
    }
    for (const window of this.#windows) {
      const bit = tableBit(windowHash(window, 0));
      this.#table[bit >>> 5]! |= 1 << (bit & 31);
    }
    this.#whole = short.length === 0 ? undefined : wholeFormsPattern(short);
  }

  mask(text: string): string {
    const spans = this.#fragmentSpans(text);
    if (this.#whole !== undefined) for (const m of text.matchAll(this.#whole)) spans.push([m.index, m.index + m[0].length]);
    if (spans.length === 0) return text;
    spans.sort((a, b) => a[0] - b[0]);
    let out = '';
    let at = 0;
    let [start, end] = spans[0]!;
    for (const [s, e] of spans) {
      if (s <= end) {
        end = Math.max(end, e);
        continue;
      }
      out += text.slice(at, start) + REDACTED;
      at = end;
      [start, end] = [s, e];
    }
    return out + text.slice(at, start) + REDACTED + text.slice(end);
  }

  /** Spans covered by windows, overlapping and adjacent ones joined. */
  #fragmentSpans(text: string): Array<[number, number]> {
    const spans: Array<[number, number]> = [];
    if (this.#windows.size === 0 || text.length < MIN_FRAGMENT_LENGTH) return spans;
    const table = this.#table;
    let hash = windowHash(text, 0);
    let start = -1;
    let end = -1;
    for (let i = 0; ; i++) {
      const bit = tableBit(hash);
      if ((table[bit >>> 5]! & (1 << (bit & 31))) !== 0 && this.#windows.has(text.slice(i, i + MIN_FRAGMENT_LENGTH))) {
        if (i > end) {
          if (end >= 0) spans.push([start, end]);
          start = i;
        }
        end = i + MIN_FRAGMENT_LENGTH;
      }
      const next = i + MIN_FRAGMENT_LENGTH;
      if (next >= text.length) break;
      hash = (Math.imul(hash - Math.imul(text.charCodeAt(i), BASE_TOP), BASE) + text.charCodeAt(next)) | 0;
    }
    if (end >= 0) spans.push([start, end]);
    return spans;
  }
}

function windowHash(text: string, from: number): number {
  let hash = 0;
  for (let i = from; i < from + MIN_FRAGMENT_LENGTH; i++) hash = (Math.imul(hash, BASE) + text.charCodeAt(i)) | 0;
  return hash;
}

/** Whole occurrences of `forms`, bounded where a form starts or ends with a word character. */
function wholeFormsPattern(forms: readonly string[]): RegExp {
  const word = new RegExp(`^${WORD_CHARACTER}$`, 'u');
  const alternatives = [...new Set(forms)]
    .sort((a, b) => b.length - a.length)
    .map((form) => {
      const chars = [...form];
      const before = word.test(chars[0]!) ? `(?<!${WORD_CHARACTER})` : '';
      const after = word.test(chars[chars.length - 1]!) ? `(?!${WORD_CHARACTER})` : '';
      return `${before}${form.replace(/[\\^$.*+?()[\]{}|/]/g, '\\$&')}${after}`;
    });
  return new RegExp(alternatives.join('|'), 'gu');
}

/** So a masker rebuilt after a token renewal does not encode every secret again. */
const formsCache = new Map<string, string[]>();
const FORMS_CACHE_SIZE = 64;

function formsOf(secret: string): string[] {
  let forms = formsCache.get(secret);
  if (forms === undefined) {
    forms = secretForms(secret);
    if (formsCache.size >= FORMS_CACHE_SIZE) formsCache.delete(formsCache.keys().next().value!);
    formsCache.set(secret, forms);
  }
  return forms;
}

/** Oldest first. */
const lasting = new Set<string>();
const transient = new Set<string>();
/** By the extra secrets a call passed (`''`: none). */
let maskers = new Map<string, Masker>();
const MASKERS_CACHE_SIZE = 16;

/** Masks `value` (not empty) from now on; `transient` (a token, a file's secret): only the last few are kept. */
export function registerSecret(value: string, options: { transient?: boolean } = {}): void {
  if (value === '' || lasting.has(value)) return;
  if (options.transient === true) {
    if (transient.has(value)) return;
    if (transient.size >= MAX_TRANSIENT_SECRETS) transient.delete(transient.values().next().value!);
    transient.add(value);
  } else {
    transient.delete(value);
    lasting.add(value);
  }
  maskers = new Map();
}

/** For tests. */
export function clearSecrets(): void {
  lasting.clear();
  transient.clear();
  maskers = new Map();
}

/** The last line of defence: registered secrets and `secrets`, all forms, masked in one scan; runs become {@link REDACTED}. */
export function redactSecrets(text: string, secrets: readonly string[] = []): string {
  if (text.length === 0) return text;
  const extra = secrets.filter((s) => s !== '' && !lasting.has(s) && !transient.has(s));
  if (extra.length === 0 && lasting.size === 0 && transient.size === 0) return text;
  const key = [...new Set(extra)].join('\u0000');
  let masker = maskers.get(key);
  if (masker === undefined) {
    masker = new Masker(new Set([...lasting, ...transient, ...extra]));
    if (maskers.size >= MASKERS_CACHE_SIZE) maskers.delete(maskers.keys().next().value!);
    maskers.set(key, masker);
  }
  return masker.mask(text);
}

/** So a stream is wrapped once. */
const maskingWrites = new WeakSet<object>();

/**
 * Puts {@link redactSecrets} in front of a Node-style `stream.write` (stdout, stderr), for what no
 * logger saw; a byte chunk is written as text only when something was masked. Idempotent.
 */
export function maskWrites(stream: { write: (...args: never[]) => boolean }): void {
  const write = stream.write as unknown as (chunk: unknown, ...rest: unknown[]) => boolean;
  if (maskingWrites.has(write)) return;
  const masking = function (this: unknown, chunk: unknown, ...rest: unknown[]): boolean {
    if (typeof chunk === 'string') return write.call(this, redactSecrets(chunk), ...rest);
    if (chunk instanceof Uint8Array && (lasting.size > 0 || transient.size > 0)) {
      const text = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength).toString('utf8');
      const masked = redactSecrets(text);
      // Now text: an encoding given with the bytes no longer applies.
      if (masked !== text) return write.call(this, masked, ...(typeof rest[0] === 'string' ? ['utf8', ...rest.slice(1)] : rest));
    }
    return write.call(this, chunk, ...rest);
  };
  maskingWrites.add(masking);
  (stream as { write: unknown }).write = masking;
}
