import { EventEmitter } from 'node:events';
import type { Server } from 'node:net';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createLogger } from '../../src/log.js';
import { ClientConnections, clientKey, limitConnections, RefusedConnectionLog, type RefusalReason } from '../../src/serve/web/connections.js';
import { captureLog, type CapturedLog } from '../helpers/log-capture.js';

describe('clientKey', () => {
  it.each([
    ['127.0.0.2', '127.0.0.2'],
    ['::ffff:127.0.0.2', '127.0.0.2'],
    ['::FFFF:10.1.2.3', '10.1.2.3'],
    ['0:0:0:0:0:ffff:10.1.2.3', '10.1.2.3'],
    ['::1', '::1'],
    ['2001:DB8::1', '2001:db8::1'],
    // Not IPv4-mapped: kept as they are.
    ['::ffff:abcd:1', '::ffff:abcd:1'],
    ['64:ff9b::10.1.2.3', '64:ff9b::10.1.2.3'],
  ])('reads %s as %s', (address, key) => {
    expect(clientKey(address)).toBe(key);
  });

  it('counts sockets without an address together', () => {
    expect(clientKey(undefined)).toBe('unknown');
    expect(clientKey('')).toBe('unknown');
  });
});

describe('ClientConnections', () => {
  it('admits up to the limit per address, independently of other addresses', () => {
    const clients = new ClientConnections(3);
    const held = [1, 2, 3].map(() => clients.admit('127.0.0.2'));
    expect(held.every((release) => release !== undefined)).toBe(true);
    expect(clients.admit('127.0.0.2')).toBeUndefined();
    expect(clients.admit('127.0.0.1')).toBeDefined();
    expect(clients.held('127.0.0.2')).toBe(3);
    expect(clients.held('127.0.0.1')).toBe(1);
  });

  it('counts an IPv4-mapped IPv6 address and its IPv4 form as one client', () => {
    const clients = new ClientConnections(2);
    expect(clients.admit('127.0.0.2')).toBeDefined();
    expect(clients.admit('::ffff:127.0.0.2')).toBeDefined();
    expect(clients.admit('::ffff:127.0.0.2')).toBeUndefined();
    expect(clients.admit('127.0.0.2')).toBeUndefined();
    expect(clients.clients).toBe(1);
  });

  it('gives a slot back on release, once however often release is called, and forgets an address with nothing open', () => {
    const clients = new ClientConnections(2);
    const first = clients.admit('10.0.0.1')!;
    const second = clients.admit('10.0.0.1')!;
    expect(clients.admit('10.0.0.1')).toBeUndefined();
    first();
    first();
    expect(clients.held('10.0.0.1')).toBe(1);
    expect(clients.admit('10.0.0.1')).toBeDefined();
    expect(clients.admit('10.0.0.1')).toBeUndefined();
    second();
    expect(clients.held('10.0.0.1')).toBe(1);

    // 10,000 addresses that came and left leave no entry behind.
    for (let i = 0; i < 10_000; i += 1) clients.admit(`10.1.${i >> 8}.${i & 255}`)!();
    expect(clients.clients).toBe(1);
  });
});

describe('RefusedConnectionLog', () => {
  let capture: CapturedLog;
  let log: RefusedConnectionLog;

  beforeEach(() => {
    vi.useFakeTimers({ now: new Date('2026-01-01T00:00:00Z') });
    capture = captureLog();
    log = new RefusedConnectionLog(createLogger('info', { format: 'json', destination: capture }), { per_client: 32, total: 1024 }, 60_000);
  });
  afterEach(() => {
    log.close();
    vi.useRealTimers();
  });

  it('logs the first refusal of each reason at once, then one line per reason per interval with the count', () => {
    log.record('per_client', '127.0.0.2');
    log.record('total', '127.0.0.3');
    expect(capture.lines()).toEqual([
      expect.objectContaining({ level: 'warn', reason: 'per_client', count: 1, limit: 32, lastRemote: '127.0.0.2' }),
      expect.objectContaining({ level: 'warn', reason: 'total', count: 1, limit: 1024, lastRemote: '127.0.0.3' }),
    ]);

    for (let i = 0; i < 1999; i += 1) log.record('per_client', '127.0.0.2');
    vi.advanceTimersByTime(59_999);
    expect(capture.lines()).toHaveLength(2);
    vi.advanceTimersByTime(1);
    const lines = capture.lines();
    expect(lines).toHaveLength(3);
    expect(lines[2]).toMatchObject({ level: 'warn', reason: 'per_client', count: 1999, since: '2026-01-01T00:00:00.000Z' });
    expect(lines[2]!.msg).toMatch(/^refused 1999 connections since .*METRICS_MAX_CONNECTIONS_PER_CLIENT/);
  });

  it('logs what is still counted on close, and nothing when nothing was', () => {
    log.record('total', undefined);
    log.record('total', undefined);
    log.record('total', undefined);
    log.close();
    expect(capture.lines().map((l) => l.count)).toEqual([1, 2]);
    log.close();
    expect(capture.lines()).toHaveLength(2);
  });
});

/** A socket as limitConnections sees it: an address, destroy() and a close event. */
class FakeSocket extends EventEmitter {
  destroyed = false;
  constructor(readonly remoteAddress: string) {
    super();
  }
  destroy(): void {
    if (this.destroyed) return;
    this.destroyed = true;
    this.emit('close');
  }
}

describe('limitConnections', () => {
  it("refuses a client's connection over its limit before every other connection listener, and sets the server's total", () => {
    const server = new EventEmitter() as EventEmitter & { maxConnections?: number };
    const seenByNode: FakeSocket[] = [];
    // Node's own listener (the HTTP parser, the TLS handshake) is there before the limits.
    server.on('connection', (socket: FakeSocket) => seenByNode.push(socket));
    const refused: RefusalReason[] = [];
    const capture = captureLog();
    limitConnections(server as unknown as Server, {
      perClient: 2,
      total: 100,
      onRefused: (reason) => refused.push(reason),
      log: createLogger('info', { format: 'json', destination: capture }),
    });
    expect(server.maxConnections).toBe(100);

    const sockets = ['127.0.0.2', '::ffff:127.0.0.2', '127.0.0.2', '127.0.0.1'].map((address) => new FakeSocket(address));
    for (const socket of sockets) server.emit('connection', socket);
    expect(sockets.map((s) => s.destroyed)).toEqual([false, false, true, false]);
    expect(seenByNode).toEqual([sockets[0], sockets[1], sockets[3]]);
    expect(refused).toEqual(['per_client']);

    // A closed connection gives its slot back.
    sockets[0]!.destroy();
    const again = new FakeSocket('127.0.0.2');
    server.emit('connection', again);
    expect(again.destroyed).toBe(false);

    // Node's maxConnections drops those over the total, and tells with `drop`.
    server.emit('drop', { remoteAddress: '10.0.0.9' });
    expect(refused).toEqual(['per_client', 'total']);
    server.emit('close');
    expect(capture.lines().map((l) => [l.reason, l.count])).toEqual([
      ['per_client', 1],
      ['total', 1],
    ]);
  });
});
