/** The soak's result as a console table and as soak/RESULT.md. */
import type { Machine } from '../bench/lib/machine.js';
import type { FaultTally } from './faults.js';
import type { DerivedCheck } from './derived.js';
import { MIN_FLAT_SECONDS, type FlatVerdict } from './flat.js';
import type { ReplicaSample } from './timeline.js';
import type { WindowCheck } from './verify.js';
import { OWNER_ROLE, RUNTIME_ROLE } from './roles.js';

/** One pass/fail line of the verdict. */
export interface Check {
  name: string;
  pass: boolean;
  detail: string;
  /** false: shown with its figures but not counted (the flatness of a run too short to judge it). */
  judged?: boolean;
}

/** A check's verdict as the report shows it: PASS, FAIL or "not judged". */
export function verdictOf(check: Check): 'PASS' | 'FAIL' | 'not judged' {
  return check.judged === false ? 'not judged' : check.pass ? 'PASS' : 'FAIL';
}

/** A verdict for the markdown table: a failure in bold. */
const emphasised = (verdict: ReturnType<typeof verdictOf>): string => (verdict === 'FAIL' ? '**FAIL**' : verdict);

/** Whether a soak passed: every judged check passed. */
export function soakPassed(checks: readonly Check[]): boolean {
  return checks.every((c) => c.judged === false || c.pass);
}

/** Everything a soak measured, for {@link renderTable} and {@link renderMarkdown}. */
export interface SoakResult {
  minutes: number;
  /** Commit measured (`git rev-parse`), noting uncommitted changes to the code. */
  revision: string;
  startedAt: Date;
  finishedAt: Date;
  machine: Machine;
  /** 1-minute load average at the start and at the end, and the hypervisor's steal share over the soak (0..1). */
  loadStart: number;
  loadEnd: number;
  steal: number | undefined;
  /** serve's environment, secrets and the database URL left out; how AUDIT_SCHEDULE was chosen. */
  settings: Record<string, string>;
  auditNote: string;
  /** The CONFIG_FILE sources, one line each (order, data), and how retention was set up, one line. */
  sources: { name: string; description: string }[];
  retention: string;
  /** The roles' statements (docs/deploy.md, Database roles), passwords elided, and who ran what. */
  roles: { statements: string[]; note: string };
  sampleEverySeconds: number;
  /** Each replica's samples and its CPU seconds (its last process). */
  replicas: { name: string; samples: ReplicaSample[]; cpuSeconds: number | undefined }[];
  flat: FlatVerdict[];
  checks: Check[];
  /** Lines of figures beside the checks (the hostile minutes). */
  notes: string[];
  /** By replica and source, from its /metrics over its lives: runs succeeded, failed, ticks skipped because the other held the lock; sync_runs rows by source and status. */
  syncs: {
    byReplica: Record<string, Record<string, { ok: number; failed: number; locked: number }>>;
    byStatus: Record<string, Record<string, number>>;
  };
  /** By source: what its fault driver injected, its simulator's responses by status, and its requests by endpoint. */
  faults: Record<string, FaultTally>;
  responses: Record<string, Record<string, number>>;
  requests: Record<string, { token: number; analytics: number; prometheus: number }>;
  postgresCpuSeconds: number | undefined;
  finalSync: { pass: boolean; wallSeconds: number; detail: string };
  /** By source; undefined where the check could not run. */
  windowChecks: Record<string, WindowCheck | undefined>;
  derivedChecks: Record<string, DerivedCheck | undefined>;
  /** serve's warn/error/fatal log lines, counted by message. */
  logCounts: Record<string, number>;
  driverErrors: readonly string[];
}

/** Bytes as MiB with one decimal. */
export function mib(bytes: number): string {
  return Number.isFinite(bytes) ? `${(bytes / 2 ** 20).toFixed(1)} MiB` : 'n/a';
}

function fmt(verdict: FlatVerdict, value: number): string {
  return /RSS|heap used/.test(verdict.rule.name) ? mib(value) : Number.isFinite(value) ? String(Math.round(value * 10) / 10) : 'n/a';
}

function flatRows(flat: FlatVerdict[]): string[][] {
  return flat.map((v) => [
    v.rule.name,
    fmt(v, v.first),
    fmt(v, v.mid),
    fmt(v, v.last),
    fmt(v, v.max),
    fmt(v, v.baseline),
    fmt(v, v.end),
    v.pass ? 'PASS' : 'FAIL',
  ]);
}

const FLAT_HEADER = ['resource', 'start', 'mid', 'end', 'max', 'baseline level', 'end level', 'verdict'];

function pad(rows: string[][]): string {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  return rows.map((r) => r.map((cell, i) => cell.padEnd(widths[i]!)).join('  ')).join('\n');
}

/** The console summary: resources, checks, syncs and faults. */
export function renderTable(result: SoakResult): string {
  const lines = [
    '',
    pad([FLAT_HEADER, ...flatRows(result.flat)]),
    '',
    pad(result.checks.map((c) => [verdictOf(c), c.name, c.detail])),
    '',
    `syncs by replica and source: ${JSON.stringify(result.syncs.byReplica)}; sync_runs rows by source and status ${JSON.stringify(result.syncs.byStatus)}`,
    `upstream responses by source and status: ${JSON.stringify(result.responses)}`,
  ];
  return lines.join('\n');
}

function mdTable(rows: string[][]): string {
  const [header, ...body] = rows;
  return [`| ${header!.join(' | ')} |`, `|${header!.map(() => '---').join('|')}|`, ...body.map((r) => `| ${r.join(' | ')} |`)].join('\n');
}

/** About ten rows spread over the soak: the shape of each resource over time. */
function timeline(samples: ReplicaSample[]): string[][] {
  const rows = [['t (min)', 'process', 'RSS', 'heap used', 'fds', 'handles', 'DB conns', 'syncs ok', 'syncs failed', 'scrape ms']];
  const picks = new Set<number>();
  for (let k = 0; k <= 10; k++) picks.add(Math.min(samples.length - 1, Math.round((k * (samples.length - 1)) / 10)));
  for (const i of [...picks].sort((a, b) => a - b)) {
    const s = samples[i];
    if (s === undefined) continue;
    rows.push([
      (s.t / 60).toFixed(1),
      s.life === 0 ? 'first' : 'restarted',
      mib(s.rssBytes),
      mib(s.heapUsedBytes),
      String(s.fds),
      Number.isFinite(s.handles) ? String(s.handles) : 'n/a',
      String(s.dbConnections),
      Number.isFinite(s.syncRuns) ? String(s.syncRuns - s.syncFailures) : 'n/a',
      Number.isFinite(s.syncFailures) ? String(s.syncFailures) : 'n/a',
      s.scrapeMs.toFixed(0),
    ]);
  }
  return rows;
}

/** soak/RESULT.md. */
export function renderMarkdown(result: SoakResult): string {
  const pass = soakPassed(result.checks);
  const unjudged = result.checks.some((c) => c.judged === false);
  const m = result.machine;
  const queued = (tally: FaultTally) =>
    Object.entries(tally.queued)
      .map(([kind, n]) => `${kind} ×${n}`)
      .join(', ') || 'none';
  const sourceNames = result.sources.map((x) => x.name);
  const logs = Object.entries(result.logCounts).sort((a, b) => b[1] - a[1]);
  const out = [
    `# Soak: ${result.minutes} minutes, ${pass ? 'PASSED' : 'FAILED'}${unjudged ? ` (flatness not judged: shorter than ${MIN_FLAT_SECONDS / 60} minutes)` : ''}`,
    '',
    `Written by \`npm run soak -- --minutes ${result.minutes}\` (soak/run.ts) on ${result.finishedAt.toISOString()}. It ran two \`serve\` replicas (A and B) on one PostgreSQL schema (a throwaway cluster), both as the **runtime role** \`${RUNTIME_ROLE}\` of docs/deploy.md with MIGRATE=off, after the owner role \`${OWNER_ROLE}\` ran \`migrate\` once, with a CONFIG_FILE of four sources, each an in-process simulator with its own faults, and a fifth (\`delta\`) added by a reload; WEB_CONFIG_FILE basic auth on both; SYNC_SHRINK=keep; the audit inside serve. \`epsilon\`'s E6 refuses pages past offset 2,000 and holds 20,000 records at one instant, and ignores pageNumber at another: those two windows must be **parked** with their reasons and every other window of it exact; \`delta\`'s totalRecords claims one more than it serves in three windows, which must be committed short with every served record stored. Events at shares of the run: a maintenance session holding ACCESS EXCLUSIVE on \`records\` for 20 s at 27 %, SIGHUP adding \`delta\` at 1/3, replica B killed with SIGKILL and restarted at 1/2, \`POST /-/reload\` changing alpha's schedule at 2/3, a hostile client on 127.0.0.2 (2,000 slowloris connections and a wrong-password flood per replica) from 80 % to 86.7 %. Each replica was scraped (/metrics, /readyz, with the right password) and sampled every ${result.sampleEverySeconds} s, both replicas at once; a reload took effect "within one scrape" when the first scrape after it showed it (or the next, within 5 s + 1 s, when the first came before the reload was applied). At the end both got SIGTERM, one \`sync\` ran without the alpha's faults (exit 1 is right while epsilon's windows stay parked), and every committed window of each source was compared with its simulator's records (quarantine and records deleted upstream and kept included; parked windows must hold nothing), and every rollup and the field catalogue with the records. ${result.auditNote}`,
    '',
    '## Sources and retention',
    '',
    ...result.sources.map((x) => `- \`${x.name}\`: ${x.description}`),
    `- ${result.retention}`,
    '',
    '## Database roles',
    '',
    result.roles.note,
    '',
    '```sql',
    ...result.roles.statements.map((x) => `${x};`),
    '```',
    '',
    '## Machine',
    '',
    mdTable([
      ['', ''],
      ['CPU', `${m.cpu}, ${m.cores} cores (shared with other work)`],
      ['Memory', m.memory],
      ['OS', m.os],
      ['Node.js', m.node],
      ['PostgreSQL', m.postgres],
      ['Load average (1 min) start → end', `${result.loadStart.toFixed(2)} → ${result.loadEnd.toFixed(2)}`],
      ['Hypervisor steal over the soak', result.steal === undefined ? 'n/a' : `${(result.steal * 100).toFixed(1)} %`],
      ['Code measured', result.revision],
      ['Started, finished', `${result.startedAt.toISOString()}, ${result.finishedAt.toISOString()}`],
    ]),
    '',
    '## Verdicts',
    '',
    mdTable([['', 'check', 'detail'], ...result.checks.map((c) => [emphasised(verdictOf(c)), c.name, c.detail])]),
    '',
    ...result.notes.map((n) => `- ${n}`),
    '',
    `"Flat", per replica (replica A over the whole run, replica B from its restart), the hostile minutes and 30 s after them (2 % of a run shorter than 25 minutes) left out: the first 20 % of samples is warm-up. Level: an end band against a baseline band, for heap used, descriptors and handles by their floors (the 10th percentile: heap used swings by a quarter between collections within a minute, descriptors and handles rise while a run is in flight and fall after, and what a leak holds is never given back, so it raises the floor they return to; heap used at most +15 %, descriptors and handles at most +2), for RSS by its lowest sample (V8 and malloc give memory back in steps, sometimes minutes after a burst such as the hostile minutes, and a leak is resident in every sample, the lowest included; at most +10 %), for connections by their medians (at most +1). For RSS, descriptors and handles both bands lie in the last configuration: the baseline from a minute (5 % of a short run) after the POST reload to the hostile minutes, the end from their aftermath to the end. Before that the work changes: a fourth source at 1/3 and a faster schedule at 2/3 hold more memory and more sockets, which is no leak. Heap used is judged over the whole series (the 20–40 % band against the last 20 %), across those changes, as the guard a configuration cannot explain: a leak of the runs' objects grows the heap whatever the sources. Peak, for connections (bounded by the pools): the 99th percentile of the second half (nearest rank: its maximum leaves out one sample in a hundred, a coincidence of several runs in flight) at most the maximum of the first half plus 2. Descriptors and handles show their halves' maxima unjudged: a peak is how many runs a sample happens to catch in flight (it moved by up to 6 between two bands of one configuration in the soaks of 2026-11-27 while the floors held still), and a leaked descriptor stays open, which raises the floor. DB connections are both replicas' together (one application_name), sampled with A, from B's restart on (each pool is sized at its start for the sources then, so before it the level follows delta's addition at 1/3 and B's first pool), bands 20–40 % and last 20 %. ${result.replicas.map((r) => `${r.name}: ${r.samples.length} samples`).join(', ')}.`,
    '',
    mdTable([FLAT_HEADER, ...flatRows(result.flat)]),
    '',
    ...result.replicas.flatMap((r) => [`### Replica ${r.name} over time`, '', mdTable(timeline(r.samples)), '']),
    '## Syncs',
    '',
    ...sourceNames.map((name) => {
      const per = Object.entries(result.syncs.byReplica)
        .map(([replica, bySource]) => {
          const v = bySource[name];
          return v ? `${replica} ${v.ok} succeeded, ${v.failed} failed, ${v.locked} ticks skipped (lock held by the other)` : `${replica} none`;
        })
        .join('; ');
      const status = Object.entries(result.syncs.byStatus[name] ?? {})
        .map(([k, v]) => `${k} ${v}`)
        .join(', ');
      return `- \`${name}\`: ${per}; sync_runs rows by status: ${status || 'none'}.`;
    }),
    `- Final \`sync\` without faults: ${result.finalSync.detail}.`,
    ...sourceNames.map((name) => {
      const w = result.windowChecks[name];
      return w
        ? `- Windows of \`${name}\`: ${w.windows} in the ledger (${w.expiredWindows} expired, holding ${w.expiredRecords} of the simulator's records), ${w.storedRecords} rows stored, ${w.expectedRecords} expected, watermark ${w.watermark?.toISOString() ?? 'none'}${w.problems.length ? `; problems: ${w.problems.join('; ')}` : '; every committed window exact'}` +
            `${w.parked.map((p) => `; parked [${p.start.toISOString()}, ${p.end.toISOString()}) holding ${p.records} records upstream, none stored, reason: ${p.reason.replace(/\|/g, '\\|')}`).join('')}` +
            `${w.short.map((x) => `; short [${x.start.toISOString()}, ${x.end.toISOString()}): E6 claimed ${x.claimed}, served ${x.served}, all stored`).join('')}.`
        : `- Windows of \`${name}\`: not checked.`;
    }),
    ...sourceNames.map((name) => {
      const d = result.derivedChecks[name];
      return d
        ? `- Derived tables of \`${name}\`: records_hourly ${d.rows.hourly} rows (${d.expiredRows.hourly} of expired windows), records_hourly_distinct ${d.rows.hourlyDistinct} (${d.expiredRows.hourlyDistinct} of expired windows), records_daily_distinct ${d.rows.dailyDistinct}, record_fields ${d.rows.fields} fields, records_typed ${d.typedRows} rows${d.problems.length ? `; problems: ${d.problems.join('; ')}` : '; all equal'}${d.arrivedTooLate ? `; ${d.arrivedTooLate} records of expired windows optional: they arrived upstream less than one audit period + 60 s before their window expired, so an audit may or may not have loaded them` : ''}.`
        : `- Derived tables of \`${name}\`: not checked.`;
    }),
    `- serve CPU ${result.replicas.map((r) => `${r.name} ${r.cpuSeconds?.toFixed(1) ?? 'n/a'} s`).join(', ')} (B: its restarted process), PostgreSQL CPU ${result.postgresCpuSeconds?.toFixed(1) ?? 'n/a'} s over the soak.`,
    '',
    '## Faults injected',
    '',
    `- Standing, on alpha's simulator: 429 on every 17th E6/E7 request (Retry-After 1 s), 503 on a seeded 4 % of them, truncated JSON on every 29th E6 response, tokens revoked 90 s after issue (expires_in says 3600), 2 ms latency on every request.`,
    ...sourceNames.flatMap((name) => {
      const f = result.faults[name];
      const r = result.requests[name];
      if (r === undefined) return [];
      return [
        ...(f === undefined
          ? []
          : [
              `- \`${name}\`, one-shot, one at a time: ${queued(f)}.`,
              `- \`${name}\`, records arriving while a window is paged: armed ${f.arrivalsArmed} times, ${f.arrivalsPerArming} records each; late records behind its watermark (within SYNC_LOOKBACK): ${f.lateRecords} in ${f.lateBatches} batches (${f.lateSkipped} batches left out while its watermark lagged the clock).`,
            ]),
        `- \`${name}\`, simulator requests: ${r.token} token, ${r.analytics} E6, ${r.prometheus} E7; responses by status: ${Object.entries(
          result.responses[name] ?? {},
        )
          .map(([k, v]) => `${k} ×${v}`)
          .join(', ')}.`,
      ];
    }),
    `- Database: ${Object.values(result.faults).reduce((n, f) => n + f.dbKillRounds, 0)} rounds of pg_terminate_backend on serve's connections, ${Object.values(result.faults).reduce((n, f) => n + f.dbConnectionsKilled, 0)} connections terminated.`,
    result.driverErrors.length ? `- Errors of the fault driver itself: ${result.driverErrors.join('; ')}` : '',
    '',
    '## serve settings',
    '',
    '```',
    ...Object.entries(result.settings).map(([k, v]) => `${k}=${v}`),
    '```',
    '',
    "## serve's warnings and errors, by message",
    '',
    logs.length ? mdTable([['count', 'message'], ...logs.map(([msg, n]) => [String(n), msg.replace(/\|/g, '\\|')])]) : 'None.',
    '',
  ];
  return out.filter((line, i, all) => !(line === '' && all[i - 1] === '')).join('\n');
}
