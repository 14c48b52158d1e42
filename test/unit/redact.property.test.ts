/**
 * Properties of the masking of secrets (src/redact.ts): whatever form a secret comes back in
 * (raw, URL- or form-encoded, Base64 alone or in a Basic header, JSON-escaped with or without `\/`
 * and `\uXXXX`), whole or cut anywhere, no 8 characters of any form are left; text that is not
 * made of a secret's forms is left as it was. The forms are written independently of the module,
 * in test/helpers/secret-forms.ts.
 */
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { REDACTED, clearSecrets, redactSecrets, registerSecret } from '../../src/redact.js';
import { allSecretWindows, echoForms, leaks, secretArbitrary, secretWindows } from '../helpers/secret-forms.js';

afterEach(() => clearSecrets());

/** Text around an echo: what an error body or a log line puts before and after it. */
const surrounding = fc.string({ maxLength: 12, unit: fc.constantFrom(...'{}":, xyz0123-_é\\'.split('')) });
const clientId = fc.constantFrom('id', 'client-1', 'my client', 'ünïcode:id');

describe('redactSecrets, for any secret of 8 characters or more', () => {
  it('leaves no 8 characters of any form of the secret, whole or cut anywhere, whatever surrounds it', () => {
    fc.assert(
      fc.property(secretArbitrary(), clientId, fc.nat(), fc.nat(), fc.nat(), surrounding, surrounding, (secret, id, formPick, from, length, before, after) => {
        const forms = echoForms(secret, id);
        const form = forms[formPick % forms.length]!;
        // The whole form, or a substring of at least 8 of the secret's own characters of it (an echo cut short).
        const start = form.foreign + (from % (form.text.length - form.foreign - 7));
        const end = start + 8 + (length % (form.text.length - start - 7));
        const echoed = length % 3 === 0 ? form.text : form.text.slice(start, end);
        const masked = redactSecrets(`${before}${echoed}${after}`, [secret]);
        expect(leaks(masked, allSecretWindows([secret], id)), `${form.name} of ${JSON.stringify(secret)} in ${JSON.stringify(masked)}`).toEqual([]);
        expect(masked).toContain(REDACTED);
      }),
      { numRuns: 300 },
    );
  });

  it('masks every form of every registered secret in one text, the secrets registered once', () => {
    fc.assert(
      fc.property(fc.uniqueArray(secretArbitrary(), { minLength: 1, maxLength: 3 }), clientId, (secrets, id) => {
        clearSecrets();
        for (const secret of secrets) registerSecret(secret);
        // A newline between a form's name and its text: no form holds one, so no window of a secret
        // can span the two (with a space, `: ` + the start of a form can equal a window from the
        // form's middle, as `😀 😀aaaaaaa`'s \u-escaped form does, and the space is rightly masked).
        const text = secrets.flatMap((secret) => echoForms(secret, id).map((form) => `${form.name}:\n${form.text}`)).join('\n');
        const masked = redactSecrets(text);
        expect(leaks(masked, allSecretWindows(secrets, id))).toEqual([]);
        // The names of the forms (text of no secret) are all still there.
        for (const secret of secrets) for (const form of echoForms(secret, id)) expect(masked).toContain(`${form.name}:\n`);
      }),
      { numRuns: 60 },
    );
  });

  it('never masks a text shorter than 8 characters', () => {
    fc.assert(
      fc.property(secretArbitrary(), fc.string({ maxLength: 7 }), (secret, text) => {
        clearSecrets();
        registerSecret(secret);
        expect(redactSecrets(text)).toBe(text);
        expect(redactSecrets(text, [secret])).toBe(text);
      }),
    );
  });

  it('leaves text made of other characters as it was', () => {
    // No form of these secrets holds a digit run or `-`: digits appear only after `%`, and Base64 of these characters mixes letters in.
    fc.assert(
      fc.property(secretArbitrary(), fc.string({ maxLength: 200, unit: fc.constantFrom(...'0123456789 -\n'.split('')) }), (secret, text) => {
        expect(redactSecrets(text, [secret])).toBe(text);
      }),
    );
  });

  it('masks a transient secret (a token) until more than 8 newer ones were registered', () => {
    registerSecret('first-token-0123456789', { transient: true });
    expect(redactSecrets('Bearer first-token-0123456789')).toBe(`Bearer ${REDACTED}`);
    for (let i = 0; i < 8; i++) registerSecret(`Other${i}QWERTYUIOP`, { transient: true });
    expect(redactSecrets('Bearer first-token-0123456789')).toBe('Bearer first-token-0123456789');
    expect(redactSecrets('Bearer Other7QWERTYUIOP')).toBe(`Bearer ${REDACTED}`);
  });
});

describe('redactSecrets, for a secret shorter than 8 characters', () => {
  it('masks its whole forms, and leaves text of other characters as it was', () => {
    fc.assert(
      fc.property(secretArbitrary(1, 7), clientId, fc.string({ maxLength: 40, unit: fc.constantFrom(...'0123456789 -'.split('')) }), (secret, id, text) => {
        expect(redactSecrets(text, [secret])).toBe(text);
        for (const form of echoForms(secret, id).filter((f) => f.foreign === 0)) {
          const masked = redactSecrets(`(${form.text})`, [secret]);
          expect(masked, `${form.name} of ${JSON.stringify(secret)}`).toBe(`(${REDACTED})`);
        }
      }),
    );
  });
});

describe('secretWindows (the test helper)', () => {
  it('skips only the client id part of a Basic header', () => {
    const [basic] = echoForms('S3cret/value', 'id').filter((f) => f.name === 'basic');
    // `id:` is three bytes, one whole Base64 group.
    expect(basic!.foreign).toBe(4);
    expect(secretWindows(basic!)[0]).toBe(basic!.text.slice(4, 12));
  });
});
