/**
 * Malformed requests made cheap: a request whose target is not a URL, or bytes that are not HTTP,
 * answer 400 before authentication and any handler work, and are logged at most once per interval
 * with a count, never at error level, so a client sending thousands of them cannot flood the log.
 */
import type { Duplex } from 'node:stream';
import type { Logger } from '../../log.js';
import { IntervalCount } from '../interval-count.js';

/** At most one log line about malformed requests per this many milliseconds. */
const MALFORMED_LOG_INTERVAL_MS = 60_000;

/**
 * What was malformed: `target`, a request line HTTP parsed whose target is not a URL (`GET //[`);
 * `http`, bytes Node's HTTP parser refused (Node's `clientError` with an `HPE_*` code).
 */
export type MalformedKind = 'target' | 'http';

/**
 * The parsed target of a request (`req.url`): origin-form (`/metrics?x`), absolute-form or `*`,
 * resolved against `http://localhost` as the handler reads it.
 *
 * @returns the URL, or undefined when the target does not parse as one. Never throws.
 */
export function requestTarget(target: string | undefined): URL | undefined {
  try {
    return new URL(target ?? '/', 'http://localhost');
  } catch {
    return undefined;
  }
}

/**
 * Counts malformed requests and logs them at warn, at most one line per `intervalMs`: the first
 * one at once, those that follow within the interval in one line when it ends (`count`, `kinds`,
 * the last client's address; never the request's bytes). {@link close} logs what is still counted.
 */
export class MalformedRequestLog {
  readonly #count: IntervalCount<MalformedKind>;

  constructor(log: Logger, intervalMs: number = MALFORMED_LOG_INTERVAL_MS) {
    this.#count = new IntervalCount<MalformedKind>(['target', 'http'], intervalMs, ({ count, byKind, since, lastRemote }) =>
      log.warn(
        { count, kinds: byKind, since, lastRemote, intervalMs },
        `${count} malformed request${count === 1 ? '' : 's'} since ${since} answered 400 (a target that is not a URL, or bytes that are not HTTP); at most one such line every ${intervalMs / 1000} s`,
      ),
    );
  }

  /** Counts one malformed request from `remote` (the client's address, when known). */
  record(kind: MalformedKind, remote: string | undefined): void {
    this.#count.record(kind, remote);
  }

  /** Logs what was counted since the last line, if anything, and stops the timer (the server closed). */
  close(): void {
    this.#count.close();
  }
}

/** Node's own answers to a client error, which a `clientError` listener takes over. */
const CLIENT_ERROR_RESPONSES: Record<string, string> = {
  HPE_HEADER_OVERFLOW: 'HTTP/1.1 431 Request Header Fields Too Large\r\nConnection: close\r\n\r\n',
  HPE_CHUNK_EXTENSIONS_OVERFLOW: 'HTTP/1.1 413 Payload Too Large\r\nConnection: close\r\n\r\n',
  ERR_HTTP_REQUEST_TIMEOUT: 'HTTP/1.1 408 Request Timeout\r\nConnection: close\r\n\r\n',
};
const BAD_REQUEST = 'HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n';

/**
 * Answers a client error (Node's `clientError` event) as Node does without a listener (431 for
 * headers too large, 408 for a request timeout, 400 for anything else) and closes the connection;
 * counts HTTP parse errors (`HPE_*`) in `malformed`. Nothing is written when the socket cannot
 * take it or a response on it has begun (a pipelined request's answer would be corrupted).
 */
export function answerClientError(err: Error & { code?: string }, socket: Duplex, malformed: MalformedRequestLog): void {
  const code = err.code ?? '';
  if (code.startsWith('HPE_')) malformed.record('http', (socket as { remoteAddress?: string }).remoteAddress);
  // Node's own check: the response in flight on this socket, if any, must not have sent its head.
  const inFlight = (socket as { _httpMessage?: { headersSent?: boolean } })._httpMessage;
  if (socket.writable && inFlight?.headersSent !== true && code !== 'ECONNRESET') {
    socket.write(CLIENT_ERROR_RESPONSES[code] ?? BAD_REQUEST);
  }
  socket.destroy();
}
