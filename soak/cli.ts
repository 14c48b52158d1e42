/** The soak's command line, the commit it measures, and reading a `sync` child's log. */
import { execFileSync } from 'node:child_process';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { ROOT } from '../bench/lib/children.js';

export const DEFAULT_MINUTES = 30;
const MAX_MINUTES = 24 * 60;

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

/** `--minutes` and `--out`; exits 2 naming the flag on bad usage, 0 after `--help`. */
export function parseCli(): { minutes: number; out: string } {
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

/** The commit measured, and whether src/, migrations/ or package.json differ from it (then the figures are of uncommitted code). */
export function revision(): string {
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

/** `succeeded` lines of a `sync` child's log, by source: the run of each source that succeeded. */
export function succeededBySource(stderr: string): Map<string, { windows: unknown; records: unknown }> {
  const out = new Map<string, { windows: unknown; records: unknown }>();
  for (const line of stderr.split('\n')) {
    if (!line.includes('"sync run succeeded')) continue;
    try {
      const entry = JSON.parse(line) as { source?: string; windows?: unknown; records?: unknown };
      out.set(entry.source ?? '?', { windows: entry.windows, records: entry.records });
    } catch {
      // Not a JSON line: the check below finds the source missing.
    }
  }
  return out;
}

/**
 * Why a `sync` child exited 1, from its summary lines: each source whose run succeeded but left
 * windows parked or found short ones (the exit status is 1 for those, docs/etl.md), and each whose
 * run failed. `expected` names the sources whose data makes windows parked or short.
 *
 * @returns the explained sources (`name: message`) and the others (a failed run, or parked/short windows of a source whose data makes none).
 */
export function exitOneReasons(stderr: string, expected: ReadonlySet<string>): { explained: string[]; unexplained: string[] } {
  const out = { explained: [] as string[], unexplained: [] as string[] };
  for (const line of stderr.split('\n')) {
    if (!line.includes('"sync run succeeded') && !line.includes('"sync run failed')) continue;
    let entry: { source?: string; msg?: string };
    try {
      entry = JSON.parse(line) as { source?: string; msg?: string };
    } catch {
      continue;
    }
    const msg = entry.msg ?? '';
    if (msg === 'sync run succeeded') continue;
    const text = `${entry.source ?? '?'}: ${msg.split(':')[0]}`;
    (msg.startsWith('sync run succeeded') && expected.has(entry.source ?? '') ? out.explained : out.unexplained).push(text);
  }
  return out;
}
