/**
 * Issue 25 item 2, "Authentication cannot stall scrapes", measured against `serve` children with
 * `basic_auth_users` (WEB_CONFIG_FILE, plain HTTP):
 * (a) wrong-password attackers (`attackers` at once, each sending the next request as soon as the
 *     last is answered, random passwords) from 127.0.0.2, in a child process of their own
 *     (bench/lib/auth-attacker.ts), while a correctly authenticated scraper on 127.0.0.1 scrapes
 *     /metrics every `scrapeIntervalMs`: the scrape's p50/p99 before and during the attack, and
 *     the attackers' answers by status (429 split into budget and busy);
 * (b) for one user at each cost, the median time of a wrong-password attempt and of an
 *     unknown-user attempt, alternating on one keep-alive connection, against a serve without a
 *     failure budget (AUTH_FAILURE_BUDGET=0, so that bcrypt, not the budget, answers every one),
 *     and their difference.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import bcrypt from 'bcryptjs';
import { Agent, request } from 'undici';
import { startSimulator, type Simulator } from '@analytics-exporter/simulator';
import { ROOT, startServeChild, upstreamEnv, type ServerChild } from '../lib/children.js';
import { withFreshDatabase, type BenchContext } from '../lib/context.js';
import { median } from '../lib/stats.js';
import { BasicAuth } from '../../src/serve/web/basic-auth.js';

export interface HostileAuthPlan {
  /** Concurrent wrong-password attackers from one address. */
  attackers: number;
  /** How long each attack lasts, in seconds. */
  attackSeconds: number;
  /** Scrapes without an attack first, for comparison, over this many seconds. */
  baselineSeconds: number;
  /** One scrape from the scraper's address every this many milliseconds (sequential). */
  scrapeIntervalMs: number;
  /** bcrypt costs of the attacked user in (a). */
  attackCosts: number[];
  /** bcrypt costs of (b), one user at each. */
  timingCosts: number[];
  /** Attempts of each kind per cost in (b); five times as many below cost 10, where a check lasts about as long as the request around it and the noise is relatively larger. */
  timingSamples: number;
}

/** The plan `--quick` would use: short attacks, few timing samples. */
export const QUICK_HOSTILE_AUTH_PLAN: HostileAuthPlan = {
  attackers: 150,
  attackSeconds: 10,
  baselineSeconds: 3,
  scrapeIntervalMs: 100,
  attackCosts: [10, 12],
  timingCosts: [4, 8, 10, 12],
  timingSamples: 11,
};

export interface LatencyStats {
  count: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  /** Answers other than 200, and requests that failed. */
  failures: number;
}

export interface AttackRound {
  cost: number;
  baseline: LatencyStats;
  duringAttack: LatencyStats;
  attackers: {
    requests: number;
    perSecond: number;
    /** `401`, `429 budget`, `429 busy`, other statuses by number, `error` (no answer). */
    statuses: Record<string, number>;
  };
}

export interface TimingRow {
  cost: number;
  samples: number;
  wrongPasswordMedianMs: number;
  unknownUserMedianMs: number;
  /** |unknown − wrong| ÷ wrong, in percent. */
  differencePercent: number;
  /** The same for the check alone (BasicAuth.verify in this process, bcryptjs on this thread), without HTTP's noise around it. */
  check: { wrongPasswordMedianMs: number; unknownUserMedianMs: number; differencePercent: number };
}

export interface HostileAuthReport {
  plan: HostileAuthPlan;
  attack: AttackRound[];
  timing: TimingRow[];
}

const PASSWORD = 'bench-scrape-pass';
const basic = (user: string, password: string): string => `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Nearest-rank percentile of a non-empty list. */
function percentile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

function stats(latencies: readonly number[], failures: number): LatencyStats {
  if (latencies.length === 0) return { count: 0, p50Ms: NaN, p99Ms: NaN, maxMs: NaN, failures };
  return { count: latencies.length, p50Ms: percentile(latencies, 50), p99Ms: percentile(latencies, 99), maxMs: Math.max(...latencies), failures };
}

/** One GET; the status, the body's first words and the time to the end of the body, in ms. */
async function timedGet(url: string, agent: Agent, authorization: string): Promise<{ status: number | 'error'; body: string; ms: number }> {
  const started = performance.now();
  try {
    const res = await request(url, { dispatcher: agent, headers: { authorization } });
    const body = await res.body.text();
    return { status: res.statusCode, body: body.slice(0, 40), ms: performance.now() - started };
  } catch {
    return { status: 'error', body: '', ms: performance.now() - started };
  }
}

/** Scrapes `url` one after another, `intervalMs` apart, while `running()`; latencies of the 200s and the failures. */
async function scrapeWhile(url: string, agent: Agent, intervalMs: number, running: () => boolean): Promise<LatencyStats> {
  const latencies: number[] = [];
  let failures = 0;
  while (running()) {
    const answer = await timedGet(url, agent, basic('prometheus', PASSWORD));
    if (answer.status === 200) latencies.push(answer.ms);
    else failures++;
    await sleep(intervalMs);
  }
  return stats(latencies, failures);
}

function webConfig(ctx: BenchContext, name: string, cost: number): string {
  const file = join(ctx.scratch, name);
  writeFileSync(file, `basic_auth_users:\n  prometheus: '${bcrypt.hashSync(PASSWORD, cost)}'\n`);
  return file;
}

async function withServe<T>(sim: Simulator, databaseUrl: string, env: Record<string, string>, fn: (serve: ServerChild) => Promise<T>): Promise<T> {
  const serve = await startServeChild(upstreamEnv(sim.url, databaseUrl, env));
  try {
    return await fn(serve);
  } finally {
    await serve.stop();
  }
}

async function attackRound(ctx: BenchContext, plan: HostileAuthPlan, serve: ServerChild, cost: number): Promise<AttackRound> {
  const scraper = new Agent({ localAddress: '127.0.0.1', connections: 2 });
  try {
    const metrics = `${serve.url}/metrics`;
    // Prometheus's login, remembered before anything else; then the scrape without an attack.
    await timedGet(metrics, scraper, basic('prometheus', PASSWORD));
    const baselineEnd = performance.now() + plan.baselineSeconds * 1000;
    const baseline = await scrapeWhile(metrics, scraper, plan.scrapeIntervalMs, () => performance.now() < baselineEnd);

    const attack = startAttack(`${serve.url}/metrics`, plan);
    await attack.started;
    const started = performance.now();
    let attacking = true;
    const ended = attack.statuses.finally(() => (attacking = false));
    const duringAttack = await scrapeWhile(metrics, scraper, plan.scrapeIntervalMs, () => attacking);
    const statuses = await ended;
    const seconds = (performance.now() - started) / 1000;
    const requests = Object.values(statuses).reduce((n, count) => n + count, 0);
    ctx.log(
      `hostile auth, cost ${cost}: scrape p50 ${duringAttack.p50Ms.toFixed(1)} ms p99 ${duringAttack.p99Ms.toFixed(1)} ms ` +
        `(${duringAttack.count} scrapes, ${duringAttack.failures} failed; without attack p99 ${baseline.p99Ms.toFixed(1)} ms); attackers ${JSON.stringify(statuses)}`,
    );
    return { cost, baseline, duringAttack, attackers: { requests, perSecond: requests / seconds, statuses } };
  } finally {
    await scraper.close();
  }
}

/** Starts bench/lib/auth-attacker.ts against `url` from 127.0.0.2; `started` once it attacks, `statuses` when it ends. */
function startAttack(url: string, plan: HostileAuthPlan): { started: Promise<void>; statuses: Promise<Record<string, number>> } {
  const script = fileURLToPath(new URL('../lib/auth-attacker.ts', import.meta.url));
  const child = spawn(process.execPath, ['--import', 'tsx', script, url, String(plan.attackers), String(plan.attackSeconds), '127.0.0.2'], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  const started = new Promise<void>((resolve) =>
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
      if (stderr.includes('attacking')) resolve();
    }),
  );
  const statuses = new Promise<Record<string, number>>((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (code) => {
      if (code === 0) resolve(JSON.parse(stdout.trim().split('\n').pop()!) as Record<string, number>);
      else reject(new Error(`the attacker exited ${code}:\n${stderr.slice(-2000)}`));
    });
  });
  // A child that fails before attacking ends the wait for its start too.
  return { started: Promise.race([started, statuses.then(() => undefined)]), statuses };
}

async function timingRow(ctx: BenchContext, plan: HostileAuthPlan, serve: ServerChild, cost: number): Promise<TimingRow> {
  const wrong: number[] = [];
  const unknown: number[] = [];
  // Alternating, and which kind goes first in each pair too, so that a change of the machine's
  // load weighs on both kinds alike; one keep-alive connection, opened by a first attempt not counted.
  const agent = new Agent({ localAddress: '127.0.0.3', connections: 1 });
  try {
    await timedGet(`${serve.url}/`, agent, basic('prometheus', 'warm-up'));
    const samples = plan.timingSamples * (cost < 10 ? 5 : 1);
    for (let i = 0; i < samples * 2; i++) {
      const isWrong = (i + (i >> 1)) % 2 === 0;
      const answer = await timedGet(`${serve.url}/`, agent, isWrong ? basic('prometheus', `wrong-${i}`) : basic(`nobody-${i}`, `wrong-${i}`));
      if (answer.status !== 401) throw new Error(`a ${isWrong ? 'wrong password' : 'unknown user'} was answered ${answer.status}, not 401`);
      (isWrong ? wrong : unknown).push(answer.ms);
    }
  } finally {
    await agent.close();
  }
  const wrongPasswordMedianMs = median(wrong);
  const unknownUserMedianMs = median(unknown);
  const differencePercent = (Math.abs(unknownUserMedianMs - wrongPasswordMedianMs) / wrongPasswordMedianMs) * 100;
  const check = await checkAlone(cost, wrong.length);
  ctx.log(
    `hostile auth timing, cost ${cost}: wrong password ${wrongPasswordMedianMs.toFixed(1)} ms, unknown user ${unknownUserMedianMs.toFixed(1)} ms (${differencePercent.toFixed(1)}%); ` +
      `check alone ${check.wrongPasswordMedianMs.toFixed(2)} / ${check.unknownUserMedianMs.toFixed(2)} ms (${check.differencePercent.toFixed(1)}%)`,
  );
  return { cost, samples: wrong.length, wrongPasswordMedianMs, unknownUserMedianMs, differencePercent, check };
}

/** Medians of `samples` uncached wrong-password and unknown-user checks of BasicAuth alone (one user at `cost`), alternating. */
async function checkAlone(cost: number, samples: number): Promise<TimingRow['check']> {
  const auth = new BasicAuth({ prometheus: bcrypt.hashSync(PASSWORD, cost) });
  await auth.decoyHash();
  const wrong: number[] = [];
  const unknown: number[] = [];
  for (let i = 0; i < samples * 2; i++) {
    const isWrong = (i + (i >> 1)) % 2 === 0;
    const started = performance.now();
    await auth.verify(isWrong ? basic('prometheus', `wrong-${i}`) : basic(`nobody-${i}`, `wrong-${i}`));
    (isWrong ? wrong : unknown).push(performance.now() - started);
  }
  const wrongPasswordMedianMs = median(wrong);
  const unknownUserMedianMs = median(unknown);
  return {
    wrongPasswordMedianMs,
    unknownUserMedianMs,
    differencePercent: (Math.abs(unknownUserMedianMs - wrongPasswordMedianMs) / wrongPasswordMedianMs) * 100,
  };
}

/**
 * Runs (a) and (b) against fresh `serve` children (one per cost) on one fresh database, with an
 * in-process simulator as the upstream.
 *
 * @throws when a serve child does not start, or a timing attempt is not answered 401.
 */
export async function hostileAuthPart(ctx: BenchContext, plan: HostileAuthPlan): Promise<HostileAuthReport> {
  const sim = await startSimulator({ port: 0, records: 200, end: new Date(), start: new Date(Date.now() - 86_400_000) });
  try {
    return await withFreshDatabase(ctx, 'bench_hostile_auth', async (db) => {
      const attack: AttackRound[] = [];
      for (const cost of plan.attackCosts) {
        // Every attacker's connection reaches the password checks (the default 32 per client would
        // refuse most at the connection): this measures the checks' own bounds, the harder case.
        const env = { WEB_CONFIG_FILE: webConfig(ctx, `auth-attack-${cost}.yml`, cost), METRICS_MAX_CONNECTIONS_PER_CLIENT: String(plan.attackers + 8) };
        attack.push(await withServe(sim, db.url, env, (serve) => attackRound(ctx, plan, serve, cost)));
      }
      const timing: TimingRow[] = [];
      for (const cost of plan.timingCosts) {
        const env = { WEB_CONFIG_FILE: webConfig(ctx, `auth-timing-${cost}.yml`, cost), AUTH_FAILURE_BUDGET: '0' };
        timing.push(await withServe(sim, db.url, env, (serve) => timingRow(ctx, plan, serve, cost)));
      }
      return { plan, attack, timing };
    });
  } finally {
    await sim.close();
  }
}

/** The report as Markdown tables, for BENCHMARKS.md. */
export function hostileAuthMarkdown(report: HostileAuthReport): string {
  const ms = (n: number): string => (Number.isNaN(n) ? 'n/a' : n.toFixed(1));
  const lines = [
    `(a) ${report.plan.attackers} wrong-password attackers from 127.0.0.2 (a process of their own) for ${report.plan.attackSeconds} s; a scrape of /metrics from 127.0.0.1 every ${report.plan.scrapeIntervalMs} ms (login cached)`,
    '',
    '| cost | scrape p50 / p99 / max without attack (ms) | scrape p50 / p99 / max under attack (ms) | scrapes (failed) | attacker requests (per s) | attackers answered |',
    '|---|---|---|---|---|---|',
    ...report.attack.map(
      (r) =>
        `| ${r.cost} | ${ms(r.baseline.p50Ms)} / ${ms(r.baseline.p99Ms)} / ${ms(r.baseline.maxMs)} | ${ms(r.duringAttack.p50Ms)} / ${ms(r.duringAttack.p99Ms)} / ${ms(r.duringAttack.maxMs)} | ` +
        `${r.duringAttack.count} (${r.duringAttack.failures}) | ${r.attackers.requests} (${r.attackers.perSecond.toFixed(0)}) | ` +
        Object.entries(r.attackers.statuses)
          .sort()
          .map(([status, n]) => `${status}: ${n}`)
          .join(', ') +
        ' |',
    ),
    '',
    '(b) median of the attempts of each kind (samples: per kind), one user at the cost, alternating on one keep-alive connection, AUTH_FAILURE_BUDGET=0',
    '',
    '| cost | samples | over HTTP: wrong password / unknown user (ms) | difference | the check alone: wrong password / unknown user (ms) | difference |',
    '|---|---|---|---|---|---|',
    ...report.timing.map(
      (r) =>
        `| ${r.cost} | ${r.samples} | ${ms(r.wrongPasswordMedianMs)} / ${ms(r.unknownUserMedianMs)} | ${r.differencePercent.toFixed(1)}% | ` +
        `${r.check.wrongPasswordMedianMs.toFixed(2)} / ${r.check.unknownUserMedianMs.toFixed(2)} | ${r.check.differencePercent.toFixed(1)}% |`,
    ),
  ];
  return lines.join('\n');
}
