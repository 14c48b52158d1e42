/**
 * The HTTP layer under the token and analytics clients: one undici Agent (timeouts, keep-alive,
 * mutual TLS) and one request that turns every failure into a typed, classified error.
 * Design: docs/design/upstream-requests.md.
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

const KEEP_ALIVE_TIMEOUT_MS = 30_000;

/** The reference names none: RFC 9110's transient ones, and 500 (every request is safe to repeat). */
const RETRYABLE_STATUSES: ReadonlySet<number> = new Set([429, 500, 502, 503, 504]);

/** Worth a new attempt; TLS and DNS-name errors are final. */
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
/** What the request was waiting for when each timeout fired. */
const TIMEOUT_PHASES: Readonly<Record<string, string>> = {
  UND_ERR_CONNECT_TIMEOUT: 'no connection',
  UND_ERR_HEADERS_TIMEOUT: 'no response headers',
  UND_ERR_BODY_TIMEOUT: 'the body stalled: no data',
};
/** After the headers: the body was cut off. */
const CUT_OFF_CODES = new Set(['ECONNRESET', 'EPIPE', 'UND_ERR_SOCKET', 'UND_ERR_CLOSED']);

export interface AgentOptions {
  /** Connect, headers and body each, in milliseconds. */
  timeoutMs: number;
  /** UPSTREAM_MAX_BODY as received, in bytes; give {@link send} the same. */
  maxBodyBytes: number;
  tls?: TlsFiles;
}

/** The dispatcher of E0, E6 and E7 alike; a private CA is trusted besides the public roots. */
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

export interface RawResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  /** Decoded from its Content-Encoding. */
  body: string;
  /** What `body` was decoded from, after a byte order mark: with `keepBytes`, when valid UTF-8. */
  bytes?: Buffer;
  /** From sending to the end of the body. */
  durationSeconds: number;
  /** The local wall clock (epoch ms) when the request was sent and when its headers arrived (the `Date` header's bracket). */
  sentAtMs: number;
  headersAtMs: number;
}

export interface SendOptions {
  dispatcher: Dispatcher;
  endpoint: Endpoint;
  method: 'GET' | 'POST';
  url: URL;
  headers?: Record<string, string>;
  body?: string;
  signal?: AbortSignal;
  /** UPSTREAM_TIMEOUT in milliseconds, for messages (the dispatcher enforces it). */
  timeoutMs?: number;
  /** UPSTREAM_MAX_BODY in bytes, also bounding the decoded body. */
  maxBodyBytes: number;
  /** Fill {@link RawResponse.bytes}. */
  keepBytes?: boolean;
  /** The local wall clock in epoch ms (default Date.now), for {@link RawResponse.sentAtMs}. */
  now?: () => number;
  /**
   * Sees a 2xx body's bytes as they arrive (a coded body at once, decoded) and may throw to
   * abandon it: the connection is closed and that error thrown as it is (E7's limits).
   */
  inspect?: (chunk: Uint8Array) => void;
}

/** `E6 https://host/analytics`: never the query string or credentials. */
function describeEndpoint(endpoint: Endpoint, url: URL): string {
  const labels: Record<Endpoint, string> = { token: 'E0', analytics: 'E6', prometheus: 'E7' };
  return `${labels[endpoint]} ${displayUrl(url)}`;
}

/**
 * Sends one request and reads the whole body, decoded. Does not retry and does not judge the status.
 * @throws {UpstreamTimeoutError}; {@link UpstreamNetworkError} (`retryable` when a new attempt may help);
 *   {@link ResponseTooLargeError} (received or decoded); {@link UpstreamBodyError} `content_encoding`
 *   (unknown: final; corrupt: retryable); {@link AbortedError} on `signal`; what `inspect` threw.
 */
export async function send(options: SendOptions): Promise<RawResponse> {
  const started = performance.now();
  const wall = options.now ?? Date.now;
  const sentAtMs = wall();
  const where = describeEndpoint(options.endpoint, options.url);
  let headersReceived = false;
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
    const at = { sentAtMs, headersAtMs: wall() };
    const durationSeconds = () => (performance.now() - started) / 1000;
    const encoding = res.headers['content-encoding'];
    const coded = contentCodings(encoding).length > 0;
    // An error page's status says what went wrong: not inspected.
    const inspecting = res.statusCode >= 200 && res.statusCode <= 299 ? inspect : undefined;
    if (options.keepBytes !== true && !coded && inspecting === undefined)
      return { status: res.statusCode, headers: res.headers, body: await res.body.text(), durationSeconds: durationSeconds(), ...at };
    let whole: Uint8Array;
    if (coded) {
      whole = await decodeContent(await res.body.bytes(), encoding, options.maxBodyBytes);
      inspecting?.(whole);
    } else {
      whole = inspecting === undefined ? await res.body.bytes() : await readInspected(res.body, inspecting);
    }
    // As undici's text(): a byte order mark skipped, invalid bytes as U+FFFD.
    if (options.keepBytes !== true)
      return { status: res.statusCode, headers: res.headers, body: new TextDecoder().decode(whole), durationSeconds: durationSeconds(), ...at };
    const bom = whole.length > 2 && whole[0] === 0xef && whole[1] === 0xbb && whole[2] === 0xbf ? 3 : 0;
    const bytes = Buffer.from(whole.buffer, whole.byteOffset + bom, whole.length - bom);
    return {
      status: res.statusCode,
      headers: res.headers,
      body: bytes.toString('utf8'),
      ...(isUtf8(bytes) ? { bytes } : {}),
      durationSeconds: durationSeconds(),
      ...at,
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
    const what = headersReceived && code !== undefined && CUT_OFF_CODES.has(code) ? 'connection closed in the middle of the body' : undefined;
    const text = `${code ?? 'network error'}: ${(err as Error).message}`;
    throw new UpstreamNetworkError(options.endpoint, `${where}: ${what !== undefined ? `${what} (${text})` : text}`, {
      cause: err,
      retryable,
    });
  }
}

/** A throw of `inspect` leaves the loop, which destroys the body and its connection. */
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

/** `response_too_large` (final); `content_encoding`: retryable when corrupt, final when unknown. */
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

/** A non-2xx response, retryable for {@link RETRYABLE_STATUSES}; `now` in epoch ms. */
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

/** A body fault, retryable (truncation is usually transient); `reason` for metrics. */
export function bodyError(endpoint: Endpoint, url: URL, what: string, cause?: unknown, reason: BodyReason = 'invalid_body'): UpstreamBodyError {
  return new UpstreamBodyError(endpoint, reason, `${describeEndpoint(endpoint, url)}: ${what}`, { cause, retryable: true });
}

/** A short, single-line, printable excerpt for messages, `secrets` and registered ones masked. */
export function excerpt(body: string, max = 120, secrets: readonly string[] = []): string {
  const flat = redactSecrets(body, secrets)
    .replace(/[^\x20-\x7e]+/g, ' ')
    .trim();
  return flat.length > max ? `${flat.slice(0, max)}…` : flat;
}

/** The Content-Type's media type, lower-cased, without parameters. */
export function mediaType(headers: RawResponse['headers']): string {
  const value = headers['content-type'];
  const text = Array.isArray(value) ? value[0] : value;
  return (text ?? '').split(';')[0]!.trim().toLowerCase();
}
