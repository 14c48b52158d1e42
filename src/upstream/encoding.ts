/**
 * Content codings of E6 and E7 responses (RFC 9110 §8.4): gzip asked for; gzip, deflate and br
 * decoded, asked or not. Each decoded stage is bounded like the received body (no zip bomb).
 * Design: docs/design/upstream-requests.md ("Content codings").
 */
import zlib from 'node:zlib';

/** gzip, which every server and proxy can produce (the reference names no coding). */
export const ACCEPT_ENCODING = 'gzip';

export type DecodeFault = 'unknown' | 'corrupt' | 'too_large';

/** http.ts turns it into the request's error. */
export class ContentDecodingError extends Error {
  constructor(
    readonly fault: DecodeFault,
    /** Lower-cased. */
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

/** Off the event loop: a large page does not stall scrapes while it inflates. */
function decoder(fn: ZlibFunction): Decoder {
  return (body, options) => new Promise((resolve, reject) => fn(body, options, (err, out) => (err ? reject(err) : resolve(out))));
}

const gunzip = decoder(zlib.gunzip);
const inflate = decoder(zlib.inflate);
const inflateRaw = decoder(zlib.inflateRaw);
const brotliDecompress = decoder(zlib.brotliDecompress);

/** `deflate` is zlib (RFC 9110 §8.4.1.2), but some servers send it raw, as browsers tolerate. */
const inflateEither: Decoder = (body, options) => {
  const zlibHeader = body.length >= 2 && (body[0]! & 0x0f) === 8 && ((body[0]! << 8) | body[1]!) % 31 === 0;
  return zlibHeader ? inflate(body, options) : inflateRaw(body, options);
};

/** `x-gzip`: gzip's old alias (RFC 9110 §8.4.1.3). */
const DECODERS: Readonly<Record<string, Decoder>> = { gzip: gunzip, 'x-gzip': gunzip, deflate: inflateEither, br: brotliDecompress };

/** The codings in the order applied, lower-cased, without `identity`; `header` as undici gives it. */
export function contentCodings(header: string | string[] | undefined): string[] {
  if (header === undefined) return [];
  const text = Array.isArray(header) ? header.join(',') : header;
  return text
    .split(',')
    .map((coding) => coding.trim().toLowerCase())
    .filter((coding) => coding !== '' && coding !== 'identity');
}

/**
 * Undoes each coding, the last first, no stage over `maxBytes`; `body` itself when uncoded or empty.
 * @throws {ContentDecodingError} `unknown` (checked before decoding), `corrupt`, `too_large`.
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
