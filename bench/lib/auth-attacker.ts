/**
 * `tsx bench/lib/auth-attacker.ts URL ATTACKERS SECONDS LOCAL_ADDRESS`: wrong-password attackers
 * for bench/suites/hostile-auth.ts, in a process of their own so that their client work does not
 * weigh on the scraper measured beside them. Each attacker sends the next GET with a random
 * password as soon as the last is answered. Prints `attacking` on stderr when it starts, and the
 * answers by status as one JSON line on stdout when it ends (`429 budget` / `429 busy` by body).
 */
import { randomBytes } from 'node:crypto';
import { Agent, request } from 'undici';

const [url, attackers, seconds, localAddress] = process.argv.slice(2);
const agent = new Agent({ localAddress: localAddress!, connections: Number(attackers) });
const statuses: Record<string, number> = {};
const end = performance.now() + Number(seconds) * 1000;
process.stderr.write('attacking\n');
await Promise.all(
  Array.from({ length: Number(attackers) }, async () => {
    while (performance.now() < end) {
      const authorization = `Basic ${Buffer.from(`prometheus:${randomBytes(12).toString('base64')}`).toString('base64')}`;
      let key: string;
      try {
        const res = await request(url!, { dispatcher: agent, headers: { authorization } });
        const body = await res.body.text();
        key = res.statusCode === 429 ? (body.includes('failed logins') ? '429 budget' : '429 busy') : String(res.statusCode);
      } catch {
        key = 'error';
      }
      statuses[key] = (statuses[key] ?? 0) + 1;
    }
  }),
);
await agent.close();
process.stdout.write(`${JSON.stringify(statuses)}\n`);
