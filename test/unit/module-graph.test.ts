/**
 * What each program loads: the static imports (those that load at start; `import type` is erased
 * and `import()` loads on demand) of the sources, followed from an entry point.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const SRC = resolve(import.meta.dirname, '../../src');
const STATIC_IMPORT = /^\s*(?:import|export)\s+(?!type\b)(?:[^'";]*?\sfrom\s+)?['"]([^'"]+)['"]/gm;

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? sources(join(dir, entry.name)) : entry.name.endsWith('.ts') ? [join(dir, entry.name)] : [],
  );
}

/** The static imports of one file: source files (absolute) and packages (bare names). */
function importsOf(file: string): { files: string[]; packages: string[] } {
  const files: string[] = [];
  const packages: string[] = [];
  for (const match of readFileSync(file, 'utf8').matchAll(STATIC_IMPORT)) {
    const target = match[1]!;
    if (target.startsWith('.')) files.push(resolve(dirname(file), target.replace(/\.js$/, '.ts')));
    else packages.push(target);
  }
  return { files, packages };
}

/** Every source file and package loaded at start from `entry`. */
function closure(entry: string): { files: Set<string>; packages: Set<string> } {
  const files = new Set<string>();
  const packages = new Set<string>();
  const queue = [entry];
  while (queue.length > 0) {
    const file = queue.pop()!;
    if (files.has(file)) continue;
    files.add(file);
    const found = importsOf(file);
    for (const name of found.packages) packages.add(name);
    queue.push(...found.files);
  }
  return { files, packages };
}

const rel = (file: string) => relative(SRC, file);

describe('module graph', () => {
  it('reads the imports it follows', () => {
    // Guards the pattern itself: the CLI's own imports must be found.
    const cli = importsOf(join(SRC, 'cli.ts'));
    expect(cli.files.map(rel)).toContain('commands/serve.ts');
    expect(cli.packages).toContain('commander');
  });

  it('the CLI loads neither the simulator nor the embedded database at start', () => {
    const { files, packages } = closure(join(SRC, 'cli.ts'));
    // The walk reached the commands and what they load at start.
    expect([...files].map(rel)).toEqual(expect.arrayContaining(['commands/sync.ts', 'commands/serve.ts', 'config.ts', 'log.ts']));
    expect([...files].map(rel).filter((f) => f.startsWith('simulator/') || f === 'db/embedded.ts')).toEqual([]);
    expect([...packages].filter((p) => p.startsWith('@electric-sql/'))).toEqual([]);
  });

  it('the CLI loads no HTTP client, database driver, metrics library, YAML parser or pretty-printer at start', () => {
    // --help, bad usage and a configuration error answer in a fifth of a second; commands load
    // these when they run (the YAML parser and pino-pretty only when a file or a terminal needs them).
    const { packages } = closure(join(SRC, 'cli.ts'));
    expect([...packages].filter((p) => ['undici', 'pg', 'prom-client', 'yaml', 'pino-pretty', 'node-pg-migrate', 'cli-progress'].includes(p))).toEqual([]);
  });

  it('the simulator depends on shared leaf modules only, never on the exporter', () => {
    const outside = new Set<string>();
    for (const file of sources(join(SRC, 'simulator'))) {
      for (const target of importsOf(file).files) if (!rel(target).startsWith('simulator/')) outside.add(rel(target));
    }
    // demo.ts: the demo's dataset bounds, which `simulate` serves by default.
    expect([...outside].sort()).toEqual(['commands/exit.ts', 'commands/shutdown.ts', 'config.ts', 'demo.ts', 'errors.ts', 'log.ts', 'time.ts']);
  });
});
