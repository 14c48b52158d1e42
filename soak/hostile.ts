/**
 * The soak's hostile client, from 127.0.0.2 (another loopback address than the scraper's): per
 * replica, 2,000 slowloris connections (bench/lib/slowloris-child.ts: request heads a byte at a
 * time, reopened when serve closes them) and a flood of wrong passwords (bench/lib/auth-attacker.ts:
 * each attacker sends the next request as soon as the last is answered). Child processes, so
 * their sockets do not slow the harness's scrapes.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { ROOT } from '../bench/lib/children.js';

export const HOSTILE_ADDRESS = '127.0.0.2';
export const SLOWLORIS_CONNECTIONS = 2_000;
export const PASSWORD_ATTACKERS = 50;

/** What the hostile client saw, by replica URL. */
export interface HostileTally {
  /** slowloris-child's final counts, or its error. */
  slowloris: Record<string, unknown>;
  /** auth-attacker's answers by status, or its error. */
  passwords: Record<string, unknown>;
}

function lastJsonLine(text: string): Record<string, unknown> {
  const line = text.trim().split('\n').pop() ?? '';
  try {
    return JSON.parse(line) as Record<string, unknown>;
  } catch {
    return { error: `no JSON line: ${text.slice(-300)}` };
  }
}

/** A child and its output, collected. */
function run(args: string[]): { child: ChildProcess; done: Promise<{ code: number | null; stdout: string; stderr: string }> } {
  const child = spawn(process.execPath, ['--import', 'tsx', ...args], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  const kill = () => child.kill('SIGKILL');
  process.on('exit', kill);
  const done = new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) =>
    child.once('close', (code) => {
      process.off('exit', kill);
      resolve({ code, stdout, stderr });
    }),
  );
  return { child, done };
}

/**
 * Starts the attack on every URL in `urls` for `seconds`.
 *
 * @returns `stop`, which ends the slowloris children (the password floods end on their own after
 *   `seconds`) and resolves with what each saw.
 */
export function startHostile(urls: readonly string[], seconds: number): { stop(): Promise<HostileTally> } {
  const slowScript = fileURLToPath(new URL('../bench/lib/slowloris-child.ts', import.meta.url));
  const authScript = fileURLToPath(new URL('../bench/lib/auth-attacker.ts', import.meta.url));
  const slow = urls.map((url) => {
    const { hostname, port } = new URL(url);
    const options = {
      host: hostname,
      port: Number(port),
      localAddress: HOSTILE_ADDRESS,
      connections: SLOWLORIS_CONNECTIONS,
      mode: 'http',
      reconnectDelayMs: 1000,
    };
    return { url, ...run([slowScript, JSON.stringify(options)]) };
  });
  const auth = urls.map((url) => ({ url, ...run([authScript, `${url}/metrics`, String(PASSWORD_ATTACKERS), String(Math.round(seconds)), HOSTILE_ADDRESS]) }));
  return {
    stop: async () => {
      const tally: HostileTally = { slowloris: {}, passwords: {} };
      for (const s of slow) s.child.kill('SIGTERM');
      for (const s of slow) {
        const out = await s.done;
        tally.slowloris[s.url] = out.code === 0 ? lastJsonLine(out.stdout) : { error: `exit ${out.code}: ${out.stderr.slice(-300)}` };
      }
      for (const a of auth) {
        const out = await Promise.race([a.done, new Promise<undefined>((r) => setTimeout(() => r(undefined), 30_000))]);
        if (out === undefined) a.child.kill('SIGKILL');
        tally.passwords[a.url] =
          out === undefined
            ? { error: 'did not end 30 s after its time' }
            : out.code === 0
              ? lastJsonLine(out.stdout)
              : { error: `exit ${out.code}: ${out.stderr.slice(-300)}` };
      }
      return tally;
    },
  };
}
