/**
 * storableText (src/errors.ts): what the ledger stores of an error is text PostgreSQL always takes
 * (no NUL, valid UTF-8) and bounded, so that recording a failure never fails on its message.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MAX_STORED_TEXT_LENGTH, storableText } from '../../src/errors.js';

/** Whether `text` is valid UTF-16 (no lone surrogate), so that its UTF-8 encoding loses nothing. */
function wellFormed(text: string): boolean {
  return Buffer.from(text, 'utf8').toString('utf8') === text;
}

describe('storableText', () => {
  it('leaves ordinary text as it is', () => {
    const text = 'E6 http://127.0.0.1/analytics: HTTP 503 ← socket hang up (ECONNRESET) 😀\n\tline two';
    expect(storableText(text)).toBe(text);
  });

  it('replaces NUL and lone surrogates with U+FFFD and keeps surrogate pairs', () => {
    expect(storableText('a\u0000b')).toBe('a\ufffdb');
    expect(storableText('x\ud83dy')).toBe('x\ufffdy');
    expect(storableText('x\ude00y')).toBe('x\ufffdy');
    expect(storableText('\ude00\ud83d')).toBe('\ufffd\ufffd');
    expect(storableText('ok \ud83d\ude00 \ud83d')).toBe('ok \ud83d\ude00 \ufffd');
  });

  it('quotes what JSON.parse said of a gzip body readably, NUL bytes and all', () => {
    let message = '';
    try {
      JSON.parse(Buffer.from([0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03]).toString('utf8'));
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toContain('\u0000');
    const stored = storableText(message);
    expect(stored).not.toContain('\u0000');
    expect(wellFormed(stored)).toBe(true);
  });

  it('cuts a long text at the bound, saying how long it was, and never inside a surrogate pair', () => {
    const long = 'e'.repeat(10_000);
    const stored = storableText(long);
    expect(stored).toHaveLength(MAX_STORED_TEXT_LENGTH);
    expect(stored).toMatch(/… \[cut, 10000 characters in all\]$/);
    expect(stored.startsWith('e'.repeat(3900))).toBe(true);
    // A pair straddling the cut is dropped whole.
    const pairs = '😀'.repeat(100);
    for (let max = 30; max < 60; max++) {
      const cut = storableText(pairs, max);
      expect(cut.length).toBeLessThanOrEqual(max);
      expect(wellFormed(cut)).toBe(true);
    }
  });

  it('holds for any string and any bound: no NUL, valid UTF-8, within the bound, unchanged when already storable and short', () => {
    const text = fc.oneof(
      fc.string({ unit: 'binary' }),
      fc.string({ unit: 'grapheme' }),
      fc.string({ unit: fc.constantFrom('\u0000', '\ud83d', '\ude00', 'a', '…') }),
    );
    fc.assert(
      fc.property(text, fc.integer({ min: 1, max: 200 }), (input, max) => {
        const stored = storableText(input, max);
        expect(stored.length).toBeLessThanOrEqual(max);
        expect(stored).not.toContain('\u0000');
        expect(wellFormed(stored)).toBe(true);
        if (input.length <= max && wellFormed(input) && !input.includes('\u0000')) expect(stored).toBe(input);
        else if (input.length <= max) expect(stored).toHaveLength(input.length);
      }),
      { numRuns: 500 },
    );
  });
});
