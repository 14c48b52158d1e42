/**
 * `npm run soak [-- --minutes N] [-- --out FILE]`
 *
 * The soak: runs `serve` (dist/cli.js, a child process) with a sync every 15 seconds and a
 * 2-second metrics cache against the simulator (in-process, so the harness can steer its faults
 * and knows its exact dataset) injecting faults (soak/faults.ts), with a throwaway PostgreSQL
 * (test/helpers/postgres.ts). The dataset runs from an hour before the start to past the end,
 * so new windows keep becoming due. Every 5 seconds it scrapes /metrics and /readyz and samples
 * serve's resident set, open descriptors, active handles and database connections
 * (soak/sampler.ts). At the end it stops serve with SIGTERM (it must exit 0), turns the faults
 * off, runs one `sync` and checks every committed window against the dataset (soak/verify.ts).
 * Flatness is judged numerically (soak/flat.ts). Prints a table, writes soak/RESULT.md, and
 * exits 0 when every check passed, 1 when one failed, 2 on bad usage.
 *
 * Needs Linux (/proc) and the PostgreSQL server binaries, as the tests do.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createWriteStream, mkdtempSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { CLI_PATH, ROOT, requireBuild, runSyncChild, upstreamEnv } from '../bench/lib/children.js';
import { machineTicks, postgresCpuSeconds, processCpuSeconds, stealShare } from '../bench/lib/cpu.js';
import { describeMachine } from '../bench/lib/machine.js';
import { startSimulator } from '../src/simulator/index.js';
import { createTestDatabase, startThrowawayCluster } from '../test/helpers/postgres.js';
import { drainQueuedFaults, FaultDriver } from './faults.js';
import { judgeFlat, type FlatVerdict } from './flat.js';
import { renderMarkdown, renderTable, type Check, type SoakResult } from './report.js';
import { takeSample, type Sample } from './sampler.js';
import { verifyWindows, type WindowCheck } from './verify.js';

const DEFAULT_MINUTES = 30;
const MAX_MINUTES = 24 * 60;
const SAMPLE_EVERY_MS = 5_000;
const SCHEMA = 'analytics';
const WINDOW_MS = 60_000;
/** Data before the soak that serve's first run backfills. */
const BACKFILL_MS = 60 * 60_000;
/** Simulated records per second of data (the backfill included). */
const RECORDS_PER_SECOND = 20;
/** serve must exit within this after SIGTERM (its own grace is 15 s). */
const SHUTDOWN_LIMIT_MS = 20_000;
/** At the end, the watermark may lag the clock by at most this. */
const MAX_END_LAG_MS = 3 * 60_000;
const SCOPE = 'api.external';

/** serve's settings (apart from the upstream and the database). */
function serveSettings(syncStart: Date): Record<string, string> {
  return {
    SYNC_SCHEDULE: '*/15 * * * * *',
    SYNC_START_DATE: syncStart.toISOString(),
    SYNC_WINDOW: '1m',
    SYNC_SETTLE: '10s',
    SYNC_LOOKBACK: '5m',
    SYNC_PAGE_SIZE: '500',
    METRICS_CACHE_TTL: '2s',
    METRICS_LISTEN: '127.0.0.1:0',
    UPSTREAM_TIMEOUT: '5s',
    UPSTREAM_RETRY_MAX_DELAY: '5s',
    LOG_LEVEL: 'info',
  };
}

function usage(message?: string): never {
  const text =
    'usage: npm run soak -- [--minutes N] [--out FILE]\n' +
    `  --minutes N   how long serve runs under faults, in minutes (default ${DEFAULT_MINUTES}; more than 0, at most ${MAX_MINUTES}; decimals allowed)\n` +
    '  --out FILE    where the markdown result goes (default soak/RESULT.md)\n' +
    'Exit status: 0 every check passed, 1 a check failed, 2 bad usage.\n';
  if (message === undefined) {
    process.stdout.write(text);
    process.exit(0);
  }
  process.stderr.write(`soak: ${message}\n${text}`);
  process.exit(2);
}

function parseCli(): { minutes: number; out: string } {
  let values: { minutes?: string; out?: string; help?: boolean };
  try {
    ({ values } = parseArgs({ options: { minutes: { type: 'string' }, out: { type: 'string' }, help: { type: 'boolean', short: 'h' } }, strict: true }));
  } catch (err) {
    usage((err as Error).message);
  }
  if (values.help) usage();
  const raw = values.minutes ?? String(DEFAULT_MINUTES);
  const minutes = /^\d+(\.\d+)?$/.test(raw.trim()) ? Number(raw) : Number.NaN;
  if (!(minutes > 0 && minutes <= MAX_MINUTES))
    usage(`--minutes must be a number of minutes greater than 0 and at most ${MAX_MINUTES}; got ${JSON.stringify(raw)}`);
  if (values.out === '') usage('--out must name a file; got ""');
  return { minutes, out: resolve(values.out ?? join(ROOT, 'soak', 'RESULT.md')) };
}

/** A `serve` child whose pid the sampler reads, and whose exit status the soak checks. */
interface ServeProcess {
  child: ChildProcess;
  pid: number;
  url: string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/**
 * Starts `node dist/cli.js serve` with exactly `env` (plus PATH and HOME). bench/lib/children.ts
 * has startServeChild, but it turns the schedule off and hides the pid and exit status, which a
 * soak needs. Every stderr line goes to `logFile`; warn and worse are counted by message into
 * `logCounts`.
 */
async function startServe(env: Record<string, string>, logFile: string, logCounts: Record<string, number>): Promise<ServeProcess> {
  const child = spawn(process.execPath, [CLI_PATH, 'serve'], {
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    cwd: ROOT,
  });
  process.on('exit', () => child.kill('SIGKILL'));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((done) => child.once('exit', (code, signal) => done({ code, signal })));
  const log = createWriteStream(logFile);
  child.stdout.resume();
  let pending = '';
  let resolveUrl: (url: string) => void;
  const urlSeen = new Promise<string>((r) => (resolveUrl = r));
  child.stderr.on('data', (chunk: Buffer) => {
    log.write(chunk);
    pending += chunk.toString();
    const lines = pending.split('\n');
    pending = lines.pop()!;
    for (const line of lines) {
      const url = /serving (http:\/\/[^\s/"]+)\/metrics/.exec(line);
      if (url) resolveUrl(url[1]!);
      try {
        // pino writes level labels here (LOG_LEVEL's formatter); numbers are accepted too.
        const entry = JSON.parse(line) as { level?: string | number; msg?: string };
        const level = entry.level ?? 0;
        if (typeof level === 'number' ? level >= 40 : ['warn', 'error', 'fatal'].includes(level)) {
          const key = `${level}: ${entry.msg ?? '(no message)'}`;
          logCounts[key] = (logCounts[key] ?? 0) + 1;
        }
      } catch {
        logCounts['(not a JSON log line)'] = (logCounts['(not a JSON log line)'] ?? 0) + 1;
      }
    }
  });
  exited.then(
    () => log.end(),
    () => log.end(),
  );
  const url = await Promise.race([
    urlSeen,
    exited.then(({ code, signal }) => Promise.reject(new Error(`serve exited (${signal ?? `code ${code}`}) before it was serving; log: ${logFile}`))),
    new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`serve did not start within 30 s; log: ${logFile}`)), 30_000).unref()),
  ]);
  return { child, pid: child.pid!, url, exited };
}

/** The commit measured, and whether src/, migrations/ or package.json differ from it (then the figures are of uncommitted code). */
function revision(): string {
  try {
    const commit = execFileSync('git', ['rev-parse', '--short=12', 'HEAD'], { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    const dirty = execFileSync('git', ['status', '--porcelain', '--', 'src', 'migrations', 'package.json'], {
      cwd: ROOT,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    }).trim();
    return dirty === '' ? commit : `${commit} with uncommitted changes in ${[...new Set(dirty.split('\n').map((l) => l.slice(3).split('/')[0]))].join(', ')}`;
  } catch {
    return 'unknown (not a git checkout)';
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function flatVerdicts(samples: Sample[]): FlatVerdict[] {
  const finite = (pick: (s: Sample) => number) => samples.map(pick).filter(Number.isFinite);
  return [
    judgeFlat(
      finite((s) => s.rssBytes),
      { name: 'RSS', maxGrowthRatio: 0.1 },
      (v) => `${(v / 2 ** 20).toFixed(1)} MiB`,
    ),
    judgeFlat(
      finite((s) => s.fds),
      { name: 'open fds', levelSlack: 2, peakSlack: 4 },
    ),
    judgeFlat(
      finite((s) => s.handles),
      { name: 'active handles', levelSlack: 2, peakSlack: 4 },
    ),
    judgeFlat(
      finite((s) => s.dbConnections),
      { name: 'DB connections', levelSlack: 1, peakSlack: 1 },
    ),
  ];
}

async function main(): Promise<void> {
  const { minutes, out } = parseCli();
  requireBuild();
  const scratch = mkdtempSync(join(tmpdir(), 'soak-'));
  const logFile = join(scratch, 'serve.log');
  const startedAt = new Date();
  const measured = revision();
  const log = (line: string) => process.stdout.write(`[soak ${((Date.now() - startedAt.getTime()) / 60_000).toFixed(1).padStart(5)} min] ${line}\n`);
  log(`${minutes} minutes; serve's log: ${logFile}`);

  const cluster = await startThrowawayCluster({ ignoreTestDatabaseUrl: true });
  const db = await createTestDatabase(cluster.url, 'soak');
  const admin = new pg.Client({ connectionString: db.url, application_name: 'soak-harness' });
  await admin.connect();
  const machine = await describeMachine(cluster.url);

  const syncStart = new Date(Math.floor((startedAt.getTime() - BACKFILL_MS) / WINDOW_MS) * WINDOW_MS);
  const dataEnd = new Date(Math.ceil((startedAt.getTime() + (minutes + 30) * 60_000) / WINDOW_MS) * WINDOW_MS);
  const credentials = { clientId: 'soak-client', clientSecret: randomBytes(18).toString('base64url'), scope: SCOPE };
  const sim = await startSimulator({
    records: Math.round(((dataEnd.getTime() - syncStart.getTime()) / 1000) * RECORDS_PER_SECOND),
    start: syncStart,
    end: dataEnd,
    ...credentials,
  });
  const settings = serveSettings(syncStart);
  const env = upstreamEnv(sim.url, db.url, {
    ...settings,
    CLIENT_ID: credentials.clientId,
    CLIENT_SECRET: credentials.clientSecret,
    DATABASE_SCHEMA: SCHEMA,
    TOKEN_SCOPE: SCOPE,
  });
  log(
    `PostgreSQL ${machine.postgres.split(' ')[1] ?? ''}, simulator ${sim.url} with ${sim.dataset.size} records from ${syncStart.toISOString()} to ${dataEnd.toISOString()}`,
  );

  const driver = new FaultDriver({
    sim,
    admin,
    dbName: db.name,
    schema: SCHEMA,
    // Database kills every 4 minutes, more often in a short soak so that it sees a few.
    schedule: {
      tickMs: 1_000,
      queueEveryMs: 10_000,
      arrivalsEveryMs: 45_000,
      lateEveryMs: 40_000,
      dbKillEveryMs: Math.min(4 * 60_000, Math.max(40_000, (minutes * 60_000) / 4)),
      lateSpanMs: 4 * 60_000,
    },
  });
  driver.start();
  const logCounts: Record<string, number> = {};
  const serve = await startServe(env, logFile, logCounts);
  const serveStarted = performance.now();
  const serveStartedWall = Date.now();
  log(`serve pid ${serve.pid} at ${serve.url}; faults on`);

  const ticksBefore = machineTicks();
  const loadStart = loadavg()[0]!;
  const pgCpuBefore = postgresCpuSeconds(cluster.dataDir);
  const samples: Sample[] = [];
  const endAt = serveStarted + minutes * 60_000;
  let nextReport = serveStarted + 60_000;
  for (let next = serveStarted + SAMPLE_EVERY_MS; next <= endAt; next += SAMPLE_EVERY_MS) {
    await sleep(Math.max(0, next - performance.now()));
    if (serve.child.exitCode !== null || serve.child.signalCode !== null) break;
    const sample = await takeSample((performance.now() - serveStarted) / 1000, serve.pid, serve.url, admin, db.name);
    samples.push(sample);
    if (performance.now() >= nextReport) {
      nextReport += 60_000;
      log(
        `RSS ${(sample.rssBytes / 2 ** 20).toFixed(1)} MiB, heap ${(sample.heapUsedBytes / 2 ** 20).toFixed(1)} MiB, fds ${sample.fds}, handles ${sample.handles}, ` +
          `DB conns ${sample.dbConnections}, syncs ${sample.syncRuns - sample.syncFailures} ok / ${sample.syncFailures} failed, scrape ${sample.scrapeStatus} in ${sample.scrapeMs.toFixed(0)} ms`,
      );
    }
  }
  const serveCpuSeconds = processCpuSeconds(serve.pid);
  const steal = stealShare(ticksBefore, machineTicks());
  const loadEnd = loadavg()[0]!;
  await driver.stop();

  // SIGTERM: serve drains the HTTP server and the sync in flight, and must exit 0.
  const checks: Check[] = [];
  const termAt = performance.now();
  const died = serve.child.exitCode !== null || serve.child.signalCode !== null;
  serve.child.kill('SIGTERM');
  const shutdown = await Promise.race([serve.exited, sleep(SHUTDOWN_LIMIT_MS).then(() => undefined)]);
  const shutdownSeconds = (performance.now() - termAt) / 1000;
  if (shutdown === undefined) serve.child.kill('SIGKILL');
  const exit = shutdown ?? { code: null, signal: 'SIGKILL' as NodeJS.Signals };
  const pgCpuSeconds = (() => {
    const after = postgresCpuSeconds(cluster.dataDir);
    return after === undefined || pgCpuBefore === undefined ? undefined : after - pgCpuBefore;
  })();
  checks.push({
    name: 'serve ran the whole soak and exited 0 on SIGTERM',
    pass: !died && exit.code === 0,
    detail: died
      ? `serve died during the soak (${JSON.stringify(exit)}); log ${logFile}`
      : `exit ${exit.signal ?? exit.code} after ${shutdownSeconds.toFixed(1)} s`,
  });
  log(`serve stopped: exit ${exit.signal ?? exit.code} after ${shutdownSeconds.toFixed(1)} s`);

  const { rows: statusRows } = await admin.query<{ status: string; n: string }>(
    `select status, count(*) as n from ${admin.escapeIdentifier(SCHEMA)}.sync_runs group by status order by status`,
  );
  const byStatus = Object.fromEntries(statusRows.map((r) => [r.status, Number(r.n)]));
  const last = samples.at(-1);

  // The final sync runs without faults, as cron would after an outage.
  const drained = await drainQueuedFaults(sim, credentials);
  let finalSync: SoakResult['finalSync'];
  try {
    const run = await runSyncChild([], { ...env, SYNC_SCHEDULE: 'off', METRICS_LISTEN: '127.0.0.1:0' });
    finalSync = {
      pass: true,
      wallSeconds: run.wallSeconds,
      detail: `succeeded in ${run.wallSeconds.toFixed(1)} s (${JSON.stringify(run.summary?.windows ?? '?')} windows, ${JSON.stringify(run.summary?.records ?? '?')} records)${drained ? `, after ${drained} requests used up queued faults` : ''}`,
    };
  } catch (err) {
    finalSync = { pass: false, wallSeconds: 0, detail: `failed: ${(err as Error).message.slice(0, 600)}` };
  }
  checks.push({ name: 'final sync without faults exits 0', pass: finalSync.pass, detail: finalSync.detail });
  log(`final sync ${finalSync.detail}`);

  let windowCheck: WindowCheck | undefined;
  try {
    windowCheck = await verifyWindows(admin, SCHEMA, sim, syncStart);
    checks.push({
      name: 'every window exact',
      pass: windowCheck.pass,
      detail: windowCheck.pass
        ? `${windowCheck.windows} windows, ${windowCheck.storedRecords} records = the simulator's, ${syncStart.toISOString()} to ${windowCheck.watermark?.toISOString()}`
        : windowCheck.problems.join('; '),
    });
  } catch (err) {
    checks.push({ name: 'every window exact', pass: false, detail: `could not check: ${(err as Error).message}` });
  }

  const flat = flatVerdicts(samples);
  for (const v of flat) checks.push({ name: `${v.rule.name} flat`, pass: v.pass, detail: v.reason });

  const failedScrapes = samples.filter((s) => s.scrapeStatus !== 200);
  const slowest = Math.max(0, ...samples.map((s) => s.scrapeMs));
  checks.push({
    name: '/metrics answered 200 to every scrape',
    pass: samples.length > 0 && failedScrapes.length === 0,
    detail: `${samples.length - failedScrapes.length}/${samples.length} scrapes 200, slowest ${slowest.toFixed(0)} ms; upstream_up 0 in ${samples.filter((s) => s.upstreamUp === 0).length}; /readyz not 200 in ${samples.filter((s) => s.readyStatus !== 200).length}`,
  });

  const at75 = samples[Math.floor(samples.length * 0.75)];
  const okAt = (s: Sample | undefined) => (s === undefined ? Number.NaN : s.syncRuns - s.syncFailures);
  const lateSuccesses = okAt(last) - okAt(at75);
  // The watermark against the wall clock at the last sample.
  const lagMs = last === undefined ? Number.NaN : serveStartedWall + last.t * 1000 - last.watermarkSeconds * 1000;
  checks.push({
    name: 'syncs kept succeeding to the end',
    pass: lateSuccesses > 0 && lagMs <= MAX_END_LAG_MS,
    detail: `${Number.isFinite(lateSuccesses) ? lateSuccesses : 'no'} successful runs in the last quarter; watermark ${(lagMs / 1000).toFixed(0)} s behind the clock at the last sample (limit ${MAX_END_LAG_MS / 1000} s)`,
  });

  const result: SoakResult = {
    minutes,
    revision: measured,
    startedAt,
    finishedAt: new Date(),
    machine,
    loadStart,
    loadEnd,
    steal,
    settings,
    sampleEverySeconds: SAMPLE_EVERY_MS / 1000,
    samples,
    flat,
    checks,
    syncs: { runs: last?.syncRuns ?? 0, failures: last?.syncFailures ?? 0, skipped: last?.syncSkipped ?? 0, byStatus },
    faults: driver.tally,
    responses: { ...sim.stats.responses },
    requests: { token: sim.stats.tokenRequests, analytics: sim.stats.analyticsRequests, prometheus: sim.stats.prometheusRequests },
    serveCpuSeconds,
    postgresCpuSeconds: pgCpuSeconds,
    shutdown: { code: exit.code, signal: exit.signal, seconds: shutdownSeconds },
    finalSync,
    windowCheck,
    logCounts,
    driverErrors: driver.errors,
  };
  process.stdout.write(`${renderTable(result)}\n`);
  writeFileSync(out, renderMarkdown(result));
  const pass = checks.every((c) => c.pass);
  log(`${pass ? 'PASSED' : 'FAILED'}; wrote ${out}`);

  // Every sample, for looking closer than the report's medians (the folder is kept, like serve's log).
  const columns = Object.keys(samples[0] ?? {}) as (keyof Sample)[];
  writeFileSync(join(scratch, 'samples.csv'), [columns.join(','), ...samples.map((x) => columns.map((c) => String(x[c])).join(','))].join('\n') + '\n');
  log(`serve's log and samples.csv kept in ${scratch}`);

  await admin.end();
  await sim.close();
  await db.drop();
  await cluster.stop();
  process.exitCode = pass ? 0 : 1;
}

main().catch((err: unknown) => {
  process.stderr.write(`soak: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
