/** Malformed requests answered 400 before any other work and logged with a count (docs/design/http-hardening.md). */
import type { Duplex } from 'node:stream';
import type { Logger } from '../../log.js';
import { IntervalCount } from '../interval-count.js';

const MALFORMED_LOG_INTERVAL_MS = 60_000;

/** `target`: a parsed request whose target is not a URL (`GET //[`); `http`: an `HPE_*` client error. */
export type MalformedKind = 'target' | 'http';

/** `req.url` resolved against `http://localhost`; undefined when it does not parse. Never throws. */
export function requestTarget(target: string | undefined): URL | undefined {
  try {
    return new URL(target ?? '/', 'http://localhost');
  } catch {
    return undefined;
  }
}

/** Logs malformed requests at most once per interval, with counts; never the request's bytes. */
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

  record(kind: MalformedKind, remote: string | undefined): void {
    this.#count.record(kind, remote);
  }

  close(): void {
    this.#count.close();
  }
}

/** Node's own answers, which a `clientError` listener takes over. */
const CLIENT_ERROR_RESPONSES: Record<string, string> = {
  HPE_HEADER_OVERFLOW: 'HTTP/1.1 431 Request Header Fields Too Large\r\nConnection: close\r\n\r\n',
  HPE_CHUNK_EXTENSIONS_OVERFLOW: 'HTTP/1.1 413 Payload Too Large\r\nConnection: close\r\n\r\n',
  ERR_HTTP_REQUEST_TIMEOUT: 'HTTP/1.1 408 Request Timeout\r\nConnection: close\r\n\r\n',
};
const BAD_REQUEST = 'HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n';

/**
 * Answers a `clientError` as Node does without a listener and closes the connection; counts
 * `HPE_*` errors. Nothing is written once a response on the socket has begun.
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
