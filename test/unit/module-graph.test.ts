/**
 * What each program loads: the static imports (those that load at start; `import type` is erased
 * and `import()` loads on demand) of the sources, followed from an entry point.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const SRC = resolve(import.meta.dirname, '../../src');
const SIMULATOR = resolve(import.meta.dirname, '../../packages/simulator');
const SIMULATOR_PACKAGE = '@analytics-exporter/simulator';
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
    expect([...files].map(rel).filter((f) => f.startsWith('..') || f === 'db/embedded.ts')).toEqual([]);
    expect([...packages].filter((p) => p.startsWith('@electric-sql/') || p.startsWith(SIMULATOR_PACKAGE))).toEqual([]);
  });

  it('the CLI loads no HTTP client, database driver, metrics library, YAML parser or pretty-printer at start', () => {
    // --help, bad usage and a configuration error answer in a fifth of a second; commands load
    // these when they run (the YAML parser and pino-pretty only when a file or a terminal needs them).
    const { packages } = closure(join(SRC, 'cli.ts'));
    expect([...packages].filter((p) => ['undici', 'pg', 'prom-client', 'yaml', 'pino-pretty', 'node-pg-migrate', 'cli-progress'].includes(p))).toEqual([]);
  });

  it('no exporter module imports the simulator at start; demo.ts alone loads it, on demand', () => {
    // The package is a development dependency: a production install has no simulator, and the
    // exporter must start without it (STATISTICS_URL set).
    const loads = /\bimport\(\s*['"]@analytics-exporter\/simulator['"]\s*\)/;
    expect(
      sources(SRC)
        .filter((file) => loads.test(readFileSync(file, 'utf8')))
        .map(rel),
    ).toEqual(['demo.ts']);
    for (const file of sources(SRC)) expect(importsOf(file).packages, rel(file)).not.toContain(SIMULATOR_PACKAGE);
  });

  it('the simulator package depends on its own modules and its declared dependencies only, never on the exporter', () => {
    const manifest = JSON.parse(readFileSync(join(SIMULATOR, 'package.json'), 'utf8')) as { dependencies: Record<string, string> };
    const outside = new Set<string>();
    const packages = new Set<string>();
    for (const file of sources(join(SIMULATOR, 'src'))) {
      const found = importsOf(file);
      for (const target of found.files) if (!target.startsWith(join(SIMULATOR, 'src'))) outside.add(relative(SIMULATOR, target));
      for (const name of found.packages) if (!name.startsWith('node:')) packages.add(name);
    }
    expect([...outside]).toEqual([]);
    expect([...packages].sort()).toEqual(Object.keys(manifest.dependencies).filter((name) => name !== 'pino-pretty'));
  });

  it('every source file lies in one layer of .dependency-cruiser.js, so every file is under its rules', async () => {
    // A path in a variable: the config is plain JavaScript outside the TypeScript project.
    const config = '../../.dependency-cruiser.js';
    const { LAYER } = (await import(config)) as { LAYER: Record<string, string> };
    const layers = Object.entries(LAYER).filter(([name]) => name !== 'simulator');
    const files = sources(SRC).map((file) => `src/${rel(file)}`);
    expect(files.length).toBeGreaterThan(100);
    const outside = files.filter((file) => layers.filter(([, pattern]) => new RegExp(pattern).test(file)).length !== 1);
    expect(outside).toEqual([]);
  });
});
