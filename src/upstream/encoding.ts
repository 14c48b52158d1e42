/**
 * Content codings of E6 and E7 responses (RFC 9110 §8.4): the client asks for gzip, and decodes
 * whatever of gzip, deflate and br a server sends, asked or not, before the body is read as text.
 * The decoded size is bounded like the received one: a small body that inflates without end (a
 * "zip bomb") fails its request instead of filling memory.
 */
import zlib from 'node:zlib';

/**
 * The Accept-Encoding of E6 and E7 requests: gzip, which every HTTP server and proxy can produce.
 * The reference names no coding; a server that ignores the header answers uncompressed, as before.
 */
export const ACCEPT_ENCODING = 'gzip';

/** Why a body could not be decoded: a coding the client does not know, bytes not valid in their coding, or more than the cap once decoded. */
export type DecodeFault = 'unknown' | 'corrupt' | 'too_large';

/** A response body that could not be decoded by its Content-Encoding; http.ts turns it into the request's error. */
export class ContentDecodingError extends Error {
  constructor(
    readonly fault: DecodeFault,
    /** The coding that failed, lower-cased, as the header named it. */
    readonly coding: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'ContentDecodingError';
  }
}

type Decoder = (body: Uint8Array, options: { maxOutputLength: number }) => Promise<Buffer>;
type ZlibFunction = (body: Uint8Array, options: { maxOutputLength: number }, callback: (err: Error | null, out: Buffer) => void) => void;

/** zlib's asynchronous form, off the event loop: a large page does not stall scrapes while it inflates. */
function decoder(fn: ZlibFunction): Decoder {
  return (body, options) => new Promise((resolve, reject) => fn(body, options, (err, out) => (err ? reject(err) : resolve(out))));
}

const gunzip = decoder(zlib.gunzip);
const inflate = decoder(zlib.inflate);
const inflateRaw = decoder(zlib.inflateRaw);
const brotliDecompress = decoder(zlib.brotliDecompress);

/**
 * `deflate` is the zlib format (RFC 9110 §8.4.1.2), but some servers send raw deflate under that
 * name, as browsers tolerate: a body that does not start with a zlib header is read as raw.
 */
const inflateEither: Decoder = (body, options) => {
  const zlibHeader = body.length >= 2 && (body[0]! & 0x0f) === 8 && ((body[0]! << 8) | body[1]!) % 31 === 0;
  return zlibHeader ? inflate(body, options) : inflateRaw(body, options);
};

/** The codings decoded, by their name in Content-Encoding (`x-gzip` is gzip's old alias, RFC 9110 §8.4.1.3). */
const DECODERS: Readonly<Record<string, Decoder>> = { gzip: gunzip, 'x-gzip': gunzip, deflate: inflateEither, br: brotliDecompress };

/**
 * The codings of a Content-Encoding header, in the order the server applied them, lower-cased,
 * `identity` and empty items left out.
 *
 * @param header the header's value as undici gives it (a list when the header was repeated).
 */
export function contentCodings(header: string | string[] | undefined): string[] {
  if (header === undefined) return [];
  const text = Array.isArray(header) ? header.join(',') : header;
  return text
    .split(',')
    .map((coding) => coding.trim().toLowerCase())
    .filter((coding) => coding !== '' && coding !== 'identity');
}

/**
 * Decodes a response body by its Content-Encoding: each coding undone, the last applied first.
 *
 * @param body the bytes as received.
 * @param header the response's Content-Encoding.
 * @param maxBytes the most bytes any decoded stage may hold (the response body cap).
 * @returns `body` itself when it has no coding (or is empty: a 204 or a HEAD answer); else the
 *   decoded bytes.
 * @throws {ContentDecodingError} `unknown` for a coding other than gzip, x-gzip, deflate, br and
 *   identity (checked before anything is decoded), `corrupt` for bytes not valid in their coding
 *   (truncated, or not compressed at all), `too_large` when a stage would exceed `maxBytes`.
 */
export async function decodeContent(body: Uint8Array, header: string | string[] | undefined, maxBytes: number): Promise<Uint8Array> {
  const codings = contentCodings(header);
  const unknown = codings.find((coding) => DECODERS[coding] === undefined);
  if (unknown !== undefined)
    throw new ContentDecodingError('unknown', unknown, `Content-Encoding ${unknown} is not one the client decodes (gzip, deflate, br)`);
  let bytes = body;
  for (const coding of codings.reverse()) {
    if (bytes.length === 0) return bytes;
    try {
      bytes = await DECODERS[coding]!(bytes, { maxOutputLength: maxBytes });
    } catch (err) {
      if ((err as { code?: unknown }).code === 'ERR_BUFFER_TOO_LARGE') {
        throw new ContentDecodingError('too_large', coding, `body larger than ${maxBytes} bytes once decoded from ${coding}`, { cause: err });
      }
      throw new ContentDecodingError('corrupt', coding, `body is not valid ${coding} (${(err as Error).message})`, { cause: err });
    }
  }
  return bytes;
}
