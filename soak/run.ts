/**
 * `npm run soak [-- --minutes N] [-- --out FILE]`
 *
 * The soak: runs `serve` (dist/cli.js, a child process) with a sync every 15 seconds and a
 * 2-second metrics cache, with a CONFIG_FILE of two sources, each its own simulator (in-process,
 * so the harness can steer its faults and knows its exact dataset; soak/sources.ts), one of them
 * serving records on a 10-second grid in `ties` order. Both inject faults (soak/faults.ts); the
 * database is a throwaway PostgreSQL (test/helpers/postgres.ts). The data is dense from an hour
 * before the start to past the end, so new windows keep becoming due, and sparse back to half an
 * hour before yesterday's UTC midnight: with day partitions, RETENTION is set so that this
 * oldest partition expires halfway through the soak, and serve's next run drops it
 * (soak/retention.ts). Every 5 seconds it scrapes /metrics and /readyz and samples serve's
 * resident set, open descriptors, active handles, database connections and whether that
 * partition is still there (soak/sampler.ts). At the end it stops serve with SIGTERM (it must
 * exit 0), turns the faults off, runs one `sync` and checks, per source, every committed window
 * against its dataset (soak/verify.ts; expired windows hold nothing) and the rollups and field
 * catalogue against the records (soak/derived.ts). Flatness is judged numerically
 * (soak/flat.ts). Prints a table, writes soak/RESULT.md, and exits 0 when every check passed,
 * 1 when one failed, 2 on bad usage.
 *
 * Needs Linux (/proc) and the PostgreSQL server binaries, as the tests do.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, mkdtempSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { CLI_PATH, ROOT, requireBuild, runSyncChild } from '../bench/lib/children.js';
import { machineTicks, postgresCpuSeconds, processCpuSeconds, stealShare } from '../bench/lib/cpu.js';
import { describeMachine } from '../bench/lib/machine.js';
import { parseDuration } from '../src/time.js';
import { createTestDatabase, startThrowawayCluster } from '../test/helpers/postgres.js';
import { verifyDerived, type DerivedCheck } from './derived.js';
import { drainQueuedFaults, FaultDriver } from './faults.js';
import { judgeFlat, type FlatVerdict } from './flat.js';
import { renderMarkdown, renderTable, type Check, type SoakResult } from './report.js';
import { partitionExists, planRetention, readExpiredLedger } from './retention.js';
import { takeSample, type Sample } from './sampler.js';
import { startSources } from './sources.js';
import { verifyWindows, type WindowCheck } from './verify.js';

const DEFAULT_MINUTES = 30;
const MAX_MINUTES = 24 * 60;
const SAMPLE_EVERY_MS = 5_000;
const SCHEMA = 'analytics';
/**
 * SYNC_WINDOW: 5 minutes, so that the first run's backfill of more than a day of sparse data is a
 * few hundred windows, while each run's re-read (SYNC_LOOKBACK rounded out to windows) stays
 * about ten minutes of dense data.
 */
const WINDOW = '5m';
const WINDOW_MS = 5 * 60_000;
/** Dense data before the soak, which serve's first run loads with the sparse part before it. */
const DENSE_BEFORE_MS = 60 * 60_000;
/** serve must exit within this after SIGTERM (its own grace is 15 s). */
const SHUTDOWN_LIMIT_MS = 20_000;
/** At the end, the watermark may lag the clock by at most this. */
const MAX_END_LAG_MS = 3 * 60_000;

/** serve's settings (apart from CONFIG_FILE and the database). */
function serveSettings(syncStart: Date, retention: string): Record<string, string> {
  return {
    SYNC_SCHEDULE: '*/15 * * * * *',
    SYNC_START_DATE: syncStart.toISOString(),
    SYNC_WINDOW: WINDOW,
    SYNC_SETTLE: '10s',
    SYNC_LOOKBACK: '5m',
    SYNC_PAGE_SIZE: '500',
    METRICS_CACHE_TTL: '2s',
    METRICS_LISTEN: '127.0.0.1:0',
    UPSTREAM_TIMEOUT: '5s',
    UPSTREAM_RETRY_MAX_DELAY: '5s',
    PARTITION_INTERVAL: 'day',
    RETENTION: retention,
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

/** `succeeded` lines of a `sync` child's log, by source: the run of each source that succeeded. */
function succeededBySource(stderr: string): Map<string, { windows: unknown; records: unknown }> {
  const out = new Map<string, { windows: unknown; records: unknown }>();
  for (const line of stderr.split('\n')) {
    if (!line.includes('"sync run succeeded"')) continue;
    try {
      const entry = JSON.parse(line) as { source?: string; windows?: unknown; records?: unknown };
      out.set(entry.source ?? '?', { windows: entry.windows, records: entry.records });
    } catch {
      // Not a JSON line: the check below finds the source missing.
    }
  }
  return out;
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

  // Planned from now, just before serve starts: the drop falls halfway through serve's run.
  const plan = planRetention(new Date(), minutes, WINDOW_MS);
  const syncStart = plan.syncStart;
  const denseStart = new Date(Math.floor((Date.now() - DENSE_BEFORE_MS) / WINDOW_MS) * WINDOW_MS);
  const dataEnd = new Date(Math.ceil((Date.now() + (minutes + 30) * 60_000) / WINDOW_MS) * WINDOW_MS);
  const { sources, configFile } = await startSources(scratch, { start: syncStart, firstDayEnd: new Date(plan.dropped.end), denseStart, end: dataEnd });
  const names = sources.map((x) => x.name);
  const settings = serveSettings(syncStart, plan.retention);
  const env = { ...settings, CONFIG_FILE: configFile, DATABASE_URL: db.url, DATABASE_SCHEMA: SCHEMA };
  const describe = sources.map((x) => ({
    name: x.name,
    description:
      `${x.order} order, timestamps on a ${x.timePrecisionMs / 1000}-second grid, ${x.recordsPerSecond} records a second from ${denseStart.toISOString()} to ${dataEnd.toISOString()}, ` +
      `${x.sparseRecords} sparse records from ${syncStart.toISOString()} before that; ${x.sim.dataset.size} records at the start.`,
  }));
  for (const d of describe) log(`source ${d.name}: ${d.description}`);
  const retentionLine = `RETENTION=${plan.retention} with PARTITION_INTERVAL=day: partition ${plan.partition} ([${new Date(plan.dropped.start).toISOString()}, ${new Date(plan.dropped.end).toISOString()})) wholly older than now − RETENTION from ${plan.dropDueAt.toISOString()}`;
  log(`PostgreSQL ${machine.postgres.split(' ')[1] ?? ''}; ${retentionLine}`);

  const drivers = sources.map(
    (x, i) =>
      new FaultDriver({
        sim: x.sim,
        admin,
        dbName: db.name,
        schema: SCHEMA,
        source: x.name,
        // Database kills (one driver: they hit all of serve's connections) every 4 minutes, more often in a short soak so that it sees a few.
        schedule: {
          tickMs: 1_000,
          queueEveryMs: 10_000,
          arrivalsEveryMs: 45_000,
          lateEveryMs: 40_000,
          dbKillEveryMs: i === 0 ? Math.min(4 * 60_000, Math.max(40_000, (minutes * 60_000) / 4)) : 0,
          lateSpanMs: 4 * 60_000,
          settleMs: parseDuration(settings.SYNC_SETTLE!)!,
          lookbackMs: parseDuration(settings.SYNC_LOOKBACK!)!,
        },
      }),
  );
  for (const driver of drivers) driver.start();
  const logCounts: Record<string, number> = {};
  const serve = await startServe(env, logFile, logCounts);
  const serveStarted = performance.now();
  const serveStartedWall = Date.now();
  log(`serve pid ${serve.pid} at ${serve.url}; faults on`);

  const ticksBefore = machineTicks();
  const loadStart = loadavg()[0]!;
  const pgCpuBefore = postgresCpuSeconds(cluster.dataDir);
  const samples: Sample[] = [];
  const target = {
    pid: serve.pid,
    baseUrl: serve.url,
    admin,
    dbName: db.name,
    sources: names,
    partitionPresent: () => partitionExists(admin, SCHEMA, plan.partition),
  };
  const endAt = serveStarted + minutes * 60_000;
  let nextReport = serveStarted + 60_000;
  for (let next = serveStarted + SAMPLE_EVERY_MS; next <= endAt; next += SAMPLE_EVERY_MS) {
    await sleep(Math.max(0, next - performance.now()));
    if (serve.child.exitCode !== null || serve.child.signalCode !== null) break;
    const sample = await takeSample((performance.now() - serveStarted) / 1000, target);
    samples.push(sample);
    if (performance.now() >= nextReport) {
      nextReport += 60_000;
      const perSource = names
        .map((n) => `${n} ${sample.sources[n]!.syncRuns - sample.sources[n]!.syncFailures} ok / ${sample.sources[n]!.syncFailures} failed`)
        .join(', ');
      log(
        `RSS ${(sample.rssBytes / 2 ** 20).toFixed(1)} MiB, heap ${(sample.heapUsedBytes / 2 ** 20).toFixed(1)} MiB, fds ${sample.fds}, handles ${sample.handles}, ` +
          `DB conns ${sample.dbConnections}, syncs ${perSource}, partition ${plan.partition} ${sample.partitionPresent ? 'present' : 'dropped'}, scrape ${sample.scrapeStatus} in ${sample.scrapeMs.toFixed(0)} ms`,
      );
    }
  }
  const serveCpuSeconds = processCpuSeconds(serve.pid);
  const steal = stealShare(ticksBefore, machineTicks());
  const loadEnd = loadavg()[0]!;
  for (const driver of drivers) await driver.stop();

  // SIGTERM: serve drains the HTTP server and the syncs in flight, and must exit 0.
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

  const s = admin.escapeIdentifier(SCHEMA);
  const { rows: statusRows } = await admin.query<{ source: string; status: string; n: string }>(
    `select source, status, count(*) as n from ${s}.sync_runs group by source, status order by source, status`,
  );
  const byStatus: Record<string, Record<string, number>> = {};
  for (const r of statusRows) (byStatus[r.source] ??= {})[r.status] = Number(r.n);
  // When each source's backfill was done: its first successful run's end.
  const { rows: firstRows } = await admin.query<{ source: string; at: Date | null }>(
    `select source, min(finished_at) filter (where status = 'succeeded') as at from ${s}.sync_runs group by source order by source`,
  );
  const backfill = names
    .map((n) => {
      const at = firstRows.find((r) => r.source === n)?.at;
      return `${n} ${at ? `${((at.getTime() - serveStartedWall) / 1000).toFixed(0)} s` : 'never'}`;
    })
    .join(', ');
  log(`first successful run (the backfill) ended after: ${backfill}`);
  const last = samples.at(-1);

  // The final sync runs without faults, as cron would after an outage.
  let drained = 0;
  for (const x of sources) drained += await drainQueuedFaults(x.sim, x.credentials);
  let finalSync: SoakResult['finalSync'];
  try {
    const run = await runSyncChild([], { ...env, SYNC_SCHEDULE: 'off', METRICS_LISTEN: '127.0.0.1:0' });
    const succeeded = succeededBySource(run.stderr);
    const missing = names.filter((n) => !succeeded.has(n));
    finalSync = {
      pass: missing.length === 0,
      wallSeconds: run.wallSeconds,
      detail:
        `${missing.length === 0 ? 'succeeded' : `no succeeded run of ${missing.join(', ')}`} in ${run.wallSeconds.toFixed(1)} s (` +
        names
          .map((n) => `${n}: ${JSON.stringify(succeeded.get(n)?.windows ?? '?')} windows, ${JSON.stringify(succeeded.get(n)?.records ?? '?')} records`)
          .join('; ') +
        `)${drained ? `, after ${drained} requests used up queued faults` : ''}`,
    };
  } catch (err) {
    finalSync = { pass: false, wallSeconds: 0, detail: `failed: ${(err as Error).message.slice(0, 600)}` };
  }
  checks.push({ name: 'final sync without faults: every source succeeded', pass: finalSync.pass, detail: finalSync.detail });
  log(`final sync ${finalSync.detail}`);

  const windowChecks: Record<string, WindowCheck | undefined> = {};
  const derivedChecks: Record<string, DerivedCheck | undefined> = {};
  for (const x of sources) {
    try {
      const w = await verifyWindows(admin, SCHEMA, x.name, x.sim, syncStart);
      windowChecks[x.name] = w;
      checks.push({
        name: `every window of ${x.name} exact`,
        pass: w.pass,
        detail: w.pass
          ? `${w.windows} windows (${w.expiredWindows} expired), ${w.storedRecords} records = the simulator's, ${syncStart.toISOString()} to ${w.watermark?.toISOString()}`
          : w.problems.join('; '),
      });
    } catch (err) {
      checks.push({ name: `every window of ${x.name} exact`, pass: false, detail: `could not check: ${(err as Error).message}` });
    }
    try {
      const d = await verifyDerived(admin, SCHEMA, x.name, x.sim);
      derivedChecks[x.name] = d;
      checks.push({
        name: `rollups and catalogue of ${x.name} equal to its records`,
        pass: d.pass,
        detail: d.pass
          ? `records_hourly ${d.rows.hourly} rows (${d.expiredRows.hourly} of expired windows, equal to the dataset), records_hourly_distinct ${d.rows.hourlyDistinct}, records_daily_distinct ${d.rows.dailyDistinct}, record_fields ${d.rows.fields} fields, records_typed ${d.typedRows} rows`
          : d.problems.join('; '),
      });
    } catch (err) {
      checks.push({ name: `rollups and catalogue of ${x.name} equal to its records`, pass: false, detail: `could not check: ${(err as Error).message}` });
    }
  }

  // Retention: the partition existed, serve dropped it during the soak (not the final sync), no
  // sooner than due, and every source's windows in it are expired.
  const firstGone = samples.findIndex((x) => x.partitionPresent === 0);
  const seenBefore = firstGone > 0 && samples.slice(0, firstGone).some((x) => x.partitionPresent === 1);
  const dueT = (plan.dropDueAt.getTime() - serveStartedWall) / 1000;
  const goneT = firstGone >= 0 ? samples[firstGone]!.t : Number.NaN;
  const presentAtEnd = await partitionExists(admin, SCHEMA, plan.partition);
  checks.push({
    name: `retention dropped ${plan.partition} during the soak`,
    pass: seenBefore && goneT >= dueT && !presentAtEnd && (last?.partitionsDropped ?? 0) >= 1,
    detail:
      `${seenBefore ? 'present' : 'never seen present'} before; first seen gone ${firstGone >= 0 ? `at ${(goneT / 60).toFixed(1)} min` : 'never during the soak'} ` +
      `(due at ${(dueT / 60).toFixed(1)} min of ${minutes}); ${presentAtEnd ? 'still present' : 'gone'} at the end; retention_partitions_dropped_total ${last?.partitionsDropped ?? 'n/a'} at the last sample`,
  });
  try {
    const ledger = await readExpiredLedger(admin, SCHEMA, plan.dropped);
    const bad = names.filter((n) => {
      const l = ledger.bySource[n];
      return l === undefined || l.inRange === 0 || l.expired !== l.inRange || l.expiredOutside !== 0 || l.recordsLeft !== 0;
    });
    checks.push({
      name: "the dropped partition's windows are expired in the ledger",
      pass: bad.length === 0,
      detail: names
        .map((n) => {
          const l = ledger.bySource[n];
          return l ? `${n}: ${l.expired}/${l.inRange} windows expired, ${l.expiredOutside} expired outside it, ${l.recordsLeft} rows left` : `${n}: no windows`;
        })
        .join('; '),
    });
  } catch (err) {
    checks.push({ name: "the dropped partition's windows are expired in the ledger", pass: false, detail: `could not check: ${(err as Error).message}` });
  }

  const flat = flatVerdicts(samples);
  for (const v of flat) checks.push({ name: `${v.rule.name} flat`, pass: v.pass, detail: v.reason });

  const failedScrapes = samples.filter((x) => x.scrapeStatus !== 200);
  const slowest = Math.max(0, ...samples.map((x) => x.scrapeMs));
  const upDown = names.map((n) => `${n} ${samples.filter((x) => x.sources[n]?.upstreamUp === 0).length}`).join(', ');
  checks.push({
    name: '/metrics answered 200 to every scrape',
    pass: samples.length > 0 && failedScrapes.length === 0,
    detail: `${samples.length - failedScrapes.length}/${samples.length} scrapes 200, slowest ${slowest.toFixed(0)} ms; upstream_up 0 in ${upDown}; /readyz not 200 in ${samples.filter((x) => x.readyStatus !== 200).length}`,
  });

  const at75 = samples[Math.floor(samples.length * 0.75)];
  for (const n of names) {
    const okAt = (x: Sample | undefined) => (x?.sources[n] === undefined ? Number.NaN : x.sources[n].syncRuns - x.sources[n].syncFailures);
    const lateSuccesses = okAt(last) - okAt(at75);
    // The watermark against the wall clock at the last sample.
    const lagMs = last?.sources[n] === undefined ? Number.NaN : serveStartedWall + last.t * 1000 - last.sources[n].watermarkSeconds * 1000;
    checks.push({
      name: `syncs of ${n} kept succeeding to the end`,
      pass: lateSuccesses > 0 && lagMs <= MAX_END_LAG_MS,
      detail: `${Number.isFinite(lateSuccesses) ? lateSuccesses : 'no'} successful runs in the last quarter; watermark ${(lagMs / 1000).toFixed(0)} s behind the clock at the last sample (limit ${MAX_END_LAG_MS / 1000} s)`,
    });
  }

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
    sources: describe,
    retention: `${retentionLine}. First successful run of each source (the backfill) ended after: ${backfill}.`,
    sampleEverySeconds: SAMPLE_EVERY_MS / 1000,
    samples,
    flat,
    checks,
    syncs: {
      runs: last?.syncRuns ?? 0,
      failures: last?.syncFailures ?? 0,
      skipped: last?.syncSkipped ?? 0,
      bySource: Object.fromEntries(names.map((n) => [n, { runs: last?.sources[n]?.syncRuns ?? 0, failures: last?.sources[n]?.syncFailures ?? 0 }])),
      byStatus,
    },
    faults: Object.fromEntries(sources.map((x, i) => [x.name, drivers[i]!.tally])),
    responses: Object.fromEntries(sources.map((x) => [x.name, { ...x.sim.stats.responses }])),
    requests: Object.fromEntries(
      sources.map((x) => [x.name, { token: x.sim.stats.tokenRequests, analytics: x.sim.stats.analyticsRequests, prometheus: x.sim.stats.prometheusRequests }]),
    ),
    serveCpuSeconds,
    postgresCpuSeconds: pgCpuSeconds,
    shutdown: { code: exit.code, signal: exit.signal, seconds: shutdownSeconds },
    finalSync,
    windowChecks,
    derivedChecks,
    logCounts,
    driverErrors: drivers.flatMap((d) => d.errors),
  };
  process.stdout.write(`${renderTable(result)}\n`);
  writeFileSync(out, renderMarkdown(result));
  const pass = checks.every((c) => c.pass);
  log(`${pass ? 'PASSED' : 'FAILED'}; wrote ${out}`);

  // Every sample, for looking closer than the report's medians (the folder is kept, like serve's log).
  const columns = (Object.keys(samples[0] ?? {}) as (keyof Sample)[]).filter((c) => c !== 'sources');
  const sourceColumns = ['syncRuns', 'syncFailures', 'watermarkSeconds', 'upstreamUp'] as const;
  const header = [...columns, ...names.flatMap((n) => sourceColumns.map((c) => `${n}.${c}`))];
  const row = (x: Sample) => [...columns.map((c) => String(x[c])), ...names.flatMap((n) => sourceColumns.map((c) => String(x.sources[n]?.[c])))];
  writeFileSync(join(scratch, 'samples.csv'), [header.join(','), ...samples.map((x) => row(x).join(','))].join('\n') + '\n');
  log(`serve's log, CONFIG_FILE and samples.csv kept in ${scratch}`);

  await admin.end();
  for (const x of sources) await x.sim.close();
  await db.drop();
  await cluster.stop();
  process.exitCode = pass ? 0 : 1;
}

main().catch((err: unknown) => {
  process.stderr.write(`soak: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
