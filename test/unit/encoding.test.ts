/**
 * Content codings of E6/E7 bodies (src/upstream/encoding.ts): gzip, deflate (zlib or raw) and br
 * decoded, the last applied first; an unknown coding, corrupt bytes and a body that decodes past
 * the cap each a ContentDecodingError of its own fault.
 */
import zlib from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { ContentDecodingError, contentCodings, decodeContent } from '../../src/upstream/encoding.js';

const BODY = Buffer.from(JSON.stringify({ pageNumber: 1, pageSize: 1000, totalRecords: 1, totalPages: 1, data: [{ id: 1, note: 'é😀' }] }));
const CAP = 64 * 1024 * 1024;

async function fault(promise: Promise<unknown>): Promise<ContentDecodingError> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ContentDecodingError);
  return err as ContentDecodingError;
}

describe('contentCodings', () => {
  it('lists the codings in the order applied, lower-cased, without identity', () => {
    expect(contentCodings(undefined)).toEqual([]);
    expect(contentCodings('identity')).toEqual([]);
    expect(contentCodings(' GZip ')).toEqual(['gzip']);
    expect(contentCodings('deflate, br')).toEqual(['deflate', 'br']);
    expect(contentCodings(['gzip', 'identity, br'])).toEqual(['gzip', 'br']);
  });
});

describe('decodeContent', () => {
  it.each([
    ['gzip', zlib.gzipSync(BODY)],
    ['x-gzip', zlib.gzipSync(BODY)],
    ['deflate', zlib.deflateSync(BODY)],
    ['deflate', zlib.deflateRawSync(BODY)], // raw deflate under the name deflate, as some servers send it
    ['br', zlib.brotliCompressSync(BODY)],
    ['gzip, br', zlib.brotliCompressSync(zlib.gzipSync(BODY))],
  ])('decodes %s', async (header, coded) => {
    expect(Buffer.from(await decodeContent(coded, header, CAP)).equals(BODY)).toBe(true);
  });

  it('returns the body itself without a coding, and an empty body as it is', async () => {
    expect(await decodeContent(BODY, undefined, CAP)).toBe(BODY);
    expect(await decodeContent(BODY, 'identity', CAP)).toBe(BODY);
    const empty = new Uint8Array(0);
    expect(await decodeContent(empty, 'gzip', CAP)).toBe(empty);
  });

  it('refuses a coding it does not know before decoding anything', async () => {
    const err = await fault(decodeContent(zlib.gzipSync(BODY), 'gzip, zstd', CAP));
    expect(err).toMatchObject({ fault: 'unknown', coding: 'zstd' });
  });

  it.each([
    ['gzip', Buffer.from('{"not":"gzip"}')],
    ['gzip', zlib.gzipSync(BODY).subarray(0, 20)], // cut short
    ['br', Buffer.from([0xff, 0xff, 0xff, 0xff])],
    ['deflate', Buffer.from([0x78, 0x9c, 0xff, 0xff, 0xff])],
  ])('names bytes not valid in %s as corrupt', async (header, coded) => {
    const err = await fault(decodeContent(coded, header, CAP));
    expect(err.fault).toBe('corrupt');
    expect(err.message).toContain(`not valid ${header}`);
  });

  it.each([
    ['gzip', (b: Buffer) => zlib.gzipSync(b)],
    ['deflate', (b: Buffer) => zlib.deflateSync(b)],
    ['br', (b: Buffer) => zlib.brotliCompressSync(b, { params: { [zlib.constants.BROTLI_PARAM_QUALITY]: 1 } })],
  ])('stops a %s body that decodes past the cap without decoding it all', async (header, compress) => {
    // 16 MiB of zeros compress to a few KiB: a small bomb against a 1 MiB cap.
    const bomb = compress(Buffer.alloc(16 * 1024 * 1024));
    expect(bomb.length).toBeLessThan(64 * 1024);
    const err = await fault(decodeContent(bomb, header, 1024 * 1024));
    expect(err).toMatchObject({ fault: 'too_large', coding: header });
    expect(Buffer.from(await decodeContent(compress(Buffer.alloc(1024 * 1024)), header, 1024 * 1024))).toHaveLength(1024 * 1024);
  });
});
