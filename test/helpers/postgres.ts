/**
 * Throwaway PostgreSQL servers for integration tests (CONTRIBUTING.md, "Tests").
 *
 * A cluster lives in its own temp folder, listens only on 127.0.0.1 on a free port, trusts
 * every local connection, and trades durability for speed (fsync, synchronous_commit and
 * full_page_writes are off): it is meant to be thrown away. Tests get isolation from a fresh
 * database each ({@link createTestDatabase}), not from a cluster each, because CREATE DATABASE
 * takes milliseconds and a cluster takes about a second.
 *
 * PostgreSQL refuses to run as root, and CI runs as root: then every server process is spawned
 * as the `postgres` OS user (Node's `uid`/`gid` spawn options, which also drop root's
 * supplementary groups) and the temp folder is chowned to it.
 *
 * Nothing here may leave a postmaster behind after a crashed run: clusters are stopped with
 * `pg_ctl -m immediate` on process exit and on SIGINT/SIGTERM/SIGHUP, and a detached watchdog
 * shell stops the cluster and deletes its folder if the Node process dies without a chance to
 * clean up (SIGKILL, OOM); test/helpers/processes.ts does both.
 */
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { appendFileSync, chmodSync, chownSync, copyFileSync, existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import pg from 'pg';
import { registerCleanup, type RunAs } from './processes.js';
import { freePort } from './ports.js';

/** Where the PostgreSQL server binaries were found, and which major version they are. */
export interface PostgresBinaries {
  /** Folder holding initdb, pg_ctl and postgres. */
  binDir: string;
  /** Output of `postgres --version`, e.g. "postgres (PostgreSQL) 15.14 (Debian 15.14-0+deb12u1)". */
  versionText: string;
  /** Major version, e.g. 15. */
  major: number;
}

/** A running PostgreSQL server that tests may connect to. */
export interface ThrowawayCluster {
  /** `postgres://postgres@127.0.0.1:PORT/postgres`, or TEST_DATABASE_URL when that is set. */
  readonly url: string;
  /** TCP port on 127.0.0.1 (or the port in TEST_DATABASE_URL). */
  readonly port: number;
  /** The cluster's temp folder (data directory inside it); null for an external TEST_DATABASE_URL server. */
  readonly dataDir: string | null;
  /** True when this handle wraps TEST_DATABASE_URL instead of a server started here. */
  readonly external: boolean;
  /** Fast shutdown, then deletes the temp folder. Idempotent. A no-op for an external server. */
  stop(): Promise<void>;
  /**
   * Fast shutdown (if running) and start again on the same port with the same data; also brings
   * a cluster back after {@link ThrowawayCluster.kill}. Throws for an external server.
   */
  restart(): Promise<void>;
  /** Immediate shutdown (like a crash: no checkpoint, clients cut off); keeps the data. Throws for an external server. */
  kill(): Promise<void>;
}

/** Options for {@link startThrowawayCluster}. */
export interface StartClusterOptions {
  /** Start a local cluster even when TEST_DATABASE_URL is set (for tests that restart or kill the server). */
  ignoreTestDatabaseUrl?: boolean;
  /** Extra `postgresql.conf` settings, e.g. `{ log_min_duration_statement: '0' }`. */
  settings?: Record<string, string>;
  /**
   * Serve TLS (`ssl = on`) with this certificate and key (PEM files, copied into the data
   * directory, the key made 0600 as PostgreSQL requires); `caFile` becomes `ssl_ca_file`, the
   * roots client certificates are checked against. Implies a local cluster (TEST_DATABASE_URL
   * is ignored).
   */
  tls?: { certFile: string; keyFile: string; caFile?: string };
  /**
   * Lines of `pg_hba.conf` replacing initdb's (which trusts every local connection, TLS or not),
   * e.g. `hostssl all all 127.0.0.1/32 trust` to refuse plain TCP connections. A `local` line is
   * added first, so that pg_ctl can reach the server on its socket.
   */
  hba?: string[];
}

/** A fresh database made by {@link createTestDatabase}. */
export interface TestDatabase {
  /** The database's name (lowercase letters, digits and `_`). */
  readonly name: string;
  /** Connection URL: the base URL with its path replaced by the new database's name. */
  readonly url: string;
  /** Terminates every connection to the database, then drops it. Idempotent. */
  drop(): Promise<void>;
}

const INSTALL_HINT =
  'PostgreSQL server binaries (initdb, pg_ctl, postgres) were not found via `pg_config --bindir`, ' +
  'in /usr/lib/postgresql/*/bin or on PATH. Install them with `apt-get install postgresql` ' +
  '(or run scripts/ensure-postgres.sh), or point TEST_DATABASE_URL at a running server.';
const PG_CTL_WAIT_SECONDS = 60;
const PORT_ATTEMPTS = 5;

let cachedBinaries: PostgresBinaries | undefined;

/**
 * Finds the PostgreSQL server binaries: `pg_config --bindir` first, then the highest version
 * under /usr/lib/postgresql/<version>/bin (Debian layout), then PATH. A folder only counts if
 * it holds initdb, pg_ctl and postgres. The result is cached for the process.
 *
 * @throws Error with installation instructions when no usable folder exists.
 */
export function findPostgresBinaries(): PostgresBinaries {
  if (cachedBinaries) return cachedBinaries;
  const binDir = candidateBinDirs().find(hasServerBinaries);
  if (binDir === undefined) throw new Error(INSTALL_HINT);
  const versionText = execFileSync(join(binDir, 'postgres'), ['--version'], { encoding: 'utf8' }).trim();
  const major = Number(/\(PostgreSQL\)\s+(\d+)/.exec(versionText)?.[1]);
  if (!Number.isInteger(major)) throw new Error(`Cannot read the PostgreSQL version from "${versionText}" (${binDir}/postgres)`);
  cachedBinaries = { binDir, versionText, major };
  return cachedBinaries;
}

function candidateBinDirs(): string[] {
  const dirs: string[] = [];
  try {
    dirs.push(execFileSync('pg_config', ['--bindir'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim());
  } catch {
    // No pg_config (or a client-only one that fails): fall through to the other places.
  }
  const debianRoot = '/usr/lib/postgresql';
  if (existsSync(debianRoot)) {
    const versions = readdirSync(debianRoot)
      .filter((name) => /^\d+(\.\d+)?$/.test(name))
      .sort((a, b) => Number(b) - Number(a));
    dirs.push(...versions.map((version) => join(debianRoot, version, 'bin')));
  }
  dirs.push(...(process.env.PATH ?? '').split(delimiter).filter((dir) => dir !== ''));
  return dirs;
}

function hasServerBinaries(dir: string): boolean {
  return ['initdb', 'pg_ctl', 'postgres'].every((name) => existsSync(join(dir, name)));
}

/** Whom the server runs as: the `postgres` OS user when we are root, else ourselves (undefined). */
function serverUser(): RunAs | undefined {
  if (process.getuid?.() !== 0) return undefined;
  try {
    const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }));
    const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }));
    return { uid, gid };
  } catch (error) {
    throw new Error(
      'Running as root, but PostgreSQL refuses to run as root and there is no `postgres` OS user to run it as. ' +
        'Create one (`useradd --system postgres`, or `apt-get install postgresql` does it) or run the tests as a normal user.',
      { cause: error },
    );
  }
}

/** Runs a PostgreSQL binary (as the server user) and resolves with its output; rejects with the output on failure. */
function runTool(file: string, args: string[], runAs: RunAs | undefined, cwd: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, {
      cwd,
      // HOME of root is not readable by the postgres user; keep its tools away from it.
      env: { ...process.env, HOME: cwd, LC_ALL: 'C' },
      stdio: ['ignore', 'pipe', 'pipe'],
      ...(runAs ?? {}),
    });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.on('error', reject);
    child.on('close', (code, signal) => {
      if (code === 0) resolve(output);
      else reject(new Error(`${file} ${args.join(' ')} failed (${signal ?? `exit ${code}`}):\n${output.trim()}`));
    });
  });
}

function externalCluster(url: string): ThrowawayCluster {
  const parsed = new URL(url);
  const refuse = (what: string) => () =>
    Promise.reject(new Error(`Cannot ${what} the external TEST_DATABASE_URL server; start a local one with { ignoreTestDatabaseUrl: true }`));
  return {
    url,
    port: parsed.port === '' ? 5432 : Number(parsed.port),
    dataDir: null,
    external: true,
    stop: () => Promise.resolve(),
    restart: refuse('restart'),
    kill: refuse('kill'),
  };
}

/**
 * Starts a throwaway PostgreSQL cluster, or wraps TEST_DATABASE_URL when that is set (unless
 * `opts.ignoreTestDatabaseUrl`). The cluster is initdb'd in a fresh temp folder (`--auth=trust
 * -U postgres --encoding=UTF8 --locale=C`), listens on 127.0.0.1 on a free port with its unix
 * socket inside the folder, and is ready for connections when the promise resolves (about a
 * second, mostly initdb).
 *
 * @returns the cluster handle; its `url` is `postgres://postgres@127.0.0.1:PORT/postgres`.
 * @throws Error when no PostgreSQL binaries are installed (with how to install them), when
 *   running as root without a `postgres` OS user, or when initdb/pg_ctl fail (with their output
 *   and the server log).
 */
export async function startThrowawayCluster(opts: StartClusterOptions = {}): Promise<ThrowawayCluster> {
  const externalUrl = process.env.TEST_DATABASE_URL;
  if (externalUrl && !opts.ignoreTestDatabaseUrl && !opts.tls && !opts.hba) return externalCluster(externalUrl);

  const { binDir } = findPostgresBinaries();
  const pgCtl = join(binDir, 'pg_ctl');
  const runAs = serverUser();
  const root = mkdtempSync(join(tmpdir(), 'pg-test-'));
  const dataDir = join(root, 'data');
  const socketDir = root;
  const logFile = join(root, 'server.log');
  if (runAs) chownSync(root, runAs.uid, runAs.gid);

  // Immediate shutdown: no checkpoint to wait for, the data is thrown away anyway.
  const stopNow = () => execFileSync(pgCtl, ['-D', dataDir, '-m', 'immediate', '-w', 'stop'], { stdio: 'ignore', cwd: root, ...(runAs ?? {}) });
  const crashCleanup = registerCleanup({ dir: root, stopNow });
  const serverLog = () => (existsSync(logFile) ? readFileSync(logFile, 'utf8').trim() : '(no server log)');
  const pgCtlRun = (args: string[]) => runTool(pgCtl, ['-D', dataDir, ...args], runAs, root);
  const start = () => pgCtlRun(['-l', logFile, '-w', '-t', String(PG_CTL_WAIT_SECONDS), 'start']);
  const isRunning = async () => {
    try {
      await pgCtlRun(['status']);
      return true;
    } catch {
      return false;
    }
  };

  try {
    await runTool(
      join(binDir, 'initdb'),
      ['-D', dataDir, '--auth=trust', '-U', 'postgres', '--encoding=UTF8', '--locale=C', '--no-sync', '--no-instructions'],
      runAs,
      root,
    );
    crashCleanup.watch({
      name: 'pg-watchdog',
      stopScript: '"$1" -D "$2" -m immediate stop >/dev/null 2>&1',
      args: [pgCtl, dataDir],
      cwd: root,
      runAs,
    });

    const tlsSettings: Record<string, string> = {};
    if (opts.tls) {
      const place = (from: string, name: string) => {
        copyFileSync(from, join(dataDir, name));
        chmodSync(join(dataDir, name), 0o600);
        if (runAs) chownSync(join(dataDir, name), runAs.uid, runAs.gid);
      };
      place(opts.tls.certFile, 'server.crt');
      place(opts.tls.keyFile, 'server.key');
      Object.assign(tlsSettings, { ssl: 'on', ssl_cert_file: "'server.crt'", ssl_key_file: "'server.key'" });
      if (opts.tls.caFile !== undefined) {
        place(opts.tls.caFile, 'root.crt');
        tlsSettings.ssl_ca_file = "'root.crt'";
      }
    }
    if (opts.hba) writeFileSync(join(dataDir, 'pg_hba.conf'), ['local all all trust', ...opts.hba, ''].join('\n'));

    // Settings live in an included file so the port can be rewritten when it was taken meanwhile.
    const harnessConf = join(dataDir, 'harness.conf');
    appendFileSync(join(dataDir, 'postgresql.conf'), "\ninclude 'harness.conf'\n");
    const settings = (port: number): string =>
      Object.entries({
        listen_addresses: "'127.0.0.1'",
        port: String(port),
        unix_socket_directories: `'${socketDir}'`,
        max_connections: '200',
        fsync: 'off',
        synchronous_commit: 'off',
        full_page_writes: 'off',
        // Same results on every machine, whatever its local zone.
        timezone: "'UTC'",
        ...tlsSettings,
        ...opts.settings,
      })
        .map(([key, value]) => `${key} = ${value}\n`)
        .join('');

    let port = 0;
    for (let attempt = 1; ; attempt++) {
      port = await freePort();
      writeFileSync(harnessConf, settings(port));
      if (runAs) chownSync(harnessConf, runAs.uid, runAs.gid);
      try {
        await start();
        break;
      } catch (error) {
        const log = serverLog();
        if (attempt < PORT_ATTEMPTS && /could not bind|Address already in use/i.test(log)) continue;
        throw new Error(`PostgreSQL did not start. Server log (${logFile}):\n${log}`, { cause: error });
      }
    }

    const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
    // A cluster serving TLS may refuse plain connections (hba): the readiness probe encrypts, unverified.
    const ssl = opts.tls ? { rejectUnauthorized: false } : false;
    await waitForConnection(url, ssl);

    let stopped = false;
    return {
      url,
      port,
      dataDir,
      external: false,
      async stop() {
        if (stopped) return;
        stopped = true;
        if (await isRunning()) await pgCtlRun(['-m', 'fast', '-w', 'stop']);
        crashCleanup.release();
      },
      async restart() {
        if (stopped) throw new Error('restart() after stop(): the cluster folder is gone');
        if (await isRunning()) await pgCtlRun(['-m', 'fast', '-w', 'stop']);
        try {
          await start();
        } catch (error) {
          throw new Error(`PostgreSQL did not restart. Server log (${logFile}):\n${serverLog()}`, { cause: error });
        }
        await waitForConnection(url, ssl);
      },
      async kill() {
        if (stopped) throw new Error('kill() after stop(): the cluster folder is gone');
        if (await isRunning()) await pgCtlRun(['-m', 'immediate', '-w', 'stop']);
      },
    };
  } catch (error) {
    try {
      stopNow();
    } catch {
      // Never started.
    }
    crashCleanup.release();
    throw error;
  }
}

/** pg_ctl -w has seen the server ready on its socket; make sure TCP answers too before handing out the URL. */
async function waitForConnection(url: string, ssl: pg.ClientConfig['ssl'], timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const client = new pg.Client({ connectionString: url, ssl });
    try {
      await client.connect();
      await client.query('select 1');
      return;
    } catch (error) {
      if (Date.now() > deadline) throw new Error(`PostgreSQL at ${url} does not accept connections`, { cause: error });
      await new Promise((resolve) => setTimeout(resolve, 50));
    } finally {
      await client.end().catch(() => undefined);
    }
  }
}

/**
 * Creates a fresh, empty database on the server at `baseUrl` (from template0, UTF8), so a test
 * file or a test owns its tables outright. The name is `hint` reduced to `[a-z0-9_]` (at most
 * 40 characters, default "test") plus `_` and 12 random hex digits, so parallel workers never collide.
 *
 * @param baseUrl URL of any database on the server, used for CREATE/DROP DATABASE.
 * @param hint readable part of the name, e.g. the test file's name.
 * @returns the database's name, its URL (`baseUrl` with the path replaced) and `drop()`.
 * @throws pg's DatabaseError when the server refuses (e.g. no CREATEDB privilege).
 */
export async function createTestDatabase(baseUrl: string, hint = 'test'): Promise<TestDatabase> {
  const readable =
    hint
      .toLowerCase()
      .replace(/[^a-z0-9]+/g, '_')
      .replace(/^_+|_+$/g, '')
      .slice(0, 40) || 'test';
  const name = `${readable}_${randomBytes(6).toString('hex')}`;
  const url = new URL(baseUrl);
  url.pathname = `/${name}`;

  await withAdminClient(baseUrl, (client) => client.query(`create database ${client.escapeIdentifier(name)} template template0 encoding 'UTF8'`));

  let dropped = false;
  return {
    name,
    url: url.toString(),
    async drop() {
      if (dropped) return;
      dropped = true;
      // WITH (FORCE) terminates the remaining connections first (PostgreSQL 13+).
      await withAdminClient(baseUrl, (client) => client.query(`drop database if exists ${client.escapeIdentifier(name)} with (force)`));
    },
  };
}

async function withAdminClient<T>(url: string, fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}
