// Preloaded into a measured child (`node --import <this file> …`): when the process exits, writes
// its peak resident set size and CPU time to the file named by BENCH_EXIT_STATS_FILE. VmHWM in
// /proc/self/status is the kernel's high-water mark of the resident set (Linux); elsewhere
// getrusage's maxRSS.
import { readFileSync, writeFileSync } from 'node:fs';

const target = process.env.BENCH_EXIT_STATS_FILE;
if (target) {
  process.on('exit', () => {
    let bytes;
    try {
      const match = /^VmHWM:\s+(\d+)\s+kB$/m.exec(readFileSync('/proc/self/status', 'utf8'));
      if (match) bytes = Number(match[1]) * 1024;
    } catch {
      // Not Linux: fall back below.
    }
    bytes ??= process.resourceUsage().maxRSS * 1024;
    const usage = process.resourceUsage();
    writeFileSync(target, JSON.stringify({ peakRssBytes: bytes, cpuSeconds: (usage.userCPUTime + usage.systemCPUTime) / 1e6 }));
  });
}
