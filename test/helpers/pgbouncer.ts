/**
 * A throwaway PgBouncer (Debian's `pgbouncer`, scripts/ensure-pgbouncer.sh) in front of the test
 * cluster: its own temp folder, 127.0.0.1 on a free port, auth_type trust with a userlist naming
 * the cluster's user, and the pool mode and size a test asks for. As root it runs as the
 * `postgres` OS user (PgBouncer refuses root), like the cluster; a crashed run leaves nothing
 * behind (test/helpers/processes.ts).
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { registerCleanup, type RunAs } from './processes.js';
import { freePort } from './ports.js';
import { until } from './wait.js';

export const PGBOUNCER_BINARY = '/usr/sbin/pgbouncer';

export interface PgBouncer {
  /** `postgres://USER@127.0.0.1:PORT/DATABASE`: the test database of `databaseUrl`, through the pooler. */
  readonly url: string;
  /** What it wrote on stderr so far. */
  readonly log: () => string;
  /** SIGTERM, then SIGKILL after 2 s; deletes the folder. Idempotent. */
  stop(): Promise<void>;
}

export interface PgBouncerOptions {
  /** A database URL of the test cluster (user, host, port, database are kept). */
  databaseUrl: string;
  poolMode: 'session' | 'transaction' | 'statement';
  /** default_pool_size. */
  poolSize: number;
}

function runAsPostgres(): RunAs | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const id = (flag: string) => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }));
  return { uid: id('-u'), gid: id('-g') };
}

const exited = (child: ChildProcess) =>
  child.exitCode !== null || child.signalCode !== null ? Promise.resolve() : new Promise<void>((resolve) => child.once('close', () => resolve()));

/**
 * Starts PgBouncer in front of `options.databaseUrl`'s server and resolves once a query passes
 * through it. @throws when the binary is missing (with the script that installs it) or it does not start.
 */
export async function startPgBouncer(options: PgBouncerOptions): Promise<PgBouncer> {
  if (!existsSync(PGBOUNCER_BINARY)) throw new Error(`${PGBOUNCER_BINARY} not found: run scripts/ensure-pgbouncer.sh (apt-get install -y pgbouncer)`);
  const target = new URL(options.databaseUrl);
  const user = decodeURIComponent(target.username || 'postgres');
  const dir = mkdtempSync(join(tmpdir(), 'pgbouncer-'));
  const runAs = runAsPostgres();
  const port = await freePort();
  writeFileSync(join(dir, 'userlist.txt'), `"${user}" ""\n`);
  const ini = [
    '[databases]',
    `* = host=${target.hostname} port=${target.port || '5432'}`,
    '[pgbouncer]',
    'listen_addr = 127.0.0.1',
    `listen_port = ${port}`,
    'unix_socket_dir =',
    'auth_type = trust',
    `auth_file = ${join(dir, 'userlist.txt')}`,
    `pool_mode = ${options.poolMode}`,
    `default_pool_size = ${options.poolSize}`,
    'max_client_conn = 500',
    'ignore_startup_parameters = extra_float_digits,options',
    'log_connections = 0',
    'log_disconnections = 0',
  ];
  writeFileSync(join(dir, 'pgbouncer.ini'), `${ini.join('\n')}\n`);
  if (runAs !== undefined) {
    for (const file of ['', 'userlist.txt', 'pgbouncer.ini']) chownSync(join(dir, file), runAs.uid, runAs.gid);
    chmodSync(dir, 0o755);
  }
  const child = spawn(PGBOUNCER_BINARY, [join(dir, 'pgbouncer.ini')], { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'], ...(runAs ?? {}) });
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const cleanup = registerCleanup({ dir, stopNow: () => child.kill('SIGKILL') });
  cleanup.watch({ name: 'pgbouncer-watchdog', stopScript: 'kill -9 "$1" 2>/dev/null || true', args: [String(child.pid)] });
  const url = `postgres://${encodeURIComponent(user)}@127.0.0.1:${port}${target.pathname}`;
  let stopping: Promise<void> | undefined;
  const stop = () =>
    (stopping ??= (async () => {
      child.kill('SIGTERM');
      const killer = setTimeout(() => child.kill('SIGKILL'), 2_000);
      await exited(child);
      clearTimeout(killer);
      cleanup.release();
    })());
  try {
    await until(
      'pgbouncer accepting connections',
      async () => {
        if (child.exitCode !== null) throw new Error(`pgbouncer exited ${child.exitCode}: ${stderr}`);
        const client = new pg.Client({ connectionString: url });
        try {
          await client.connect();
          await client.query('select 1');
          return true;
        } finally {
          await client.end().catch(() => undefined);
        }
      },
      15_000,
      100,
    );
  } catch (err) {
    await stop();
    throw new Error(`pgbouncer did not start: ${(err as Error).message}\n${stderr}`, { cause: err });
  }
  return { url, log: () => stderr, stop };
}
