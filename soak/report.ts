/** The soak's result as a console table and as soak/RESULT.md. */
import type { Machine } from '../bench/lib/machine.js';
import type { FaultTally } from './faults.js';
import type { FlatVerdict } from './flat.js';
import type { Sample } from './sampler.js';
import type { WindowCheck } from './verify.js';

/** One pass/fail line of the verdict. */
export interface Check {
  name: string;
  pass: boolean;
  detail: string;
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
  /** serve's environment, secrets and the database URL left out. */
  settings: Record<string, string>;
  sampleEverySeconds: number;
  samples: Sample[];
  flat: FlatVerdict[];
  checks: Check[];
  /** From serve's /metrics at the end, and sync_runs rows by status (serve's runs only). */
  syncs: { runs: number; failures: number; skipped: number; byStatus: Record<string, number> };
  faults: FaultTally;
  /** The simulator's responses by status, and requests by endpoint. */
  responses: Record<string, number>;
  requests: { token: number; analytics: number; prometheus: number };
  serveCpuSeconds: number | undefined;
  postgresCpuSeconds: number | undefined;
  shutdown: { code: number | null; signal: string | null; seconds: number };
  finalSync: { pass: boolean; wallSeconds: number; detail: string };
  windowCheck: WindowCheck | undefined;
  /** serve's warn/error/fatal log lines, counted by message. */
  logCounts: Record<string, number>;
  driverErrors: readonly string[];
}

/** Bytes as MiB with one decimal. */
export function mib(bytes: number): string {
  return Number.isFinite(bytes) ? `${(bytes / 2 ** 20).toFixed(1)} MiB` : 'n/a';
}

function fmt(verdict: FlatVerdict, value: number): string {
  return verdict.rule.name === 'RSS' ? mib(value) : Number.isFinite(value) ? String(Math.round(value * 10) / 10) : 'n/a';
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

const FLAT_HEADER = ['resource', 'start', 'mid', 'end', 'max', 'median 20–40 %', 'median last 20 %', 'verdict'];

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
    pad(result.checks.map((c) => [c.pass ? 'PASS' : 'FAIL', c.name, c.detail])),
    '',
    `syncs: ${result.syncs.runs} runs, ${result.syncs.runs - result.syncs.failures} succeeded, ${result.syncs.failures} failed, ${result.syncs.skipped} ticks skipped; sync_runs by status ${JSON.stringify(result.syncs.byStatus)}`,
    `upstream responses by status: ${JSON.stringify(result.responses)}`,
  ];
  return lines.join('\n');
}

function mdTable(rows: string[][]): string {
  const [header, ...body] = rows;
  return [`| ${header!.join(' | ')} |`, `|${header!.map(() => '---').join('|')}|`, ...body.map((r) => `| ${r.join(' | ')} |`)].join('\n');
}

/** About ten rows spread over the soak: the shape of each resource over time. */
function timeline(samples: Sample[]): string[][] {
  const rows = [['t (min)', 'RSS', 'heap used', 'fds', 'handles', 'DB conns', 'syncs ok', 'syncs failed', 'scrape ms']];
  const picks = new Set<number>();
  for (let k = 0; k <= 10; k++) picks.add(Math.min(samples.length - 1, Math.round((k * (samples.length - 1)) / 10)));
  for (const i of [...picks].sort((a, b) => a - b)) {
    const s = samples[i];
    if (s === undefined) continue;
    rows.push([
      (s.t / 60).toFixed(1),
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
  const pass = result.checks.every((c) => c.pass);
  const m = result.machine;
  const queued =
    Object.entries(result.faults.queued)
      .map(([kind, n]) => `${kind} ×${n}`)
      .join(', ') || 'none';
  const logs = Object.entries(result.logCounts).sort((a, b) => b[1] - a[1]);
  const out = [
    `# Soak: ${result.minutes} minutes, ${pass ? 'PASSED' : 'FAILED'}`,
    '',
    `Written by \`npm run soak -- --minutes ${result.minutes}\` (soak/run.ts) on ${result.finishedAt.toISOString()}. It ran \`serve\` against the in-process simulator injecting faults and a throwaway PostgreSQL, scraped /metrics and /readyz every ${result.sampleEverySeconds} s as Prometheus would, sampled the process, stopped it with SIGTERM, ran one \`sync\` without faults and compared every committed window with the simulator's records.`,
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
    mdTable([['', 'check', 'detail'], ...result.checks.map((c) => [c.pass ? 'PASS' : '**FAIL**', c.name, c.detail])]),
    '',
    `"Flat": the first 20 % of samples is warm-up. Level: the median of the last 20 % against the median of the 20–40 % band (RSS at most +10 %; descriptors and handles at most +2; connections at most +1). Peak: the maximum of the second half at most the maximum of the first half plus a slack (descriptors and handles 4, connections 1). ${result.samples.length} samples.`,
    '',
    mdTable([FLAT_HEADER, ...flatRows(result.flat)]),
    '',
    '### Over time',
    '',
    mdTable(timeline(result.samples)),
    '',
    '## Syncs',
    '',
    `- ${result.syncs.runs} runs in serve (sync_runs_total), **${result.syncs.runs - result.syncs.failures} succeeded, ${result.syncs.failures} failed**, ${result.syncs.skipped} ticks skipped while a run was going.`,
    `- sync_runs rows by status: ${
      Object.entries(result.syncs.byStatus)
        .map(([k, v]) => `${k} ${v}`)
        .join(', ') || 'none'
    }.`,
    `- Final \`sync\` without faults: ${result.finalSync.detail}.`,
    result.windowCheck
      ? `- Windows: ${result.windowCheck.windows} committed, ${result.windowCheck.storedRecords} rows stored, ${result.windowCheck.expectedRecords} expected, watermark ${result.windowCheck.watermark?.toISOString() ?? 'none'}${result.windowCheck.problems.length ? `; problems: ${result.windowCheck.problems.join('; ')}` : '; every window exact'}.`
      : '- Windows: not checked.',
    `- serve CPU ${result.serveCpuSeconds?.toFixed(1) ?? 'n/a'} s, PostgreSQL CPU ${result.postgresCpuSeconds?.toFixed(1) ?? 'n/a'} s over the soak.`,
    '',
    '## Faults injected',
    '',
    `- Standing: 429 on every 17th E6/E7 request (Retry-After 1 s), 503 on a seeded 4 % of them, truncated JSON on every 29th E6 response, tokens revoked 90 s after issue (expires_in says 3600), 2 ms latency on every request.`,
    `- One-shot, one at a time: ${queued}.`,
    `- Records arriving while a window is paged: armed ${result.faults.arrivalsArmed} times, ${result.faults.arrivalsPerArming} records each.`,
    `- Late records behind the watermark (within SYNC_LOOKBACK): ${result.faults.lateRecords} in ${result.faults.lateBatches} batches.`,
    `- Database: ${result.faults.dbKillRounds} rounds of pg_terminate_backend on serve's connections, ${result.faults.dbConnectionsKilled} connections terminated.`,
    `- Simulator requests: ${result.requests.token} token, ${result.requests.analytics} E6, ${result.requests.prometheus} E7; responses by status: ${Object.entries(
      result.responses,
    )
      .map(([k, v]) => `${k} ×${v}`)
      .join(', ')}.`,
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
