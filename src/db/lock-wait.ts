/**
 * Lock waits made visible: while a run's session works, another pooled connection looks in
 * pg_locks for the backend's lock request not granted; one waiting {@link LOCK_WAIT_WARN_MS} is
 * reported once, with the relation, the mode and the blocking processes; DATABASE_LOCK_TIMEOUT's
 * SQLSTATE 55P03 becomes an error naming the setting. Design: docs/design/lock-waits.md.
 */
import { DatabaseError } from '../errors.js';
import { formatDuration } from '../time.js';
import type { Pool, PoolClient } from './pool.js';

/** A lock request waiting longer than this is reported (once per wait). */
const LOCK_WAIT_WARN_MS = 10_000;
/** Between two looks at pg_locks once the first was due. */
const LOCK_WAIT_POLL_MS = 2_000;

/** A process holding what the waiting backend asked for (`pg_blocking_pids`, `pg_stat_activity`). */
interface LockBlocker {
  pid: number;
  applicationName: string;
  /** The first line of its current or last query, at most 200 characters. */
  query: string;
  /** The modes it holds on the relation, comma-separated; empty when none there. */
  held: string;
}

interface LockWait {
  /** `schema.table` (regclass), or the lock type (`transactionid`, `advisory`…) for another kind of lock. */
  relation: string;
  /** The mode asked for, as pg_locks names it (`RowExclusiveLock`). */
  mode: string;
  waitedMs: number;
  blockers: LockBlocker[];
}

// waitstart (PostgreSQL 14) read through to_jsonb, so that 13 runs it too: there the statement's start.
const WAITING_SQL = `
select relation, mode, since::text, (extract(epoch from clock_timestamp() - since) * 1000)::float8 as waited_ms, blockers from (
select coalesce(l.relation::regclass::text, l.locktype) as relation, l.mode,
       coalesce((to_jsonb(l) ->> 'waitstart')::timestamptz, w.query_start) as since,
       coalesce((select json_agg(json_build_object(
                   'pid', a.pid, 'applicationName', a.application_name, 'query', left(split_part(a.query, E'\\n', 1), 200),
                   'held', (select coalesce(string_agg(distinct h.mode, ','), '') from pg_locks h
                             where h.pid = a.pid and h.granted and h.relation is not distinct from l.relation)))
                 from pg_stat_activity a where a.pid = any(pg_blocking_pids(l.pid))), '[]'::json) as blockers
  from pg_locks l left join pg_stat_activity w on w.pid = l.pid
 where l.pid = $1 and not l.granted and l.locktype <> 'advisory'
 limit 1) as waiting`;

/** A wait's identity: the same request seen again is not reported again. */
type Seen = LockWait & { since: string };

/** The backend's waiting request, or undefined. */
async function lookWaiting(pool: Pool, pid: number): Promise<Seen | undefined> {
  const { rows } = await pool.query<{ relation: string; mode: string; since: string; waited_ms: number; blockers: LockBlocker[] }>(WAITING_SQL, [pid]);
  const row = rows[0];
  return row === undefined
    ? undefined
    : { relation: row.relation, mode: row.mode, since: row.since, waitedMs: Math.round(row.waited_ms), blockers: row.blockers };
}

export interface LockWatchOptions {
  /** The backend whose requests are watched, and the pool to look from; undefined: not watched (the embedded database). */
  backend: { pool: Pool; pid: number } | undefined;
  /** Told once per wait; must not throw. */
  onWait: (wait: LockWait) => void;
  /** DATABASE_LOCK_TIMEOUT (ms): looked at often enough that its error can name the relation. */
  timeoutMs: number | undefined;
}

/**
 * Watches a backend's lock requests (not advisory locks) from another connection of the pool,
 * every {@link LOCK_WAIT_POLL_MS} (or half the timeout) from {@link start} to {@link stop}; a
 * failed look is ignored (the work's own error says more).
 */
export class LockWatcher {
  #lastSeen: Seen | undefined;
  #reported: string | undefined;
  #looking = false;
  #timer: NodeJS.Timeout | undefined;

  constructor(private readonly o: LockWatchOptions) {}

  start(): void {
    if (this.o.backend === undefined || this.#timer !== undefined) return;
    const everyMs = Math.min(LOCK_WAIT_POLL_MS, (this.o.timeoutMs ?? Infinity) / 2);
    this.#timer = setInterval(() => void this.#look(), everyMs).unref();
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /** `err`, or for a lock_timeout (55P03) in its cause chain a {@link DatabaseError} naming DATABASE_LOCK_TIMEOUT and the relation last seen waited on. */
  explain(err: unknown): unknown {
    return lockTimeoutError(err, this.o.timeoutMs, this.#lastSeen) ?? err;
  }

  async #look(): Promise<void> {
    const { backend, onWait } = this.o;
    if (this.#looking || backend === undefined) return;
    this.#looking = true;
    try {
      const waiting = await lookWaiting(backend.pool, backend.pid);
      if (waiting === undefined) return;
      this.#lastSeen = waiting;
      const key = `${waiting.relation} ${waiting.mode} ${waiting.since}`;
      // Not after stop(): the wait is over.
      if (waiting.waitedMs < LOCK_WAIT_WARN_MS || this.#reported === key || this.#timer === undefined) return;
      this.#reported = key;
      const { since: _since, ...wait } = waiting;
      onWait(wait);
    } catch {
      // The pool busy or the database gone: the work reports it.
    } finally {
      this.#looking = false;
    }
  }
}

/** A {@link DatabaseError} for a lock_timeout (55P03) anywhere in `err`'s cause chain; else undefined. */
function lockTimeoutError(err: unknown, timeoutMs: number | undefined, seen: LockWait | undefined): DatabaseError | undefined {
  let current: unknown = err;
  for (let depth = 0; current !== null && typeof current === 'object' && depth < 5; depth++) {
    const { code, cause } = current as { code?: unknown; cause?: unknown };
    if (code === '55P03') {
      const on = seen === undefined ? '' : ` on ${seen.relation} (${seen.mode})`;
      const limit = timeoutMs === undefined ? 'lock_timeout' : `DATABASE_LOCK_TIMEOUT (${formatDuration(timeoutMs)})`;
      return new DatabaseError(`waiting for a lock${on} took longer than ${limit} [55P03]`, { cause: current });
    }
    current = cause;
  }
  return undefined;
}

/** The session's `lock_timeout` on `client` (ms; undefined: the server's), for {@link LockWatcher}'s session. */
export async function setLockTimeout(client: PoolClient, timeoutMs: number | undefined): Promise<void> {
  if (timeoutMs === undefined) await client.query('reset lock_timeout');
  else await client.query('select set_config($1, $2, false)', ['lock_timeout', `${Math.max(1, Math.round(timeoutMs))}ms`]);
}
