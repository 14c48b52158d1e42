/**
 * Issue 25 item 2: authentication cannot stall scrapes. 150 concurrent attackers with wrong
 * passwords from one address (127.0.0.2) spend that address's failure budget (AUTH_FAILURE_BUDGET)
 * and are then answered 429 with `Retry-After` without a password check, while a correctly
 * authenticated scraper on another address (127.0.0.1) is answered 200 throughout, and logs in
 * afresh (uncached) meanwhile. Status codes and counts only: the timings are the bench's
 * (bench/suites/hostile-auth.ts).
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import bcrypt from 'bcryptjs';
import { Agent, request } from 'undici';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator, type Simulator } from '@analytics-exporter/simulator';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/log.js';
import { startServe, type RunningServer } from '../../src/serve/lifecycle.js';
import { useTestDatabase } from '../helpers/db.js';
import { captureLog } from '../helpers/log-capture.js';
import { scratchDir } from '../helpers/scratch.js';
import { simulatorEnv } from '../helpers/sync.js';

const db = useTestDatabase();
let sim: Simulator;
const running: RunningServer[] = [];
const agents: Agent[] = [];
const PASSWORD = 'scrape-pass-7';
const ATTACKERS = 150;
/** How long the attack may last at most (it ends when every attacker was refused for the budget). */
const ATTACK_DEADLINE_MS = 45_000;

beforeAll(async () => {
  sim = await startSimulator({ port: 0, records: 200, end: new Date(), start: new Date(Date.now() - 86_400_000) });
});
afterEach(async () => {
  while (running.length) await running.pop()!.stop();
  while (agents.length) await agents.pop()!.close();
});
afterAll(async () => {
  await sim?.close();
});

const basic = (user: string, password: string) => `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;

/** An agent whose connections leave from `localAddress` (a loopback address of its own: one client). */
function from(localAddress: string, connections: number): Agent {
  // Agent's own localAddress: undici does not take it from `connect`.
  const agent = new Agent({ localAddress, connections });
  agents.push(agent);
  return agent;
}

async function get(url: string, agent: Agent, authorization: string): Promise<{ status: number; retryAfter: string | undefined }> {
  const res = await request(url, { dispatcher: agent, headers: { authorization } });
  await res.body.text();
  const retryAfter = res.headers['retry-after'];
  return { status: res.statusCode, retryAfter: typeof retryAfter === 'string' ? retryAfter : undefined };
}

describe('serve under wrong-password attackers from one address', () => {
  it(
    'spends the attacker address its budget, then refuses it 429 with Retry-After; another address logs in and scrapes throughout',
    { timeout: 90_000 },
    async () => {
      const dir = scratchDir('auth-budget-');
      const file = join(dir, 'web.yml');
      // Cost 10, the common default: each check is long enough for the attack to pile up behind it.
      writeFileSync(file, `basic_auth_users:\n  prometheus: '${bcrypt.hashSync(PASSWORD, 10)}'\n  second: '${bcrypt.hashSync(PASSWORD, 10)}'\n`);
      const capture = captureLog();
      const config = loadConfig({
        ...simulatorEnv(sim),
        DATABASE_URL: db.url,
        DATABASE_SCHEMA: 'auth_budget',
        METRICS_LISTEN: '127.0.0.1:0',
        SYNC_SCHEDULE: 'off',
        WEB_CONFIG_FILE: file,
        // The password budget is under test: the attackers' 150 connections all reach it (the default
        // of 32 per client would refuse most of them at the connection, before any password).
        METRICS_MAX_CONNECTIONS_PER_CLIENT: String(ATTACKERS + 8),
      });
      const s = await startServe(config, createLogger('info', { format: 'json', destination: capture }));
      running.push(s);
      const scraper = from('127.0.0.1', 4);
      const attacker = from('127.0.0.2', ATTACKERS);

      // Prometheus's login, remembered before the attack.
      expect((await get(`${s.url}/metrics`, scraper, basic('prometheus', PASSWORD))).status).toBe(200);

      const started = Date.now();
      let attacking = true;
      // Each attacker tries new wrong passwords, 100 ms apart, until it is refused for the budget.
      const attack = Promise.all(
        Array.from({ length: ATTACKERS }, async (_, i) => {
          const answers = [];
          for (let round = 0; Date.now() - started < ATTACK_DEADLINE_MS; round++) {
            const answer = await get(`${s.url}/`, attacker, basic('prometheus', `wrong-${i}-${round}`));
            answers.push(answer);
            if (answer.status === 429 && Number(answer.retryAfter) > 1) break;
            await new Promise((resolve) => setTimeout(resolve, 100));
          }
          return answers;
        }),
      ).finally(() => (attacking = false));
      const scrapes: number[] = [];
      const scraping = (async () => {
        while (attacking) {
          scrapes.push((await get(`${s.url}/metrics`, scraper, basic('prometheus', PASSWORD))).status);
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
      })();
      // A login that is not remembered yet, from the scraper's address, while the attack runs.
      await new Promise((resolve) => setTimeout(resolve, 200));
      const fresh = await get(`${s.url}/`, scraper, basic('second', PASSWORD));
      const attackers = await attack;
      const answers = attackers.flat();
      await scraping;
      const seconds = (Date.now() - started) / 1000;

      expect(fresh.status).toBe(200);
      expect(scrapes.length).toBeGreaterThan(0);
      expect(scrapes.filter((status) => status !== 200)).toEqual([]);
      // Every attacker ended refused for the budget, well before the deadline.
      expect(attackers.every((mine) => Number(mine.at(-1)!.retryAfter) > 1)).toBe(true);
      expect(answers.every((a) => a.status === 401 || a.status === 429)).toBe(true);
      // At most the budget (10) plus what refilled meanwhile (one per 6 s) were checked and denied.
      const denied = answers.filter((a) => a.status === 401).length;
      expect(denied).toBeGreaterThan(0);
      expect(denied).toBeLessThanOrEqual(10 + Math.ceil(seconds / 6));
      // Refused for the budget: Retry-After is the wait for the next token (up to 6 s), more than busy's 1 s for most.
      const refused = answers.filter((a) => a.status === 429);
      expect(refused.every((a) => Number(a.retryAfter) >= 1 && Number(a.retryAfter) <= 6)).toBe(true);
      expect(refused.filter((a) => Number(a.retryAfter) > 1).length).toBeGreaterThanOrEqual(ATTACKERS);

      // Afterwards: the attacker's address is still refused, the scraper's checks a wrong password as usual.
      const again = await get(`${s.url}/`, attacker, basic('prometheus', 'wrong-after'));
      expect(again.status).toBe(429);
      expect(Number(again.retryAfter)).toBeGreaterThanOrEqual(1);
      expect((await get(`${s.url}/`, scraper, basic('prometheus', 'wrong-from-scraper'))).status).toBe(401);
      // A cached correct login from the attacker's own address still passes.
      expect((await get(`${s.url}/`, attacker, basic('prometheus', PASSWORD))).status).toBe(200);

      const metrics = await request(`${s.url}/metrics`, { dispatcher: scraper, headers: { authorization: basic('prometheus', PASSWORD) } }).then((r) =>
        r.body.text(),
      );
      const throttled = Number(/^analytics_exporter_http_auth_throttled_total\{reason="budget"\} (\d+)$/m.exec(metrics)?.[1]);
      expect(throttled).toBeGreaterThanOrEqual(refused.filter((a) => Number(a.retryAfter) > 1).length);
      // Logged at most once a minute with a count, never per request, never at error level.
      const refusalLines = capture.lines().filter((line) => String(line.msg).includes('refused with 429'));
      expect(refusalLines.length).toBeGreaterThanOrEqual(1);
      expect(refusalLines.length).toBeLessThanOrEqual(2);
      expect(capture.lines().filter((line) => Number(line.level) >= 50 || line.level === 'error')).toEqual([]);
    },
  );
});
