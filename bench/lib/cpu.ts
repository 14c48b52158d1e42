/**
 * CPU time of processes, read from /proc (Linux), so a report can say where the machine's two
 * cores went: the sync, the simulator, PostgreSQL. Outside Linux every reading is undefined.
 */
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

let ticksPerSecond: number | undefined;

function clockTicks(): number {
  if (ticksPerSecond === undefined) {
    try {
      ticksPerSecond = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
    } catch {
      ticksPerSecond = 100;
    }
  }
  return ticksPerSecond;
}

/** The fields of one /proc/<pid>/stat line that the bench reads. */
export interface ProcStat {
  ppid: number;
  /** utime + stime of the process itself, in clock ticks. */
  own: number;
  /** cutime + cstime: children it has waited for, in clock ticks. */
  reaped: number;
}

/**
 * Parses the text of /proc/<pid>/stat (proc(5)). The command name (field 2) may hold spaces and
 * parentheses, so the fields are split after its last closing parenthesis.
 *
 * @throws RangeError when the text is not such a line.
 */
export function parseProcStat(text: string): ProcStat {
  const close = text.lastIndexOf(')');
  // fields[0] is field 3 (state): ppid is field 4, utime..cstime are fields 14..17.
  const fields =
    close < 0
      ? []
      : text
          .slice(close + 2)
          .trim()
          .split(' ');
  const n = (field: number) => Number(fields[field - 3]);
  const stat = { ppid: n(4), own: n(14) + n(15), reaped: n(16) + n(17) };
  if (!Number.isInteger(stat.ppid) || !Number.isInteger(stat.own) || !Number.isInteger(stat.reaped))
    throw new RangeError(`not a /proc/<pid>/stat line: ${text.slice(0, 80)}`);
  return stat;
}

function procStat(pid: number): ProcStat | undefined {
  try {
    return parseProcStat(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return undefined;
  }
}

/** CPU seconds (user + system) a process has used so far, or undefined when it cannot be read. */
export function processCpuSeconds(pid: number | undefined): number | undefined {
  if (pid === undefined) return undefined;
  const stat = procStat(pid);
  return stat === undefined ? undefined : stat.own / clockTicks();
}

/**
 * CPU seconds used so far by a PostgreSQL server: the postmaster, its live children (backends,
 * checkpointer, WAL writer, autovacuum launcher and workers, parallel workers; zombies included)
 * and the children it has reaped (backends of closed connections). Differences of two readings
 * give the server's CPU over an interval. A child reaped while /proc is scanned would be counted
 * in neither part, so the scan is repeated until the postmaster's reaped time stays the same.
 *
 * @param dataDir the cluster's data directory (postmaster.pid is read from it).
 */
export function postgresCpuSeconds(dataDir: string | null): number | undefined {
  if (dataDir === null) return undefined;
  let postmaster: number;
  try {
    postmaster = Number(readFileSync(join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
  } catch {
    return undefined;
  }
  for (let attempt = 0; attempt < 5; attempt++) {
    const before = procStat(postmaster);
    if (before === undefined) return undefined;
    let children = 0;
    for (const entry of readdirSync('/proc')) {
      if (!/^\d+$/.test(entry)) continue;
      const stat = procStat(Number(entry));
      if (stat !== undefined && stat.ppid === postmaster) children += stat.own;
    }
    const after = procStat(postmaster);
    if (after === undefined) return undefined;
    if (after.reaped === before.reaped) return (after.own + after.reaped + children) / clockTicks();
  }
  return undefined;
}

/** Cumulative CPU time of the whole machine from /proc/stat: all states, and `steal` (taken by the hypervisor). */
export interface MachineTicks {
  total: number;
  steal: number;
}

export function machineTicks(): MachineTicks | undefined {
  try {
    const fields = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
    // user nice system idle iowait irq softirq steal guest guest_nice; guest time is inside user.
    const total = fields.slice(0, 8).reduce((a, b) => a + b, 0);
    return { total, steal: fields[7] ?? 0 };
  } catch {
    return undefined;
  }
}

/** Share (0..1) of the machine's CPU time between two readings that the hypervisor gave to other guests. */
export function stealShare(before: MachineTicks | undefined, after: MachineTicks | undefined): number | undefined {
  if (before === undefined || after === undefined || after.total <= before.total) return undefined;
  return (after.steal - before.steal) / (after.total - before.total);
}
