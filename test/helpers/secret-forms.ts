/**
 * How a secret can come back from a hostile server, written independently of src/redact.ts, and a
 * fast-check generator of secrets that hold every character that changes in one of those forms.
 * Shared by test/unit/redact.property.test.ts and test/integration/secret-echo.test.ts.
 */
import fc from 'fast-check';

/** `application/x-www-form-urlencoded`: space as `+`. */
export function formEncode(value: string): string {
  return new URLSearchParams({ v: value }).toString().slice(2);
}

/** JSON.stringify without the quotes; `slash` writes `/` as `\/`, `unicode` every non-ASCII code unit as `\uXXXX`. */
export function jsonEscape(value: string, options: { slash?: boolean; unicode?: boolean } = {}): string {
  let text = JSON.stringify(value).slice(1, -1);
  if (options.unicode === true) text = text.replace(/[^\x20-\x7f]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
  if (options.slash === true) text = text.replaceAll('/', '\\/');
  return text;
}

export function base64(value: string): string {
  return Buffer.from(value, 'utf8').toString('base64');
}

/** One form a secret comes back in, and the part of it that is not the secret's (a Basic header's `client_id:`), in characters from the start. */
export interface Form {
  name: string;
  text: string;
  /** Characters at the start that depend on something else than the secret (the client id in a Basic header); windows wholly inside them are not the secret's. */
  foreign: number;
}

/**
 * Every form of `secret` a hostile server may send back: raw, encodeURIComponent, form-encoded,
 * Base64 alone and in a Basic header `id:secret` (both form-encoded first, as RFC 6749 asks), and
 * each of these JSON-escaped as JSON.stringify writes it, with `\/`, and with `\uXXXX`.
 */
export function echoForms(secret: string, clientId: string): Form[] {
  const prefix = `${formEncode(clientId)}:`;
  const prefixBytes = Buffer.byteLength(prefix);
  // The characters of base64(prefix + secret) that depend on the prefix alone, or on it in part.
  const foreign = Math.floor(prefixBytes / 3) * 4 + (prefixBytes % 3 === 0 ? 0 : (prefixBytes % 3) + 1);
  const bases: Form[] = [
    { name: 'raw', text: secret, foreign: 0 },
    { name: 'encodeURIComponent', text: encodeURIComponent(secret), foreign: 0 },
    { name: 'form-encoded', text: formEncode(secret), foreign: 0 },
    { name: 'base64', text: base64(secret), foreign: 0 },
    { name: 'basic', text: Buffer.from(prefix + formEncode(secret), 'utf8').toString('base64'), foreign },
  ];
  const forms: Form[] = [];
  for (const base of bases) {
    forms.push(base);
    for (const [name, options] of [
      ['json', {}],
      ['json-slash', { slash: true }],
      ['json-unicode', { slash: true, unicode: true }],
    ] as const) {
      // Escaping is character by character: the foreign start escapes to a foreign start.
      forms.push({
        name: `${name}(${base.name})`,
        text: jsonEscape(base.text, options),
        foreign: jsonEscape(base.text.slice(0, base.foreign), options).length,
      });
    }
  }
  return forms;
}

/** Every substring of `length` characters of `form` made of the secret's own characters (after its foreign start). */
export function secretWindows(form: Form, length = 8): string[] {
  const windows: string[] = [];
  for (let i = form.foreign; i + length <= form.text.length; i++) windows.push(form.text.slice(i, i + length));
  return windows;
}

/** The windows of every form of every secret, for asserting that none is left in an output. */
export function allSecretWindows(secrets: readonly string[], clientId: string): Set<string> {
  const all = new Set<string>();
  for (const secret of secrets) for (const form of echoForms(secret, clientId)) for (const w of secretWindows(form)) all.add(w);
  return all;
}

/** The windows of `windows` that occur in `text`, for a readable failure. */
export function leaks(text: string, windows: ReadonlySet<string>): string[] {
  const found = new Set<string>();
  for (let i = 0; i + 8 <= text.length; i++) {
    const w = text.slice(i, i + 8);
    if (windows.has(w)) found.add(w);
  }
  return [...found];
}

/** Characters a secret is made of: letters, the ones every encoding changes (`+ / = & " \ %`, space), and non-ASCII (an accent, CJK, an emoji's surrogate pair). */
export const SECRET_CHARACTERS = [...'abcXYZ', '+', '/', '=', '&', '"', '\\', '%', ' ', 'é', '日', '😀', ':', '@'];

/** A secret of `minLength` to `maxLength` characters (code points) drawn from {@link SECRET_CHARACTERS}, at least one of them a letter. */
export function secretArbitrary(minLength = 8, maxLength = 32): fc.Arbitrary<string> {
  return fc
    .array(fc.constantFrom(...SECRET_CHARACTERS), { minLength, maxLength })
    .map((chars) => chars.join(''))
    .filter((s) => /[a-zA-Z]/.test(s));
}
