/**
 * gzip of E6 and E7 bodies (`--gzip`): an upstream that compresses, whether asked to or not, so a
 * client can be shown to decode `Content-Encoding: gzip`. The reference says nothing about
 * content codings; HTTP's rules are RFC 9110 §8.4 and §12.5.3.
 */

/**
 * When E6/E7 bodies are compressed: `off` never (the default); `auto` when the request's
 * `Accept-Encoding` allows gzip, as a well-behaved server does; `on` always, even to a client
 * that did not ask (a misbehaving upstream, or a proxy that compresses regardless).
 */
export const GZIP_MODES = ['off', 'on', 'auto'] as const;
export type GzipMode = (typeof GZIP_MODES)[number];

/**
 * Whether an `Accept-Encoding` header value allows gzip (RFC 9110 §12.5.3): `gzip` or `x-gzip`
 * with a q-value above 0, or `*` above 0 when gzip is not named. Absent header: false (the RFC
 * allows any coding then, but a server that compresses for a client that said nothing is `on`).
 */
export function acceptsGzip(header: string | string[] | undefined): boolean {
  if (header === undefined) return false;
  const text = Array.isArray(header) ? header.join(',') : header;
  let named: boolean | undefined;
  let star = false;
  for (const part of text.split(',')) {
    const [first = '', ...params] = part.toLowerCase().split(';');
    const coding = first.trim();
    const q = params.map((p) => /^\s*q\s*=\s*([\d.]+)\s*$/.exec(p)?.[1]).find((v) => v !== undefined);
    const allowed = q === undefined || Number(q) > 0;
    if (coding === 'gzip' || coding === 'x-gzip') named = (named ?? false) || allowed;
    else if (coding === '*') star = allowed;
  }
  return named ?? star;
}

/** Whether a response to a request with this `Accept-Encoding` is compressed under `mode`. */
export function shouldGzip(mode: GzipMode, acceptEncoding: string | string[] | undefined): boolean {
  return mode === 'on' || (mode === 'auto' && acceptsGzip(acceptEncoding));
}
