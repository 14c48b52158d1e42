/**
 * Connection limits of `serve`'s HTTP server, so that no single client can take it: at most
 * METRICS_MAX_CONNECTIONS_PER_CLIENT connections open from one client address, and at most
 * METRICS_MAX_CONNECTIONS in all. Both are counted at the raw TCP `connection` event, before any
 * byte is parsed or any TLS handshake begins, so a client holding bare TCP connections to a TLS
 * port is bounded like one sending headers a byte at a time. A connection over a limit is
 * destroyed at once, counted in `http_connections_refused_total{reason}` and logged at most once
 * per interval per reason, with a count.
 */
import type { Server } from 'node:net';
import type { Socket } from 'node:net';
import type { Logger } from '../../log.js';
import { IntervalCount } from '../interval-count.js';

/** Why a connection was refused: its client address held its limit (`per_client`), or the server held its own (`total`). */
export type RefusalReason = 'per_client' | 'total';
export const REFUSAL_REASONS: readonly RefusalReason[] = ['per_client', 'total'];

/** At most one log line about refused connections per reason per this many milliseconds. */
const REFUSED_LOG_INTERVAL_MS = 60_000;

/**
 * The key a client is counted under: its address, with an IPv4-mapped IPv6 address
 * (`::ffff:127.0.0.2`, what a dual-stack listener on `::` reports for IPv4 clients) read as the
 * IPv4 address itself, so one client has one key whichever way the listener reports it.
 *
 * @param address a socket's `remoteAddress`; undefined when the socket is already gone.
 * @returns the key; `unknown` for an undefined address (counted together, never unlimited).
 */
export function clientKey(address: string | undefined): string {
  if (address === undefined || address === '') return 'unknown';
  const lower = address.toLowerCase();
  const mapped = /^(?:0{0,4}:){0,5}:?ffff:(\d{1,3}(?:\.\d{1,3}){3})$/.exec(lower);
  return mapped ? mapped[1]! : lower;
}

/**
 * Open connections per client address, within a per-client limit. An address is in the map only
 * while it has a connection open: an address whose connections all closed leaves no entry.
 */
export class ClientConnections {
  readonly #perClient: number;
  readonly #open = new Map<string, number>();

  /** @param perClient connections one address may hold open at once, at least 1. */
  constructor(perClient: number) {
    this.#perClient = perClient;
  }

  /**
   * Takes one slot for `address`, or refuses when it holds `perClient` already.
   *
   * @returns a release function (call it once, when the connection closes; later calls do
   *   nothing), or undefined when the address is at its limit.
   */
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

  /** Connections open from `address` now. */
  held(address: string | undefined): number {
    return this.#open.get(clientKey(address)) ?? 0;
  }

  /** Addresses with at least one connection open. */
  get clients(): number {
    return this.#open.size;
  }
}

/**
 * Logs refused connections at warn, at most one line per reason per `intervalMs`
 * ({@link IntervalCount}): the first refusal at once, those that follow within the interval in one
 * line with their count when it ends. {@link close} logs what is still counted.
 */
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

  /** Counts one refused connection from `remote` (the client's address, when known). */
  record(reason: RefusalReason, remote: string | undefined): void {
    this.#counts[reason].record(reason, remote);
  }

  /** Logs what was counted since each reason's last line and stops the timers (the server closed). */
  close(): void {
    for (const count of Object.values(this.#counts)) count.close();
  }
}

/** What {@link limitConnections} needs. */
export interface ConnectionLimitOptions {
  /** METRICS_MAX_CONNECTIONS_PER_CLIENT. */
  perClient: number;
  /** METRICS_MAX_CONNECTIONS. */
  total: number;
  /** Called once per refused connection (the metric). */
  onRefused: (reason: RefusalReason) => void;
  log: Logger;
}

/**
 * Puts the limits on `server` (an http or https server, before it listens; call it after every
 * other `connection` listener is added). The total is Node's own `maxConnections`, which closes a
 * connection over it before any listener sees it (its `drop` event counts it). The per-client
 * limit takes over the `connection` listeners there are (Node's HTTP parser or TLS handshake, and
 * ours): a refused connection is destroyed before any of them runs, so it costs no TLS socket, no
 * parser and no `clientError`; an admitted one goes to each in turn. A slot is given back when its
 * socket closes.
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
