/**
 * What `serve` logs of its sync (child processes, real PostgreSQL, the simulator): as JSON, a start
 * line, `sync progress` lines at most every 10 s once a run lasts that long, and the summary, with
 * no line per window at info; on a terminal (tmux's pseudo-terminal), the same readable lines.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { startSimulator, type Simulator } from '@analytics-exporter/simulator';
import { CLI_PATH } from '../helpers/cli.js';
import { useAppPool, useTestDatabase } from '../helpers/db.js';
import { startServe } from '../helpers/serve-child.js';
import { simulatorEnv } from '../helpers/sync.js';
import { until } from '../helpers/wait.js';

const run = promisify(execFile);
const db = useTestDatabase();
const bed = useAppPool(db, 1);
const closers = bed.closers;
const START = '2026-10-02T00:00:00Z';
const END = '2026-11-01T00:00:00Z';
let schemas = 0;

async function sim(options: Parameters<typeof startSimulator>[0] = {}): Promise<Simulator> {
  const s = await startSimulator({ port: 0, records: 600, start: new Date(START), end: new Date(END), ...options });
  closers.push(() => s.close());
  return s;
}

/** serve's environment: its startup sync loads START..now in one-day windows; the yearly schedule never fires. */
function env(s: Simulator, extra: Record<string, string> = {}): Record<string, string> {
  return {
    PATH: process.env.PATH ?? '',
    HOME: process.env.HOME ?? '',
    ...simulatorEnv(s),
    DATABASE_URL: db.url,
    DATABASE_SCHEMA: `serve_log_${++schemas}`,
    SYNC_START_DATE: START,
    SYNC_WINDOW: '1d',
    METRICS_LISTEN: '127.0.0.1:0',
    SYNC_SCHEDULE: '0 0 1 1 *',
    AUDIT_SCHEDULE: 'off',
    ...extra,
  };
}

describe("serve's sync log", () => {
  it('as JSON: a start line, progress lines every 10 s or more, the summary; windows only at debug', async () => {
    // 250 ms an E6 request, one at a time: the run lasts well over 10 s.
    const s = await sim({ faults: { latencyMs: 250 } });
    const server = startServe(env(s, { LOG_FORMAT: 'json', SYNC_CONCURRENCY: '1' }), { closers });
    await until('the sync summary', async () => (server.output().includes('"msg":"sync run succeeded"') ? true : undefined), 120_000, 100);
    server.child.kill('SIGTERM');
    expect(await server.exited).toBe(0);

    const lines = server
      .output()
      .split('\n')
      .filter((l) => l !== '')
      .map((l) => JSON.parse(l) as { level: string; msg: string; time: string; [k: string]: unknown });
    const sync = lines.filter((l) => /^sync |^window /.test(l.msg));
    expect(sync[0]).toMatchObject({ level: 'info', msg: 'sync run started', source: 'default' });
    const summary = sync.at(-1)!;
    expect(summary).toMatchObject({ level: 'info', msg: 'sync run succeeded' });
    expect(summary.durationMs as number).toBeGreaterThan(10_000);
    expect(lines.filter((l) => l.msg === 'window committed')).toEqual([]);
    const progress = sync.filter((l) => l.msg === 'sync progress');
    expect(progress.length).toBeGreaterThanOrEqual(1);
    expect(sync.slice(1, -1).every((l) => l.msg === 'sync progress')).toBe(true);
    for (const [i, line] of progress.entries()) {
      expect(line).toMatchObject({ level: 'info', source: 'default', windowsPlanned: summary.windowsPlanned });
      expect(line.windows as number).toBeLessThan(summary.windowsPlanned as number);
      expect(line.etaSeconds as number).toBeGreaterThan(0);
      const since = i === 0 ? sync[0]!.time : progress[i - 1]!.time;
      expect(Date.parse(line.time) - Date.parse(since)).toBeGreaterThanOrEqual(10_000);
    }
  }, 150_000);

  it('on a terminal: readable start and summary lines, no line per window', async () => {
    const s = await sim();
    const dir = mkdtempSync(join(tmpdir(), 'serve-log-'));
    const tmux = (...args: string[]) => run('tmux', ['-S', join(dir, 'socket'), ...args]);
    closers.push(async () => {
      await tmux('kill-server').catch(() => undefined);
      rmSync(dir, { recursive: true, force: true });
    });
    const quote = (v: string) => `'${v.replaceAll("'", `'\\''`)}'`;
    const vars = Object.entries(env(s)).map(([k, v]) => `${k}=${quote(v)}`);
    await tmux('new-session', '-d', '-x', '160', '-y', '50', `env -i ${vars.join(' ')} ${quote(process.execPath)} ${quote(CLI_PATH)} serve; exec sleep 120`);
    const screen = await until(
      'the sync summary on the terminal',
      async () => {
        const { stdout } = await tmux('capture-pane', '-p', '-J', '-S', '-');
        return stdout.includes('sync run succeeded') ? stdout.split('\n') : undefined;
      },
      60_000,
      100,
    );
    await tmux('send-keys', 'C-c');
    expect(screen.some((l) => / INFO: sync run started /.test(l))).toBe(true);
    expect(screen.some((l) => / INFO: sync run succeeded /.test(l))).toBe(true);
    expect(screen.filter((l) => l.includes('window committed'))).toEqual([]);
    expect(screen.some((l) => l.startsWith('{'))).toBe(false);
  }, 90_000);
});
