/**
 * The HTTP layer under the token and analytics clients: one undici Agent with
 * timeouts, keep-alive and (optionally) mutual TLS; one function that performs a
 * single request and turns every failure into a typed, classified error.
 */
import { isUtf8 } from 'node:buffer';
import { rootCertificates } from 'node:tls';
import { Agent, errors as undiciErrors, request, type Dispatcher } from 'undici';
import {
  AbortedError,
  ResponseTooLargeError,
  UpstreamBodyError,
  UpstreamError,
  UpstreamHttpError,
  UpstreamNetworkError,
  UpstreamTimeoutError,
  displayUrl,
  redactSecrets,
  type BodyReason,
  type Endpoint,
} from '../errors.js';
import { ContentDecodingError, contentCodings, decodeContent } from './encoding.js';
import type { TlsFiles } from './files.js';
import { parseRetryAfter } from './retry.js';

/** How long an idle keep-alive socket is kept for the next page. */
export const KEEP_ALIVE_TIMEOUT_MS = 30_000;

/**
 * Statuses worth another try. The reference names none: these are RFC 9110's transient ones and
 * 500, since E0's token request and E6/E7's GETs are safe to repeat and a one-off 500 otherwise
 * costs a whole sync period; attempts stay bounded by UPSTREAM_MAX_ATTEMPTS.
 */
export const RETRYABLE_STATUSES: ReadonlySet<number> = new Set([429, 500, 502, 503, 504]);

/** Network error codes after which a new attempt may succeed. TLS and DNS-name errors are final. */
const RETRYABLE_NETWORK_CODES = new Set([
  'ECONNRESET',
  'ECONNREFUSED',
  'EPIPE',
  'ETIMEDOUT',
  'EAI_AGAIN',
  'ENETUNREACH',
  'EHOSTUNREACH',
  'UND_ERR_SOCKET',
  'UND_ERR_CLOSED',
]);
/** undici's timeout codes, and what the request was waiting for when each fired (for messages). */
const TIMEOUT_PHASES: Readonly<Record<string, string>> = {
  UND_ERR_CONNECT_TIMEOUT: 'no connection',
  UND_ERR_HEADERS_TIMEOUT: 'no response headers',
  UND_ERR_BODY_TIMEOUT: 'the body stalled: no data',
};
/** Socket errors that, once the headers have arrived, mean the body was cut off. */
const CUT_OFF_CODES = new Set(['ECONNRESET', 'EPIPE', 'UND_ERR_SOCKET', 'UND_ERR_CLOSED']);

export interface AgentOptions {
  /** Connect, headers and body timeout, in milliseconds. */
  timeoutMs: number;
  /** Largest response body received, in bytes (UPSTREAM_MAX_BODY); pass the same to {@link send}, which bounds the decoded body by it. */
  maxBodyBytes: number;
  tls?: TlsFiles;
}

/**
 * Creates the dispatcher shared by E0, E6 and E7 requests, so a client certificate
 * (mutual TLS) is presented on the token request and the API requests alike.
 * A private CA from TLS_CA_FILE is trusted in addition to the public roots, not instead.
 */
export function createAgent(options: AgentOptions): Agent {
  const { tls = {} } = options;
  return new Agent({
    connectTimeout: options.timeoutMs,
    headersTimeout: options.timeoutMs,
    bodyTimeout: options.timeoutMs,
    keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS,
    maxResponseSize: options.maxBodyBytes,
    connect: {
      ...(tls.cert !== undefined ? { cert: tls.cert, key: tls.key } : {}),
      ...(tls.ca !== undefined ? { ca: [...rootCertificates, tls.ca] } : {}),
    },
  });
}

/** A response read whole. */
export interface RawResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  /** The body as text, after its Content-Encoding was undone (gzip, deflate, br: src/upstream/encoding.ts). */
  body: string;
  /**
   * The body's bytes (decoded from their Content-Encoding) after a UTF-8 byte order mark, of which `body` is the decoding: only with
   * `keepBytes`, and only when they are valid UTF-8 (else `body` holds U+FFFD where they are not).
   */
  bytes?: Buffer;
  /** Seconds from sending the request to the end of the body. */
  durationSeconds: number;
}

export interface SendOptions {
  dispatcher: Dispatcher;
  endpoint: Endpoint;
  method: 'GET' | 'POST';
  url: URL;
  headers?: Record<string, string>;
  body?: string;
  signal?: AbortSignal;
  /** The timeout the dispatcher applies (UPSTREAM_TIMEOUT), in milliseconds; named in timeout messages. */
  timeoutMs?: number;
  /**
   * The dispatcher's cap on a body as received (UPSTREAM_MAX_BODY, {@link AgentOptions.maxBodyBytes}), in
   * bytes: the decoded body is bounded by it too, and messages name it.
   */
  maxBodyBytes: number;
  /** Keep the body's bytes beside its text (RawResponse.bytes), for a caller that writes them on. */
  keepBytes?: boolean;
  /**
   * Sees a 2xx body's bytes as they are received, chunk by chunk (decoded from their
   * Content-Encoding first, then at once), and may throw to abandon the body: {@link send} then
   * stops reading, closes the connection and throws that error as it is (E7's limits, see
   * src/serve/scrape.ts).
   */
  inspect?: (chunk: Uint8Array) => void;
}

/** Path of the endpoint for messages: never the query string, never credentials. */
export function describeEndpoint(endpoint: Endpoint, url: URL): string {
  const labels: Record<Endpoint, string> = { token: 'E0', analytics: 'E6', prometheus: 'E7' };
  return `${labels[endpoint]} ${displayUrl(url)}`;
}

/**
 * Sends one request and reads the whole body, decoded from its Content-Encoding whether or not
 * the request asked for one. Does not retry and does not judge the status.
 *
 * @throws {UpstreamTimeoutError} for connect/headers/body timeouts; {@link UpstreamNetworkError} for
 *   socket, DNS and TLS failures (`retryable` when a new attempt may help); {@link ResponseTooLargeError}
 *   for a body over `maxBodyBytes` (UPSTREAM_MAX_BODY) as received or once decoded;
 *   {@link UpstreamBodyError} `content_encoding` for a Content-Encoding other than gzip, deflate and
 *   br (final) or a body not valid in its coding (retryable);
 *   {@link AbortedError} when `signal` aborted; what `inspect` threw, as it is.
 */
export async function send(options: SendOptions): Promise<RawResponse> {
  const started = performance.now();
  const where = describeEndpoint(options.endpoint, options.url);
  let headersReceived = false;
  /** What `options.inspect` threw, to be thrown as it is. */
  let refused: { err: unknown } | undefined;
  const inspect =
    options.inspect &&
    ((chunk: Uint8Array) => {
      try {
        options.inspect!(chunk);
      } catch (err) {
        refused = { err };
        throw err;
      }
    });
  try {
    const res = await request(options.url, {
      dispatcher: options.dispatcher,
      method: options.method,
      headers: options.headers,
      body: options.body,
      signal: options.signal,
    });
    headersReceived = true;
    const durationSeconds = () => (performance.now() - started) / 1000;
    const encoding = res.headers['content-encoding'];
    const coded = contentCodings(encoding).length > 0;
    // An error page is not what the inspector is for: its status says what went wrong.
    const inspecting = res.statusCode >= 200 && res.statusCode <= 299 ? inspect : undefined;
    if (options.keepBytes !== true && !coded && inspecting === undefined)
      return { status: res.statusCode, headers: res.headers, body: await res.body.text(), durationSeconds: durationSeconds() };
    let whole: Uint8Array;
    if (coded) {
      // The cap on what is received (the agent's maxResponseSize) holds for what it decodes to as well.
      whole = await decodeContent(await res.body.bytes(), encoding, options.maxBodyBytes);
      inspecting?.(whole);
    } else {
      whole = inspecting === undefined ? await res.body.bytes() : await readInspected(res.body, inspecting);
    }
    // Decoded as undici's text() decodes: a UTF-8 byte order mark skipped, invalid bytes as U+FFFD.
    if (options.keepBytes !== true)
      return { status: res.statusCode, headers: res.headers, body: new TextDecoder().decode(whole), durationSeconds: durationSeconds() };
    const bom = whole.length > 2 && whole[0] === 0xef && whole[1] === 0xbb && whole[2] === 0xbf ? 3 : 0;
    const bytes = Buffer.from(whole.buffer, whole.byteOffset + bom, whole.length - bom);
    return {
      status: res.statusCode,
      headers: res.headers,
      body: bytes.toString('utf8'),
      ...(isUtf8(bytes) ? { bytes } : {}),
      durationSeconds: durationSeconds(),
    };
  } catch (err) {
    if (refused !== undefined && err === refused.err) throw err;
    if (options.signal?.aborted) throw new AbortedError(`${where}: request aborted`, { cause: err });
    if (err instanceof ContentDecodingError) throw decodingError(options, where, err);
    const code = networkCode(err);
    const phase = code === undefined ? undefined : TIMEOUT_PHASES[code];
    if (phase !== undefined) {
      const limit = options.timeoutMs !== undefined ? ` within ${options.timeoutMs} ms (UPSTREAM_TIMEOUT)` : '';
      throw new UpstreamTimeoutError(options.endpoint, `${where}: timed out, ${phase}${limit} (${code})`, { cause: err, retryable: true });
    }
    if (err instanceof undiciErrors.ResponseExceededMaxSizeError) {
      throw new ResponseTooLargeError(options.endpoint, `${where}: response larger than ${options.maxBodyBytes} bytes (UPSTREAM_MAX_BODY)`, { cause: err });
    }
    const retryable = code !== undefined && RETRYABLE_NETWORK_CODES.has(code);
    // A socket closed after the headers is a body cut off in the middle: say so, not just the code.
    const what = headersReceived && code !== undefined && CUT_OFF_CODES.has(code) ? 'connection closed in the middle of the body' : undefined;
    const text = `${code ?? 'network error'}: ${(err as Error).message}`;
    throw new UpstreamNetworkError(options.endpoint, `${where}: ${what !== undefined ? `${what} (${text})` : text}`, {
      cause: err,
      retryable,
    });
  }
}

/** Reads a body chunk by chunk through `inspect`; a throw leaves the loop, which destroys the body (and its connection). */
async function readInspected(body: AsyncIterable<Uint8Array>, inspect: (chunk: Uint8Array) => void): Promise<Buffer> {
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of body) {
    inspect(chunk);
    chunks.push(chunk);
    size += chunk.length;
  }
  return Buffer.concat(chunks, size);
}

/**
 * A body that could not be decoded by its Content-Encoding: `response_too_large` when it decodes to
 * more than the cap (final, as a body over the cap is), else `content_encoding`: retryable for bytes
 * not valid in their coding (a body cut short), final for a coding the client does not know.
 */
function decodingError(options: Pick<SendOptions, 'endpoint' | 'maxBodyBytes'>, where: string, err: ContentDecodingError): UpstreamError {
  const { endpoint } = options;
  const coding = excerpt(err.coding, 40);
  if (err.fault === 'too_large') {
    return new ResponseTooLargeError(endpoint, `${where}: response larger than ${options.maxBodyBytes} bytes (UPSTREAM_MAX_BODY) once decoded from ${coding}`, {
      cause: err,
    });
  }
  if (err.fault === 'unknown') {
    return new UpstreamBodyError(
      endpoint,
      'content_encoding',
      `${where}: response in Content-Encoding ${coding}, which the client does not decode (gzip, deflate, br)`,
      { cause: err },
    );
  }
  return new UpstreamBodyError(endpoint, 'content_encoding', `${where}: ${excerpt(err.message, 200)}`, { cause: err, retryable: true });
}

function networkCode(err: unknown): string | undefined {
  for (let e = err as { code?: unknown; cause?: unknown } | undefined, depth = 0; e && depth < 4; e = e.cause as typeof e, depth++) {
    if (typeof e.code === 'string') return e.code;
  }
  return undefined;
}

/**
 * Turns a non-2xx response into a typed error: retryable for 429, 500, 502, 503 and 504 (with the
 * server's Retry-After), final for the rest. The body is quoted only as a short, printable excerpt.
 *
 * @param now current time in milliseconds since the epoch, for HTTP-date Retry-After values.
 */
export function statusError(endpoint: Endpoint, url: URL, res: RawResponse, now: number, detail = ''): UpstreamHttpError {
  const retryAfterMs = parseRetryAfter(res.headers['retry-after'], now);
  const retryable = RETRYABLE_STATUSES.has(res.status);
  const after = retryAfterMs !== undefined ? `, Retry-After ${Math.ceil(retryAfterMs / 1000)}s` : '';
  const message = `${describeEndpoint(endpoint, url)}: HTTP ${res.status}${after}${detail ? `: ${detail}` : ''}`;
  return new UpstreamHttpError(endpoint, res.status, message, {
    retryable,
    ...(retryable && retryAfterMs !== undefined ? { retryAfterMs } : {}),
  });
}

/**
 * Builds an {@link UpstreamBodyError}; such bodies are retried, since truncation is usually transient.
 *
 * @param reason the kind of body fault, for metrics (`invalid_json`, `content_type`, …); default `invalid_body`.
 */
export function bodyError(endpoint: Endpoint, url: URL, what: string, cause?: unknown, reason: BodyReason = 'invalid_body'): UpstreamBodyError {
  return new UpstreamBodyError(endpoint, reason, `${describeEndpoint(endpoint, url)}: ${what}`, { cause, retryable: true });
}

/**
 * A short, single-line, printable excerpt of a body for error messages: the server's text as it
 * sent it, except that whole occurrences of `secrets` (the token, the client secret, in case a
 * server echoes a request back) are masked by {@link redactSecrets}, which leaves every other
 * word intact however short a secret is.
 */
export function excerpt(body: string, max = 120, secrets: readonly string[] = []): string {
  const flat = redactSecrets(body, secrets)
    .replace(/[^\x20-\x7e]+/g, ' ')
    .trim();
  return flat.length > max ? `${flat.slice(0, max)}…` : flat;
}

/** The media type of a Content-Type header, lower-cased, without parameters. */
export function mediaType(headers: RawResponse['headers']): string {
  const value = headers['content-type'];
  const text = Array.isArray(value) ? value[0] : value;
  return (text ?? '').split(';')[0]!.trim().toLowerCase();
}
