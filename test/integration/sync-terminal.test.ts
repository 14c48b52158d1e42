/**
 * `sync` on a real terminal: tmux gives the child a pseudo-terminal of 100 × 30, and the screen
 * it leaves (scrollback included, wrapped lines joined) is what an operator would read.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import type { FaultRequest } from '@analytics-exporter/simulator';
import { CLI_PATH } from '../helpers/cli.js';
import { SYNC_END, SYNC_START, useSyncCli, type SyncCliHarness } from '../helpers/sync-cli.js';
import { until } from '../helpers/wait.js';

const run = promisify(execFile);
const h = useSyncCli();

/** One-day windows over the 30 days of SYNC_START–SYNC_END. */
const WINDOWS = 30;
const RECORDS = 3000;
const SUMMARY = /^sync succeeded: (\d+)\/(\d+) windows, ([\d,]+) records, ([\d,]+) quarantined in \d+\.\d s \([\d,]+ records\/s\)$/;
/** The progress bar's own text (src/commands/progress.ts). */
const BAR = /\| windows \d+\/\d+ \|/;

const quote = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`;

/**
 * Runs `sync` over SYNC_START–SYNC_END in a detached tmux session of 100 × 30 with exactly `env`
 * (plus PATH), then the shell's `exit=<status>`; returns the whole screen once that line shows.
 * With `interruptWhenBarShows`, Ctrl-C is typed as soon as the progress bar is on the screen.
 * tmux is required: `npm test` installs it (scripts/ensure-test-tools.sh).
 */
async function syncOnTerminal(harness: SyncCliHarness, env: Record<string, string>, options: { interruptWhenBarShows?: boolean } = {}): Promise<string[]> {
  const dir = mkdtempSync(join(tmpdir(), 'sync-terminal-'));
  const tmux = (...args: string[]) => run('tmux', ['-S', join(dir, 'socket'), ...args]);
  harness.defer(async () => {
    await tmux('kill-server').catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  });
  const vars = Object.entries({ PATH: process.env.PATH ?? '', ...env }).map(([k, v]) => `${k}=${quote(v)}`);
  const command = `env -i ${vars.join(' ')} ${quote(process.execPath)} ${quote(CLI_PATH)} sync --from ${SYNC_START} --to ${SYNC_END}; echo exit=$?; exec sleep 120`;
  await tmux('new-session', '-d', '-x', '100', '-y', '30', command);
  if (options.interruptWhenBarShows) {
    await until('the progress bar', async () => (BAR.test((await tmux('capture-pane', '-p')).stdout) ? true : undefined), 30_000, 20);
    // As a person's Ctrl-C: the terminal sends SIGINT to the foreground group and echoes ^C.
    await tmux('send-keys', 'C-c');
  }
  return until(
    'sync to exit on the terminal',
    async () => {
      // -J joins lines the terminal wrapped; -S - starts at the top of the scrollback.
      const { stdout } = await tmux('capture-pane', '-p', '-J', '-S', '-');
      const lines = stdout.split('\n').map((l) => l.trimEnd());
      // Anywhere on a line: a cursor left mid-screen puts it inside an earlier line.
      return lines.some((l) => l.includes('exit=')) ? lines.filter((l) => l !== '') : undefined;
    },
    60_000,
    100,
  );
}

/**
 * From the second day on: the first requests (and the bar's first draws) come before any fault.
 * Not the run's request for the API's time (one instant, startDate = toDate), which reads no page.
 */
const afterFirstDay = (r: FaultRequest) =>
  (r.url.searchParams.get('startDate') ?? '') >= '2026-10-03T00:00:00Z' && r.url.searchParams.get('startDate') !== r.url.searchParams.get('toDate');

async function countRows(schema: string, table: string): Promise<number> {
  const { rows } = await h.pool.query<{ n: number }>(`select count(*)::int as n from ${schema}.${table}`);
  return rows[0]!.n;
}

/** The summary line, checked against the database, and that the shell's prompt line comes right after it. */
async function expectSummary(screen: string[], schema: string): Promise<void> {
  const at = screen.findIndex((l) => SUMMARY.test(l));
  expect(at, `a summary line in:\n${screen.join('\n')}`).toBeGreaterThanOrEqual(0);
  const [, committed, planned, records, quarantined] = SUMMARY.exec(screen[at]!)!;
  expect(Number(committed)).toBe(WINDOWS);
  expect(Number(planned)).toBe(WINDOWS);
  expect(Number(records!.replaceAll(',', ''))).toBe(await countRows(schema, 'records'));
  expect(Number(quarantined!.replaceAll(',', ''))).toBe(await countRows(schema, 'records_quarantine'));
  // The cursor was left at the start of the line under the summary: the shell wrote there, last.
  expect(screen.slice(at + 1)).toEqual(['exit=0']);
}

describe('sync on a terminal (tmux, real PostgreSQL)', () => {
  it('pretty logs by default: warnings above the bar, no line per window, the bar cleared, the summary under them', async () => {
    const s = await h.sim({ records: RECORDS, faults: { latencyMs: 5 } });
    // Log lines while the bar is shown: a retry (E6 answering 503 once) and a quarantined record.
    s.queueFault({ status: 503 }, 1, 'analytics', afterFirstDay);
    s.queueFault('nul-in-record', 1, 'analytics', afterFirstDay);
    const schema = h.schema();
    const screen = await syncOnTerminal(h, h.env(s, schema, { SYNC_WINDOW: '1d', SYNC_PAGE_SIZE: '100' }));

    expect(
      screen.filter((l) => l.startsWith('{')),
      'JSON on a terminal by default',
    ).toEqual([]);
    expect(
      screen.filter((l) => BAR.test(l)),
      'the bar, cleared at the end',
    ).toEqual([]);
    expect(screen.some((l) => / WARN: upstream request failed; retrying .*"endpoint":"analytics"/.test(l))).toBe(true);
    expect(screen.some((l) => / WARN: E6 returned records PostgreSQL cannot store/.test(l))).toBe(true);
    expect(
      screen.filter((l) => l.includes('window committed')),
      'per-window lines are debug under the bar',
    ).toEqual([]);
    expect(screen.some((l) => / INFO: sync run started /.test(l))).toBe(true);
    await expectSummary(screen, schema);
    expect(await countRows(schema, 'records_quarantine')).toBe(1);
  }, 90_000);

  it('LOG_FORMAT=json at debug: every JSON line above the bar whole, one per window, then the summary', async () => {
    const s = await h.sim({ records: RECORDS, faults: { latencyMs: 5 } });
    const schema = h.schema();
    const screen = await syncOnTerminal(h, h.env(s, schema, { SYNC_WINDOW: '1d', SYNC_PAGE_SIZE: '100', LOG_FORMAT: 'json', LOG_LEVEL: 'debug' }));

    const json = screen.filter((l) => l.startsWith('{'));
    const parsed = json.map((l) => {
      try {
        return JSON.parse(l) as { msg?: unknown; level?: unknown };
      } catch {
        throw new Error(`a cut JSON line on the terminal: ${l}`);
      }
    });
    expect(parsed.filter((l) => l.msg === 'window committed')).toHaveLength(WINDOWS);
    expect(parsed.every((l) => typeof l.level === 'string')).toBe(true);
    // Nothing else printed but the JSON lines, the summary and the shell's line.
    expect(screen.filter((l) => !l.startsWith('{'))).toEqual([expect.stringMatching(SUMMARY), 'exit=0']);
    expect(screen.filter((l) => BAR.test(l))).toEqual([]);
    await expectSummary(screen, schema);
  }, 90_000);

  it('Ctrl-C under the bar: the bar and the echoed ^C leave no trace, the interrupted summary follows the log lines, exit 0', async () => {
    // 50 ms a request: the run lasts seconds, so the signal lands while windows load.
    const s = await h.sim({ records: RECORDS, faults: { latencyMs: 50 } });
    const schema = h.schema();
    const screen = await syncOnTerminal(h, h.env(s, schema, { SYNC_WINDOW: '1d', SYNC_PAGE_SIZE: '100' }), { interruptWhenBarShows: true });

    expect(
      screen.filter((l) => l.includes('sync [') || BAR.test(l)),
      `no bar left on the screen:\n${screen.join('\n')}`,
    ).toEqual([]);
    expect(screen.some((l) => / WARN: stopping: rolling back the current window/.test(l))).toBe(true);
    const at = screen.findIndex((l) => l.startsWith('sync interrupted: '));
    expect(at, `an interrupted summary in:\n${screen.join('\n')}`).toBeGreaterThanOrEqual(0);
    const committed = Number(/^sync interrupted: (\d+)\/30 windows/.exec(screen[at]!)?.[1]);
    expect(committed).toBeLessThan(WINDOWS);
    expect(await countRows(schema, 'records')).toBeLessThan(RECORDS);
    expect(screen.slice(at + 1)).toEqual(['exit=0']);
  }, 90_000);
});
