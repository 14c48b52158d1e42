/**
 * Connection limits of `serve`'s HTTP server: METRICS_MAX_CONNECTIONS_PER_CLIENT per client
 * address and METRICS_MAX_CONNECTIONS in all, counted at the raw TCP `connection` event, before any
 * byte is parsed or TLS handshake begins. A connection over a limit is destroyed at once, counted
 * and logged at most once per interval. See docs/design/http-hardening.md.
 */
import type { Server } from 'node:net';
import type { Socket } from 'node:net';
import type { Logger } from '../../log.js';
import { IntervalCount } from '../interval-count.js';

/** Which limit refused a connection. */
export type RefusalReason = 'per_client' | 'total';
export const REFUSAL_REASONS: readonly RefusalReason[] = ['per_client', 'total'];

const REFUSED_LOG_INTERVAL_MS = 60_000;

/** The key a client is counted under: `::ffff:127.0.0.2` as `127.0.0.2`; `unknown` when there is no address. */
export function clientKey(address: string | undefined): string {
  if (address === undefined || address === '') return 'unknown';
  const lower = address.toLowerCase();
  const mapped = /^(?:0{0,4}:){0,5}:?ffff:(\d{1,3}(?:\.\d{1,3}){3})$/.exec(lower);
  return mapped ? mapped[1]! : lower;
}

/** Open connections per client address; an address is kept only while it has one open. */
export class ClientConnections {
  readonly #perClient: number;
  readonly #open = new Map<string, number>();

  /** @param perClient at least 1. */
  constructor(perClient: number) {
    this.#perClient = perClient;
  }

  /** Takes a slot: a release function (idempotent), or undefined when the address is at its limit. */
  admit(address: string | undefined): (() => void) | undefined {
    const key = clientKey(address);
    const held = this.#open.get(key) ?? 0;
    if (held >= this.#perClient) return undefined;
    this.#open.set(key, held + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = (this.#open.get(key) ?? 1) - 1;
      if (left <= 0) this.#open.delete(key);
      else this.#open.set(key, left);
    };
  }

  held(address: string | undefined): number {
    return this.#open.get(clientKey(address)) ?? 0;
  }

  get clients(): number {
    return this.#open.size;
  }
}

/** Logs refused connections at most once per reason per interval, with a count. */
export class RefusedConnectionLog {
  readonly #counts: Record<RefusalReason, IntervalCount<RefusalReason>>;

  constructor(log: Logger, limits: Record<RefusalReason, number>, intervalMs: number = REFUSED_LOG_INTERVAL_MS) {
    const count = (reason: RefusalReason): IntervalCount<RefusalReason> =>
      new IntervalCount<RefusalReason>([reason], intervalMs, ({ count, since, lastRemote }) => {
        const limit = limits[reason];
        const why =
          reason === 'per_client'
            ? `their client address held ${limit} connections already (METRICS_MAX_CONNECTIONS_PER_CLIENT)`
            : `the server held ${limit} connections already (METRICS_MAX_CONNECTIONS)`;
        log.warn(
          { reason, count, since, lastRemote, limit, intervalMs },
          `refused ${count} connection${count === 1 ? '' : 's'} since ${since}: ${why}; at most one such line every ${intervalMs / 1000} s`,
        );
      });
    this.#counts = { per_client: count('per_client'), total: count('total') };
  }

  record(reason: RefusalReason, remote: string | undefined): void {
    this.#counts[reason].record(reason, remote);
  }

  close(): void {
    for (const count of Object.values(this.#counts)) count.close();
  }
}

export interface ConnectionLimitOptions {
  perClient: number;
  total: number;
  /** Once per refused connection. */
  onRefused: (reason: RefusalReason) => void;
  log: Logger;
}

/**
 * Puts the limits on `server` before it listens, after every other `connection` listener is added:
 * the total is Node's `maxConnections`; the per-client limit takes over those listeners, so a
 * refused connection reaches none of them (no TLS socket, no parser).
 */
export function limitConnections(server: Server, options: ConnectionLimitOptions): void {
  const clients = new ClientConnections(options.perClient);
  const refusedLog = new RefusedConnectionLog(options.log, { per_client: options.perClient, total: options.total });
  const refuse = (reason: RefusalReason, remote: string | undefined): void => {
    options.onRefused(reason);
    refusedLog.record(reason, remote);
  };
  server.maxConnections = options.total;
  server.on('drop', (data?: { remoteAddress?: string }) => refuse('total', data?.remoteAddress));
  const admitted = server.rawListeners('connection') as Array<(socket: Socket) => void>;
  server.removeAllListeners('connection');
  server.on('connection', (socket: Socket) => {
    const release = clients.admit(socket.remoteAddress);
    if (release === undefined) {
      refuse('per_client', socket.remoteAddress);
      socket.destroy();
      return;
    }
    socket.once('close', release);
    for (const listener of admitted) listener.call(server, socket);
  });
  server.on('close', () => refusedLog.close());
}
