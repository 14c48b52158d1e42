/**
 * The soak's end checks (see soak/run.ts): what the replicas' samples, the timeline, gamma's late
 * records and the database say, as pass/fail lines with their figures.
 */
import type pg from 'pg';
import { verifyDerived, type DerivedCheck } from './derived.js';
import { judgeFlat, MIN_FLAT_SECONDS, quantile, type FlatVerdict } from './flat.js';
import type { LateInjector } from './late.js';
import { mib, type Check, type SoakResult } from './report.js';
import { partitionExists, readExpiredLedger, type RetentionPlan } from './retention.js';
import { SCRAPE_TIMEOUT_SECONDS, type Sample } from './sampler.js';
import type { SoakSource } from './sources.js';
import { AT, type Replica, type ReplicaSample, type TimelineRecord } from './timeline.js';
import { verifyWindows, type WindowCheck } from './verify.js';
import type { MaintenanceRecord } from './maintenance.js';
import { maintenanceChecks, roleCheck, shapeChecks } from './shape-checks.js';

/** At the end, the watermark may lag the clock by at most this. */
const MAX_END_LAG_MS = 3 * 60_000;
/** What an audit's own run may take on top of its period: a record had an audit to find it within period + this. */
const AUDIT_RUN_SECONDS = 60;
/** A reload must show on /metrics within one scrape interval (5 s) plus this, in seconds. */
const RELOAD_SLACK_SECONDS = 1;
/** Samples this long after the hostile minutes are left out of the flatness series too, in seconds (at most 2 % of a short run). */
const hostileAftermathSeconds = (runSeconds: number) => Math.min(30, 0.02 * runSeconds);
/** The level rules' baseline starts this long after the last reload, in seconds (at most 5 % of a short run). */
const reloadSettleSeconds = (runSeconds: number) => Math.min(60, 0.05 * runSeconds);

/** The check's note on late arrivals of expired windows that no audit had to load (soak/derived.ts). */
const tooLate = (d: DerivedCheck): string =>
  d.arrivedTooLate
    ? `; ${d.arrivedTooLate} records of expired windows optional (arrived < one audit period + ${AUDIT_RUN_SECONDS} s before their window expired: loaded or not)`
    : '';

/** What {@link endChecks} needs. */
export interface EndInputs {
  admin: pg.Client;
  schema: string;
  sources: readonly SoakSource[];
  syncStart: Date;
  plan: RetentionPlan;
  replicas: readonly Replica[];
  timeline: TimelineRecord;
  late: LateInjector;
  auditEveryMs: number;
  runSeconds: number;
  t0Wall: number;
  shutdowns: { replica: string; died: boolean; code: number | null; signal: string | null; seconds: number }[];
  finalSync: SoakResult['finalSync'];
  maintenance: MaintenanceRecord;
}

/**
 * Where the level rules read the same configuration: from a settling time after the last reload
 * (alpha's schedule made faster, after delta's addition) to the hostile minutes, and from the
 * hostile minutes' aftermath to the end, in seconds since the soak's start.
 */
export interface SteadySpan {
  baselineFrom: number;
  baselineTo: number;
  endFrom: number;
}

/**
 * The flatness verdicts of one replica's samples (the hostile minutes already left out). RSS,
 * descriptors and handles judge their level within {@link SteadySpan} (a fourth source and a
 * faster schedule legitimately hold more); heap used judges its level over the whole series,
 * across those changes, with a wider ratio: a leak of the runs' objects grows the heap whatever
 * the configuration, where RSS also follows V8's and malloc's sizing.
 */
export function flatFor(label: string, samples: readonly Sample[], steady: SteadySpan): FlatVerdict[] {
  const finite = (pick: (s: Sample) => number, from = -Infinity, to = Infinity) =>
    samples
      .filter((s) => s.t >= from && s.t < to)
      .map(pick)
      .filter(Number.isFinite);
  const min = (seconds: number) => (seconds / 60).toFixed(1);
  const steadyBands = (pick: (s: Sample) => number) => ({
    baseline: finite(pick, steady.baselineFrom, steady.baselineTo),
    end: finite(pick, steady.endFrom),
    label: `${min(steady.baselineFrom)}–${min(steady.baselineTo)} min vs ${min(steady.endFrom)} min–end`,
  });
  return [
    judgeFlat(
      finite((s) => s.rssBytes),
      { name: `${label} RSS`, maxGrowthRatio: 0.1, level: 'lowest' },
      mib,
      steadyBands((s) => s.rssBytes),
    ),
    judgeFlat(
      finite((s) => s.heapUsedBytes),
      { name: `${label} heap used, whole run`, maxGrowthRatio: 0.15, level: 'floor' },
      mib,
    ),
    judgeFlat(
      finite((s) => s.fds),
      { name: `${label} open fds`, levelSlack: 2, showPeak: true, level: 'floor' },
      String,
      steadyBands((s) => s.fds),
    ),
    judgeFlat(
      finite((s) => s.handles),
      { name: `${label} active handles`, levelSlack: 2, showPeak: true, level: 'floor' },
      String,
      steadyBands((s) => s.handles),
    ),
  ];
}

/** The sum over a replica's lives of a counter's last value in each life. */
function lastPerLife(samples: readonly ReplicaSample[], pick: (s: ReplicaSample) => number): number {
  const last = new Map<number, number>();
  for (const s of samples) if (Number.isFinite(pick(s))) last.set(s.life, pick(s));
  return [...last.values()].reduce((a, b) => a + b, 0);
}

/**
 * Runs every end check.
 *
 * @returns the checks, the notes for the report, the flatness verdicts and the per-source figures.
 * @throws pg errors of the harness's own connection.
 */
export async function endChecks(i: EndInputs): Promise<{
  checks: Check[];
  notes: string[];
  flat: FlatVerdict[];
  windowChecks: Record<string, WindowCheck | undefined>;
  derivedChecks: Record<string, DerivedCheck | undefined>;
  syncs: SoakResult['syncs'];
  backfill: string;
}> {
  const { admin, schema, sources, replicas, timeline: tl } = i;
  const names = sources.map((x) => x.name);
  const s = admin.escapeIdentifier(schema);
  const checks: Check[] = [];
  const notes: string[] = [];
  const [a, b] = replicas as [Replica, Replica];

  for (const x of i.shutdowns)
    checks.push({
      name: `replica ${x.replica} ran to the end and exited 0 on SIGTERM`,
      pass: !x.died && x.code === 0,
      detail: x.died ? `died during the soak (${x.signal ?? x.code})` : `exit ${x.signal ?? x.code} after ${x.seconds.toFixed(1)} s`,
    });
  checks.push({ name: 'final sync without faults: every source succeeded', pass: i.finalSync.pass, detail: i.finalSync.detail });

  const windowChecks: Record<string, WindowCheck | undefined> = {};
  const derivedChecks: Record<string, DerivedCheck | undefined> = {};
  for (const x of sources) {
    const kept = x.name === 'gamma' ? i.late.kept : [];
    try {
      const w = await verifyWindows(admin, schema, x.name, x.sim, i.syncStart, kept);
      windowChecks[x.name] = w;
      checks.push({
        name: `every window of ${x.name} exact (records + quarantine = upstream)`,
        pass: w.pass,
        detail: w.pass
          ? `${w.windows} windows (${w.expiredWindows} expired${w.parked.length ? `, ${w.parked.length} parked holding ${w.parked.reduce((n, p) => n + p.records, 0)} records upstream, none stored` : ''}${w.short.length ? `, ${w.short.length} short` : ''}), ${w.storedRecords} records + ${w.quarantined} quarantined = the simulator's${w.keptDeleted ? ` + ${w.keptDeleted} deleted upstream and kept` : ''}, ${i.syncStart.toISOString()} to ${w.watermark?.toISOString()}${w.keptByLater ? `; ${w.keptByLater} records at a cut kept by the later window (they came after the earlier one was read)` : ''}`
          : w.problems.join('; '),
      });
    } catch (err) {
      checks.push({
        name: `every window of ${x.name} exact (records + quarantine = upstream)`,
        pass: false,
        detail: `could not check: ${(err as Error).message}`,
      });
    }
    try {
      const d = await verifyDerived(admin, schema, x.name, x.sim, i.syncStart, i.auditEveryMs + AUDIT_RUN_SECONDS * 1000);
      derivedChecks[x.name] = d;
      checks.push({
        name: `rollups and catalogue of ${x.name} equal to its records`,
        pass: d.pass,
        detail: d.pass
          ? `records_hourly ${d.rows.hourly} rows, records_hourly_distinct ${d.rows.hourlyDistinct}, records_daily_distinct ${d.rows.dailyDistinct}, record_fields ${d.rows.fields} fields, records_typed ${d.typedRows} rows${tooLate(d)}`
          : `${d.problems.join('; ')}${tooLate(d)}`,
      });
    } catch (err) {
      checks.push({ name: `rollups and catalogue of ${x.name} equal to its records`, pass: false, detail: `could not check: ${(err as Error).message}` });
    }
  }

  // gamma's late records: each found by an audit within one audit period of its insertion (plus the audit's own run).
  const lateRecords = i.late.records;
  const delays = lateRecords.filter((r) => r.foundAt !== undefined).map((r) => (r.foundAt! - r.insertedAt) / 1000);
  delays.sort((x, y) => x - y);
  const missing = lateRecords.length - delays.length;
  const limit = i.auditEveryMs / 1000 + AUDIT_RUN_SECONDS;
  const f = (v: number | undefined) => (v === undefined || !Number.isFinite(v) ? 'n/a' : `${v.toFixed(0)} s`);
  checks.push({
    name: `gamma's late records (beyond SYNC_LOOKBACK) found by the audit within one period`,
    pass: lateRecords.length > 0 && missing === 0 && (delays.at(-1) ?? Infinity) <= limit,
    detail:
      `${delays.length}/${lateRecords.length} found, ${i.late.tally.batches} batches up to ${(i.late.tally.maxAgeMs / 3_600_000).toFixed(1)} h back; ` +
      `delay insertion → stored: min ${f(delays[0])}, median ${f(quantile(delays, 0.5))}, p90 ${f(quantile(delays, 0.9))}, max ${f(delays.at(-1))} ` +
      `(limit: the audit period ${i.auditEveryMs / 1000} s + ${AUDIT_RUN_SECONDS} s for the audit's own run, sampled every 5 s); ${i.late.tally.deletions} deleted upstream and kept`,
  });

  const firstLate = Math.min(...lateRecords.map((r) => r.insertedAt));
  const lastLate = Math.max(...lateRecords.map((r) => r.insertedAt));
  notes.push(
    `gamma's late records: ${lateRecords.length} in ${i.late.tally.batches} batches from ${lateRecords.length ? `${((firstLate - i.t0Wall) / 60_000).toFixed(1)} min (once its backfill was done)` : 'never'} to ` +
      `${lateRecords.length ? `${((lastLate - i.t0Wall) / 60_000).toFixed(1)} min` : '-'} (none in the last audit period and a minute, so each had an audit to find it), at random instants up to ${(i.late.tally.maxAgeMs / 3_600_000).toFixed(1)} h back, ` +
      `never within SYNC_LOOKBACK and a window of the watermark; ${i.late.tally.skipped} batches left out while gamma's watermark lagged the clock; ${i.late.tally.deletions} records deleted upstream, each with two late records in its window (a deletion and an arrival in one audit segment cancel out, as docs/etl.md says).`,
  );

  checks.push(...shapeChecks(sources, windowChecks));

  // Parked windows: only those holding quarantined records may be, and those the data makes (checked above).
  const { rows: parked } = await admin.query<{ source: string; start: Date; reason: string | null; quarantined: string }>(
    `select w.source, w.window_start as start, w.reason,
            (select count(*) from ${s}.records_quarantine q where q.source = w.source and q.window_start = w.window_start) as quarantined
       from ${s}.sync_windows w where w.status = 'parked' and w.expired_at is null order by 1, 2`,
  );
  const made = new Set(sources.flatMap((x) => x.expectedParked.map((p) => `${x.name}|${p.start.getTime()}`)));
  const badParked = parked.filter((p) => Number(p.quarantined) === 0 && !made.has(`${p.source}|${p.start.getTime()}`));
  const { rows: qRows } = await admin.query<{ source: string; n: string }>(
    `select source, count(*) as n from ${s}.records_quarantine group by source order by source`,
  );
  checks.push({
    name: 'no window parked (but one holding quarantined records, or one the data makes)',
    pass: badParked.length === 0,
    detail: `${parked.length} parked (${parked.length - badParked.length} holding quarantined records or made by the data)${
      badParked.length
        ? `: ${badParked
            .slice(0, 3)
            .map((p) => `${p.source} ${p.start.toISOString()} (${(p.reason ?? '').slice(0, 120)})`)
            .join('; ')}`
        : ''
    }; quarantined rows: ${qRows.map((r) => `${r.source} ${r.n}`).join(', ') || 'none'}`,
  });

  // Retention: dropped during the soak (by either replica), no sooner than due, windows expired.
  const all = [...a.samples, ...b.samples].sort((x, y) => x.t - y.t);
  const firstGone = all.findIndex((x) => x.partitionPresent === 0);
  const seenBefore = firstGone > 0 && all.slice(0, firstGone).some((x) => x.partitionPresent === 1);
  const dueT = (i.plan.dropDueAt.getTime() - i.t0Wall) / 1000;
  const goneT = firstGone >= 0 ? all[firstGone]!.t : Number.NaN;
  const presentAtEnd = await partitionExists(admin, schema, i.plan.partition);
  const dropped = lastPerLife(a.samples, (x) => x.partitionsDropped) + lastPerLife(b.samples, (x) => x.partitionsDropped);
  checks.push({
    name: `retention dropped ${i.plan.partition} during the soak`,
    pass: seenBefore && goneT >= dueT && !presentAtEnd && dropped >= 1,
    detail: `${seenBefore ? 'present' : 'never seen present'} before; first seen gone ${firstGone >= 0 ? `at ${(goneT / 60).toFixed(1)} min` : 'never'} (due at ${(dueT / 60).toFixed(1)} min); ${presentAtEnd ? 'still present' : 'gone'} at the end; retention_partitions_dropped_total over both replicas ${dropped}`,
  });
  try {
    const ledger = await readExpiredLedger(admin, schema, i.plan.dropped);
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
          return l ? `${n}: ${l.expired}/${l.inRange} expired, ${l.expiredOutside} outside, ${l.recordsLeft} rows left` : `${n}: no windows`;
        })
        .join('; '),
    });
  } catch (err) {
    checks.push({ name: "the dropped partition's windows are expired in the ledger", pass: false, detail: `could not check: ${(err as Error).message}` });
  }

  // Flatness, per replica (B from its restart), the hostile minutes and their aftermath left out.
  const hostileFrom = tl.hostileFrom ?? Infinity;
  const aftermath = hostileAftermathSeconds(i.runSeconds);
  const hostileTo = (tl.hostileTo ?? hostileFrom) + aftermath;
  const calm = (x: ReplicaSample) => x.t < hostileFrom || x.t > hostileTo;
  const steady: SteadySpan = {
    baselineFrom: (tl.postAt ?? AT.post * i.runSeconds) + reloadSettleSeconds(i.runSeconds),
    baselineTo: hostileFrom,
    endFrom: hostileTo,
  };
  const flat = [
    ...flatFor('A', a.samples.filter(calm), steady),
    ...flatFor('B after restart', b.samples.filter((x) => x.life === b.lives.length - 1 && b.lives.length > 1).filter(calm), steady),
    // Both replicas' connections from B's restart on: each pool is sized at its start for the sources then (docs/configuration.md, Reload), so
    // before it the level follows the sources added (delta at 1/3) and B's first pool, not a leak.
    judgeFlat(
      a.samples
        .filter((x) => calm(x) && x.t >= (tl.restartAt ?? Infinity))
        .map((x) => x.dbConnections)
        .filter(Number.isFinite),
      { name: 'DB connections (both replicas, from B restart)', levelSlack: 1, peakSlack: 2 },
    ),
  ];
  // A short run's bands hold a few samples each, inside its warm-up and B's backfill after its restart: shown, not judged.
  const judged = i.runSeconds >= MIN_FLAT_SECONDS;
  const unjudged = `not judged (a soak shorter than ${MIN_FLAT_SECONDS / 60} minutes has bands of a few samples inside its warm-up): `;
  for (const v of flat) checks.push({ name: `${v.rule.name} flat`, pass: v.pass, detail: (judged ? '' : unjudged) + v.reason, judged });
  const during = (r: Replica) => r.samples.filter((x) => !calm(x) && x.t <= (tl.hostileTo ?? -1));
  notes.push(
    `Hostile minutes ${f(tl.hostileFrom)}–${f(tl.hostileTo)} (left out of the flatness series, with ${aftermath.toFixed(0)} s after): ` +
      replicas
        .map(
          (r) =>
            `${r.name} peak fds ${Math.max(0, ...during(r).map((x) => x.fds))}, peak RSS ${(Math.max(0, ...during(r).map((x) => x.rssBytes)) / 2 ** 20).toFixed(1)} MiB, ` +
            `serve's event-loop lag max ${(
              Math.max(
                0,
                ...during(r)
                  .map((x) => x.loopLagMaxSeconds)
                  .filter(Number.isFinite),
              ) * 1000
            ).toFixed(0)} ms, the harness's ${Math.max(0, ...during(r).map((x) => x.harnessLagMs)).toFixed(0)} ms`,
        )
        .join('; ') +
      `; the attacker saw: slowloris ${JSON.stringify(tl.hostile?.slowloris ?? {})}, wrong passwords ${JSON.stringify(tl.hostile?.passwords ?? {})}.`,
  );

  // Scrapes: every scrape of a live replica answered 200, during the hostile minutes too.
  for (const r of replicas) {
    const failed = r.samples.filter((x) => x.scrapeStatus !== 200);
    const hostile = during(r);
    const slowest = Math.max(0, ...r.samples.map((x) => x.scrapeMs));
    const overTimeout = r.samples.filter((x) => x.scrapeStatus === 200 && x.scrapeMs > SCRAPE_TIMEOUT_SECONDS * 1000).length;
    checks.push({
      name: `replica ${r.name}: /metrics answered 200 to every scrape, also in the hostile minutes`,
      pass: r.samples.length > 0 && failed.length === 0 && hostile.length > 0,
      detail:
        `${r.samples.length - failed.length}/${r.samples.length} scrapes 200 (${hostile.filter((x) => x.scrapeStatus === 200).length}/${hostile.length} in the hostile minutes, slowest there ${Math.max(0, ...hostile.map((x) => x.scrapeMs)).toFixed(0)} ms), slowest ${slowest.toFixed(0)} ms, ${overTimeout} slower than the ${SCRAPE_TIMEOUT_SECONDS} s scrape timeout sent (a Prometheus would have given up on those)` +
        `${
          failed.length
            ? `; failed at ${failed
                .slice(0, 5)
                .map(
                  (x) =>
                    `${x.t.toFixed(0)} s (status ${x.scrapeStatus}; serve's event-loop lag max ${Number.isFinite(x.loopLagMaxSeconds) ? `${(x.loopLagMaxSeconds * 1000).toFixed(0)} ms` : 'n/a'}, the harness's ${x.harnessLagMs.toFixed(0)} ms)`,
                )
                .join(', ')}`
            : ''
        }; /readyz not 200 in ${r.samples.filter((x) => x.readyStatus !== 200).length}`,
    });
  }
  checks.push(...maintenanceChecks(i.maintenance, replicas, schema));
  checks.push(await roleCheck(admin, schema, replicas));
  checks.push({
    name: 'replica B killed with SIGKILL at 1/2 and serving again',
    pass: tl.killAt !== undefined && tl.restartAt !== undefined && b.lives.length === 2,
    detail: tl.restartError ?? `killed at ${f(tl.killAt)}, serving again at ${f(tl.restartAt)} (due ${f(AT.kill * i.runSeconds)}); not scraped in between`,
  });

  // Both replicas did sync work: their own sync_runs_total, over their lives.
  const bySourceReplica: Record<string, Record<string, { ok: number; failed: number; locked: number }>> = {};
  for (const r of replicas)
    for (const n of names) {
      const ok = lastPerLife(r.samples, (x) => (x.sources[n]?.syncRuns ?? NaN) - (x.sources[n]?.syncFailures ?? NaN));
      const failed = lastPerLife(r.samples, (x) => x.sources[n]?.syncFailures ?? NaN);
      const locked = lastPerLife(r.samples, (x) => x.sources[n]?.skippedLocked ?? NaN);
      (bySourceReplica[r.name] ??= {})[n] = { ok, failed, locked };
    }
  const work = (r: string) => names.reduce((sum, n) => sum + bySourceReplica[r]![n]!.ok, 0);
  checks.push({
    name: 'both replicas did sync work',
    pass: replicas.every((r) => work(r.name) > 0),
    detail: replicas
      .map(
        (r) =>
          `${r.name}: ${names
            .map((n) => {
              const v = bySourceReplica[r.name]![n]!;
              return `${n} ${v.ok} ok/${v.failed} failed/${v.locked} locked`;
            })
            .join(', ')}`,
      )
      .join('; '),
  });

  // The reloads took effect within one scrape on both replicas.
  const reloadCheck = (what: string, at: number | undefined, shows: (x: ReplicaSample) => boolean) => {
    const seen = replicas.map((r) => {
      if (at === undefined) return { r: r.name, ok: false, text: 'never sent' };
      const life = r.samples.find((x) => x.t >= at)?.life;
      const after = r.samples.filter((x) => x.t >= at && x.life === life);
      const k = after.findIndex(shows);
      const delay = k >= 0 ? after[k]!.t - at : Number.NaN;
      // The first scrape after the signal shows it; or, when that scrape came before the reload was applied, the next one, within 5 s + slack.
      return {
        r: r.name,
        ok: k === 0 || (k > 0 && delay <= 5 + RELOAD_SLACK_SECONDS),
        text: k >= 0 ? `scrape ${k + 1} after, ${delay.toFixed(1)} s` : 'never seen',
      };
    });
    checks.push({
      name: `${what} took effect within one scrape on both replicas`,
      pass: seen.every((x) => x.ok),
      detail: seen.map((x) => `${x.r}: ${x.text}`).join('; '),
    });
  };
  const movedAfter = (at: number | undefined) => (x: ReplicaSample) => at !== undefined && x.configReloadSeconds * 1000 >= i.t0Wall + at * 1000 - 500;
  reloadCheck(
    `SIGHUP adding delta at ${f(tl.sighupAt)}`,
    tl.sighupAt,
    (x) => movedAfter(tl.sighupAt)(x) && Number.isFinite(x.sources.delta?.upstreamUp ?? NaN),
  );
  reloadCheck(`POST /-/reload of alpha's schedule (${tl.alphaSchedule}) at ${f(tl.postAt)}`, tl.postAt, movedAfter(tl.postAt));
  checks.push({
    name: 'POST /-/reload answered 200 on both replicas',
    pass: replicas.every((r) => tl.postStatus[r.name] === 200),
    detail: replicas.map((r) => `${r.name}: ${tl.postStatus[r.name] ?? 'not sent'}`).join(', '),
  });

  // Syncs kept succeeding to the end, over both replicas; the last failed run's error, when the last run failed.
  const { rows: lastRuns } = await admin.query<{ source: string; status: string; error: string | null }>(
    `select distinct on (source) source, status, error from ${s}.sync_runs where status <> 'running' order by source, id desc`,
  );
  const at75 = i.runSeconds * 0.75;
  for (const n of names) {
    const okBetween = (r: Replica) => {
      const lateSamples = r.samples.filter((x) => x.t >= at75);
      const first = lateSamples[0];
      const last = lateSamples.at(-1);
      const ok = (x: ReplicaSample | undefined) => (x?.sources[n] === undefined ? 0 : x.sources[n].syncRuns - x.sources[n].syncFailures);
      return first && last && first.life === last.life ? ok(last) - ok(first) : 0;
    };
    const runs = replicas.reduce((sum, r) => sum + okBetween(r), 0);
    const lastA = a.samples.at(-1);
    const lagMs = lastA?.sources[n] === undefined ? Number.NaN : i.t0Wall + lastA.t * 1000 - lastA.sources[n].watermarkSeconds * 1000;
    checks.push({
      name: `syncs of ${n} kept succeeding to the end`,
      pass: runs > 0 && lagMs <= MAX_END_LAG_MS,
      detail:
        `${runs} successful runs in the last quarter over both replicas; watermark ${(lagMs / 1000).toFixed(0)} s behind the clock at the last sample (limit ${MAX_END_LAG_MS / 1000} s)` +
        `${((r) => (r && r.status !== 'succeeded' ? `; its last run ${r.status}: ${(r.error ?? '').split('\n')[0]!.slice(0, 200)}` : ''))(lastRuns.find((r) => r.source === n))}`,
    });
  }

  const { rows: statusRows } = await admin.query<{ source: string; status: string; n: string }>(
    `select source, status, count(*) as n from ${s}.sync_runs group by source, status order by source, status`,
  );
  const byStatus: Record<string, Record<string, number>> = {};
  for (const r of statusRows) (byStatus[r.source] ??= {})[r.status] = Number(r.n);
  const { rows: firstRows } = await admin.query<{ source: string; at: Date | null }>(
    `select source, min(finished_at) filter (where status = 'succeeded') as at from ${s}.sync_runs group by source order by source`,
  );
  const backfill = names
    .map((n) => {
      const at = firstRows.find((r) => r.source === n)?.at;
      return `${n} ${at ? `${((at.getTime() - i.t0Wall) / 1000).toFixed(0)} s` : 'never'}`;
    })
    .join(', ');
  return { checks, notes, flat, windowChecks, derivedChecks, syncs: { byReplica: bySourceReplica, byStatus }, backfill };
}
