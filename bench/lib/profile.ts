/**
 * Reads a V8 CPU profile (`node --cpu-prof`, a .cpuprofile file) and sums self time per
 * function, so a report can name where a process spent its CPU.
 */
import { readFileSync } from 'node:fs';
import { relative } from 'node:path';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}

interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

export interface HotFunction {
  /** `name (file:line)`, paths relative to the project. */
  name: string;
  selfMs: number;
  /** Share of all samples, 0..1. */
  share: number;
}

export interface ProfileSummary {
  totalMs: number;
  /** Time in `(idle)`: the process waiting for I/O. */
  idleMs: number;
  /** Time in `(garbage collector)`. */
  gcMs: number;
  top: HotFunction[];
}

function label(node: ProfileNode, root: string): string {
  const { functionName, url, lineNumber } = node.callFrame;
  const name = functionName || '(anonymous)';
  if (!url) return name;
  const file = url.startsWith('file://') ? relative(root, new URL(url).pathname) : url;
  return `${name} (${file}:${lineNumber + 1})`;
}

/** Self time per function of a .cpuprofile, largest first. */
export function summarizeProfile(file: string, root: string, limit = Number(process.env.BENCH_PROFILE_TOP ?? 12)): ProfileSummary {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const self = new Map<string, number>();
  let totalUs = 0;
  for (let i = 0; i < profile.samples.length; i++) {
    const node = byId.get(profile.samples[i]!);
    const delta = profile.timeDeltas[i] ?? 0;
    if (node === undefined || delta < 0) continue;
    totalUs += delta;
    const key = label(node, root);
    self.set(key, (self.get(key) ?? 0) + delta);
  }
  const ms = (us: number) => us / 1000;
  const top = [...self.entries()]
    .filter(([name]) => name !== '(idle)' && name !== '(program)')
    .sort((a, b) => b[1] - a[1])
    .slice(0, limit)
    .map(([name, us]) => ({ name, selfMs: ms(us), share: totalUs > 0 ? us / totalUs : 0 }));
  return { totalMs: ms(totalUs), idleMs: ms(self.get('(idle)') ?? 0), gcMs: ms(self.get('(garbage collector)') ?? 0), top };
}
