/**
 * Whether DATABASE_URL reaches PostgreSQL through a pooler that shares server connections between
 * client connections (PgBouncer's transaction or statement pooling), where session-level advisory
 * locks guard nothing. Probed with two connections of their own; design: docs/design/pooler.md.
 */
import type { Logger } from '../log.js';
import { DatabaseError, SharedServersError } from '../errors.js';
import { createPool, databaseError, describeDatabase, type PoolClient } from './pool.js';
import type { DatabaseTarget } from './tls.js';

/** `session`: each client connection keeps its server (a direct connection, or session pooling). */
type PoolingMode = 'session' | 'transaction' | 'statement';

interface PoolingProbe {
  mode: PoolingMode;
  /** What was seen, for a person: the backend pids. */
  evidence: string;
}

/** A connection that owns its server answers at once; one waiting this long for a server shares it. */
const SERVER_WAIT_MS = 3_000;
/** Rounds of the probe: traffic of other clients can hide the sharing in one round, hardly in five. */
const PROBE_ROUNDS = 5;

const pidOf = async (client: PoolClient): Promise<number> => Number((await client.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0]!.pid);

/** `promise`'s value, or `'waiting'` after {@link SERVER_WAIT_MS}; a later rejection is ignored. */
function within<T>(promise: Promise<T>): Promise<T | 'waiting'> {
  promise.catch(() => undefined);
  const timer = new Promise<'waiting'>((resolve) => setTimeout(resolve, SERVER_WAIT_MS, 'waiting').unref());
  return Promise.race([promise, timer]);
}

/** One round on connections `a` and `b`: a probe that decides, or undefined. */
async function probeRound(a: PoolClient, b: PoolClient): Promise<PoolingProbe | undefined> {
  const p1 = await pidOf(a);
  let p2: number | 'waiting';
  try {
    p2 = await within(b.query('begin').then(() => pidOf(b)));
  } catch (err) {
    // PgBouncer refuses BEGIN in statement pooling.
    if (/statement pooling/i.test((err as Error).message)) return { mode: 'statement', evidence: (err as Error).message };
    throw err;
  }
  if (p2 === 'waiting') {
    // B waits for a server: A keeping its own (a pool of one in session pooling) answers at once.
    if ((await within(pidOf(a))) === p1) return { mode: 'session', evidence: `a connection kept backend ${p1} while another waited for a server` };
    throw new DatabaseError(`no server connection came free within ${SERVER_WAIT_MS} ms`);
  }
  let third: Promise<number> | undefined;
  try {
    if (p2 === p1) return { mode: 'transaction', evidence: `backend ${p1} answered two client connections` };
    third = pidOf(a);
    const p3 = await within(third);
    if (p3 === 'waiting') return { mode: 'transaction', evidence: `a client connection waited ${SERVER_WAIT_MS} ms for a server` };
    if (p3 !== p1) return { mode: 'transaction', evidence: `one client connection was answered by backends ${p1} and ${p3}` };
    return undefined;
  } finally {
    await b.query('rollback').catch(() => undefined);
    await third?.catch(() => undefined);
  }
}

/**
 * Probes how `target` hands out server connections: on connection A `pg_backend_pid()`; on B a
 * transaction kept open and its pid; on A again. B answered by A's backend, or A by another (or
 * waiting for one), means shared servers. Both connections are closed afterwards, not pooled.
 * @throws {DatabaseError} when the database cannot be reached or a probe query fails.
 */
async function probePooling(target: DatabaseTarget, log: Logger): Promise<PoolingProbe> {
  const pool = createPool(target, log, { max: 2 });
  const clients: PoolClient[] = [];
  try {
    for (let i = 0; i < 2; i++) {
      const client = await pool.connect();
      client.on('error', () => undefined);
      clients.push(client);
    }
    const [a, b] = clients as [PoolClient, PoolClient];
    for (let round = 0; round < PROBE_ROUNDS; round++) {
      const decided = await probeRound(a, b);
      if (decided !== undefined) return decided;
    }
    return { mode: 'session', evidence: `each client connection kept its backend (${await pidOf(a)} for one)` };
  } catch (err) {
    throw err instanceof DatabaseError ? err : databaseError(`probing how ${describeDatabase(target.url)} pools connections`, err);
  } finally {
    for (const client of clients) client.release(true);
    await pool.end().catch(() => undefined);
  }
}

/** One line for `check` and the refusal: what was found and how to fix it. */
function describePooling(probe: PoolingProbe, where: string): string {
  if (probe.mode === 'session') return `${where}: each connection keeps its server session (direct, or session pooling)`;
  return (
    `${where} is reached through a pooler in ${probe.mode} pooling mode (${probe.evidence}): ` +
    "the exporter's advisory locks (one sync per source, migrations, rollup rebuilds) need a server session of their own; " +
    'use session pooling (PgBouncer pool_mode=session) or give the exporter a direct DATABASE_URL'
  );
}

/**
 * Refuses a database behind transaction or statement pooling, before any lock is taken; `check`'s
 * pooling step. @returns what was found, one line.
 * @throws {SharedServersError} naming the pooling mode and the fix; {@link DatabaseError} as {@link probePooling}.
 */
export async function requireOwnSessions(target: DatabaseTarget, log: Logger): Promise<string> {
  const probe = await probePooling(target, log);
  log.debug({ pooling: probe.mode, evidence: probe.evidence }, 'database pooling probed');
  const line = describePooling(probe, describeDatabase(target.url));
  if (probe.mode !== 'session') throw new SharedServersError(line);
  return line;
}
