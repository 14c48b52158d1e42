/**
 * Masking of secrets in every text that leaves the process: log lines, `check`'s output, error
 * messages, the error texts the database keeps and the upstream's Prometheus text `/metrics` serves.
 *
 * A secret can come back in many forms: as given, URL- or form-encoded (in an echoed request
 * body), in Base64 (a Basic `Authorization` header echoed back, `client_id:secret`), JSON-escaped
 * (an error body quoting the request, `\"`, `\\`, `\/`, `\u00e9`), or cut short by a server or a
 * log excerpt. For a secret of {@link MIN_FRAGMENT_LENGTH} characters or more, every substring of
 * that length of every such form is masked wherever it appears (so a secret cut anywhere shows no
 * 8 characters of itself); a shorter secret is masked only where one of its forms appears whole,
 * not running into a word (a secret `t` leaves `client` and `secret` alone).
 *
 * The secrets to mask are registered once ({@link registerSecret}: the configuration's, each
 * token as it is issued, each secret read from a file); each one's forms and 8-character windows
 * are built once, and a text is scanned once, whatever the number of secrets and forms (a rolling
 * hash over the text, checked against a bit table, then against the windows).
 *
 * A leaf: imports nothing of the exporter.
 */

/** What {@link redactSecrets} puts in place of a secret, or of a run of text made of its fragments. */
export const REDACTED = '[redacted]';

/**
 * The shortest fragment of a secret's form that is masked wherever it appears; a secret shorter
 * than this is masked only where one of its forms appears whole.
 */
export const MIN_FRAGMENT_LENGTH = 8;

/** Transient secrets (tokens, secrets read from a file at each use) kept at most; older ones are forgotten first. */
export const MAX_TRANSIENT_SECRETS = 8;

/** `application/x-www-form-urlencoded` as URLSearchParams writes it: space as `+`, `*-._` kept, the rest percent-encoded. */
function formEncode(value: string): string {
  return new URLSearchParams({ v: value }).toString().slice(2);
}

/** `\uXXXX` for every UTF-16 code unit outside ASCII, as some JSON writers escape them, with lower- or upper-case hex. */
function unicodeEscaped(json: string, upper: boolean): string {
  return json.replace(/[^\x20-\x7f]/g, (c) => {
    const hex = c.charCodeAt(0).toString(16).padStart(4, '0');
    return `\\u${upper ? hex.toUpperCase() : hex}`;
  });
}

/** Base64 of `bytes` as they would be encoded after `offset` (0, 1 or 2) other bytes: the characters that depend on `bytes` alone. */
function base64At(bytes: Buffer, offset: number): string {
  const text = Buffer.concat([Buffer.alloc(offset), bytes]).toString('base64');
  return offset === 0 ? text : text.slice(offset + 1);
}

/**
 * Every form in which `secret` may come back from a server or be written by a library: the
 * secret itself, percent-encoded (encodeURIComponent, upper- and lower-case hex) and form-encoded
 * (`+` for space); each of those in Base64 and Base64url, at each of the three byte alignments a
 * prefix such as `client_id:` can give it (so a Basic header for any client id holds one of them),
 * and percent-encoded; and each of all these JSON-escaped (as JSON.stringify writes it inside the
 * quotes, with `\/` for `/`, with `\uXXXX` for non-ASCII, or both) and escaped as a Prometheus HELP
 * text (`\\`, `\n`).
 *
 * @param secret any non-empty string.
 * @param whole only the forms a short secret is masked by: no Base64 at a shifted alignment, whose
 *   characters are a few of the secret's bits and would mask ordinary words.
 * @returns the distinct forms, the secret first.
 */
export function secretForms(secret: string, whole = false): string[] {
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

/** Multiplier of the rolling hash over a window of {@link MIN_FRAGMENT_LENGTH} UTF-16 code units. */
const BASE = 0x01000193;
/** BASE to the power MIN_FRAGMENT_LENGTH − 1, modulo 2^32: the weight of a window's first character. */
const BASE_TOP = Array.from({ length: MIN_FRAGMENT_LENGTH - 1 }).reduce<number>((power) => Math.imul(power, BASE), 1);
/** Bits of the table of window hashes (2^20 bits, 128 KiB): few false hits for a few hundred thousand windows. */
const TABLE_BITS = 20;

/** The table's bit for a window's rolling hash: its mixed top bits, since a polynomial hash's low bits are weak. */
function tableBit(hash: number): number {
  return Math.imul(hash, 0x9e3779b1) >>> (32 - TABLE_BITS);
}

/** A letter, digit or `_` in any script: what a short secret's occurrence must not run into to count as whole. */
const WORD_CHARACTER = '[\\p{L}\\p{N}_]';

/** Masks one set of secrets: built once, used for every text. */
class Masker {
  /** Every window of MIN_FRAGMENT_LENGTH code units of every form of every long secret. */
  readonly #windows = new Set<string>();
  readonly #table = new Uint32Array(2 ** TABLE_BITS / 32);
  /** The whole forms of the short secrets, longest first; undefined without short secrets. */
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

  /** `text` with every span made of the secrets' fragments (long secrets) or whole forms (short ones) replaced by {@link REDACTED}. */
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

  /** The spans of `text` covered by windows of the long secrets' forms, overlapping and adjacent windows joined. */
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

/** The rolling hash of the MIN_FRAGMENT_LENGTH code units of `text` from `from`. */
function windowHash(text: string, from: number): number {
  let hash = 0;
  for (let i = from; i < from + MIN_FRAGMENT_LENGTH; i++) hash = (Math.imul(hash, BASE) + text.charCodeAt(i)) | 0;
  return hash;
}

/** One pattern for whole occurrences of `forms`: not starting (ending) inside a word where the form starts (ends) with a word character. */
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

/** Forms of the secrets seen lately, so a masker rebuilt after a token renewal does not encode every secret again. */
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

/** The registered secrets: the lasting ones (configuration) and the transient ones (tokens), oldest first. */
const lasting = new Set<string>();
const transient = new Set<string>();
/** Maskers by the extra secrets a call passed (`''`: none), for the registered secrets as they are now. */
let maskers = new Map<string, Masker>();
const MASKERS_CACHE_SIZE = 16;

/**
 * Registers a secret to be masked in every text {@link redactSecrets} masks from now on, in all
 * its forms ({@link secretForms}).
 *
 * @param value the secret; an empty string is ignored.
 * @param options.transient a value that is replaced over time (an access token, a secret read from
 *   a file at each use): only the last {@link MAX_TRANSIENT_SECRETS} such values are kept, so a
 *   long-running process does not collect every token it was ever issued.
 */
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

/** Forgets every registered secret (tests). */
export function clearSecrets(): void {
  lasting.clear();
  transient.clear();
  maskers = new Map();
}

/**
 * The last line of defence for every text that leaves the process: masks each registered secret
 * ({@link registerSecret}) and each of `secrets`, in all their forms, in one scan of `text`.
 *
 * For a secret of {@link MIN_FRAGMENT_LENGTH} characters or more, every run of text made of
 * windows of that length of its forms (raw, URL- and form-encoded, Base64 and Base64url at any
 * alignment, JSON-escaped with or without `\/` and `\uXXXX`) is replaced by one {@link REDACTED};
 * so no 8 characters of any form are left, even of a secret cut short. A shorter secret's forms
 * are masked only where one appears whole, not starting or ending inside a word (a secret `t`
 * leaves `client` alone but is masked in `secret t refused`). The output is never looked into
 * again: one pass, whatever the secrets.
 *
 * @param text any string.
 * @param secrets secrets to mask besides the registered ones; empty strings are ignored.
 * @returns `text` with each span masked; `text` itself when there is nothing to mask.
 */
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

/** The write functions {@link maskWrites} made, so a stream is wrapped once. */
const maskingWrites = new WeakSet<object>();

/**
 * Puts {@link redactSecrets} in front of `stream.write`, for a process's stdout and stderr: the
 * last line of defence for what no logger or message builder saw (an unexpected error's stack).
 * A string chunk is masked; a byte chunk is masked as UTF-8 text and written as text only when
 * something was masked. Idempotent.
 *
 * @param stream anything with a Node-style `write(chunk, encoding?, callback?)`.
 */
export function maskWrites(stream: { write: (...args: never[]) => boolean }): void {
  const write = stream.write as unknown as (chunk: unknown, ...rest: unknown[]) => boolean;
  if (maskingWrites.has(write)) return;
  const masking = function (this: unknown, chunk: unknown, ...rest: unknown[]): boolean {
    if (typeof chunk === 'string') return write.call(this, redactSecrets(chunk), ...rest);
    if (chunk instanceof Uint8Array && (lasting.size > 0 || transient.size > 0)) {
      const text = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength).toString('utf8');
      const masked = redactSecrets(text);
      // Written as text from here on: an encoding given with the bytes no longer applies.
      if (masked !== text) return write.call(this, masked, ...(typeof rest[0] === 'string' ? ['utf8', ...rest.slice(1)] : rest));
    }
    return write.call(this, chunk, ...rest);
  };
  maskingWrites.add(masking);
  (stream as { write: unknown }).write = masking;
}
