/**
 * Writing responses: every status is counted in the simulator's stats, nothing is written after
 * close, and the transport-level faults (a cut, a stall, a truncated or mislabelled body) are
 * applied here, where the body is written.
 */
import type http from 'node:http';
import { gzipSync } from 'node:zlib';
import { writePaced, type Link } from './bandwidth.js';
import type { FaultSettings, QueuedFault, SimulatorStats, WireEndpoint } from './settings.js';

/** The response helpers of one simulator. */
export class Responder {
  readonly #stats: SimulatorStats;
  readonly #faults: FaultSettings;
  readonly #closed: () => boolean;
  /** The shared link bodies are paced on (`bandwidth`); undefined = unpaced. */
  readonly #link: Link | undefined;
  /** Timers of `slow-body` answers still stalling; cleared by {@link clearStalls} on close. */
  readonly #stallTimers = new Set<NodeJS.Timeout>();

  /**
   * @param faults read at each answer (`stallMs`).
   * @param closed true once the simulator is closing: nothing more is written.
   * @param link paces the bodies of {@link deliver}; undefined = as fast as the connection goes.
   */
  constructor(stats: SimulatorStats, faults: FaultSettings, closed: () => boolean, link?: Link) {
    this.#link = link;
    this.#stats = stats;
    this.#faults = faults;
    this.#closed = closed;
  }

  writeHead(res: http.ServerResponse, status: number, headers: http.OutgoingHttpHeaders): void {
    this.#stats.responses[String(status)] = (this.#stats.responses[String(status)] ?? 0) + 1;
    res.writeHead(status, headers);
  }

  send(res: http.ServerResponse, status: number, contentType: string, body: string, headers: http.OutgoingHttpHeaders = {}): void {
    if (this.#closed() || res.destroyed) return;
    const bytes = Buffer.from(body, 'utf8');
    this.writeHead(res, status, { 'content-type': contentType, 'content-length': bytes.length, ...headers });
    res.end(bytes);
  }

  sendJson(res: http.ServerResponse, status: number, value: unknown, headers: http.OutgoingHttpHeaders = {}): void {
    this.send(res, status, 'application/json; charset=utf-8', JSON.stringify(value), headers);
  }

  /** OAuth 2.0 error response (RFC 6749 §5.2). */
  oauthError(res: http.ServerResponse, status: number, error: string, description: string, headers: http.OutgoingHttpHeaders = {}): void {
    this.sendJson(res, status, { error, error_description: description }, { 'cache-control': 'no-store', pragma: 'no-cache', ...headers });
  }

  /** 401 for a missing, unknown, expired or revoked bearer token (RFC 6750 §3). */
  invalidToken(res: http.ServerResponse, description: string): void {
    this.sendJson(
      res,
      401,
      { error: 'invalid_token', error_description: description },
      {
        'www-authenticate': `Bearer realm="simulator", error="invalid_token", error_description="${description}"`,
      },
    );
  }

  /**
   * Writes a body according to a transport-level fault, or normally. An E6 or E7 body
   * (`wire.endpoint`) is paced by the simulator's link when it has one (`bandwidth`; not the bodies
   * of `reset-mid-body`, `slow-body` and `wrong-content-type`) and counted in `stats.bodyBytes` as
   * written, after compression.
   *
   * @param wire.gzip compress the body (`Content-Encoding: gzip`): the cut of `malformed-json` is
   *   compressed whole, `reset-mid-body` and `slow-body` cut or stall the compressed bytes.
   */
  deliver(
    res: http.ServerResponse,
    contentType: string,
    body: string,
    fault: QueuedFault | undefined,
    wire: { endpoint?: WireEndpoint; gzip?: boolean } = {},
  ): void {
    if (this.#closed() || res.destroyed) return;
    const { endpoint } = wire;
    const count = (n: number): void => {
      if (endpoint !== undefined) this.#stats.bodyBytes[endpoint] += n;
    };
    if (fault === 'wrong-content-type') {
      const page = '<!DOCTYPE html>\n<html><head><title>Service unavailable</title></head><body><h1>Down for maintenance</h1></body></html>\n';
      count(Buffer.byteLength(page));
      this.send(res, 200, 'text/html; charset=utf-8', page);
      return;
    }
    const gzip = wire.gzip === true;
    const text = fault === 'malformed-json' ? body.slice(0, Math.max(1, Math.floor(body.length / 2))) : body;
    const bytes = gzip ? gzipSync(text) : Buffer.from(text, 'utf8');
    if (gzip && endpoint !== undefined) this.#stats.gzipResponses[endpoint]++;
    const headers: http.OutgoingHttpHeaders = gzip
      ? { 'content-type': contentType, 'content-length': bytes.length, 'content-encoding': 'gzip', vary: 'accept-encoding' }
      : { 'content-type': contentType, 'content-length': bytes.length };
    if (fault === 'reset-mid-body') {
      this.writeHead(res, 200, headers);
      const half = bytes.subarray(0, Math.floor(bytes.length / 2));
      count(half.length);
      res.write(half, () => res.socket?.destroy());
      return;
    }
    if (fault === 'slow-body') {
      this.writeHead(res, 200, headers);
      res.flushHeaders();
      const timer = setTimeout(() => {
        this.#stallTimers.delete(timer);
        if (res.destroyed) return;
        count(bytes.length);
        res.end(bytes);
      }, this.#faults.stallMs);
      this.#stallTimers.add(timer);
      res.once('close', () => {
        clearTimeout(timer);
        this.#stallTimers.delete(timer);
      });
      return;
    }
    this.writeHead(res, 200, headers);
    if (this.#link === undefined || endpoint === undefined) {
      count(bytes.length);
      res.end(bytes);
      return;
    }
    // The connection is the only thing a failed write can spoil: drop it rather than the process.
    void writePaced(res, bytes, this.#link, count).catch(() => res.destroy());
  }

  /** Drops the stalled `slow-body` answers' timers (on close). */
  clearStalls(): void {
    for (const timer of this.#stallTimers) clearTimeout(timer);
    this.#stallTimers.clear();
  }
}
