/**
 * The generator of prometheus/rules/analytics-exporter.rules.yml, and its command line:
 *
 *   npm run rules                                              # writes the committed file (defaults)
 *   npm run rules -- --config overrides.json --out my.rules.yml # another deployment's parameters
 *
 * test/unit/rules.test.ts fails while the committed file differs from {@link renderRules} with
 * the defaults. Runs through tsx (no build step), as the dashboards' generator runs through vitest.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { rulesConfig, DEFAULT_RULES_CONFIG, type RulesConfig } from './config.js';
import { ZodError, prettifyError } from 'zod';
import { renderRules } from './rules.js';

/** prometheus/rules/ of this checkout (absolute). */
export const RULES_DIR = resolve(dirname(fileURLToPath(import.meta.url)), '..', 'rules');
/** The committed rule file (absolute). */
export const RULES_FILE = resolve(RULES_DIR, 'analytics-exporter.rules.yml');

/**
 * Writes the rule file for `config` to `path` (default the committed file).
 *
 * @throws the file system's error when `path` cannot be written.
 */
export function writeRules(config: RulesConfig = DEFAULT_RULES_CONFIG, path: string = RULES_FILE): string {
  writeFileSync(path, renderRules(config));
  return path;
}

/**
 * The JSON of the overrides file at `path`.
 *
 * @throws SyntaxError naming the file when it is not JSON; the file system's error when it cannot be read.
 */
function readOverrides(path: string): unknown {
  const text = readFileSync(path, 'utf8');
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new SyntaxError(`${path} is not JSON: ${(error as Error).message}`);
  }
}

/**
 * `npm run rules [-- --config FILE] [--out FILE]`: reads the overrides (JSON, keys of
 * {@link RulesConfig}) and writes the rule file.
 *
 * @returns the exit status: 0 written; 2 bad usage, or overrides that are not JSON or break a rule
 *   (named on stderr); 1 a file that cannot be read or written.
 */
export function main(args: string[]): number {
  try {
    const { values } = parseArgs({ args, options: { config: { type: 'string' }, out: { type: 'string' } }, strict: true });
    const overrides = values.config === undefined ? {} : readOverrides(values.config);
    const path = writeRules(rulesConfig(overrides), values.out ?? RULES_FILE);
    process.stdout.write(`wrote ${path}\n`);
    return 0;
  } catch (error) {
    const message = error instanceof ZodError ? `bad overrides:\n${prettifyError(error)}` : error instanceof Error ? error.message : String(error);
    process.stderr.write(`npm run rules: ${message}\n`);
    const usage = error instanceof SyntaxError || error instanceof ZodError || (error as { code?: unknown }).code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION';
    return usage ? 2 : 1;
  }
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  process.exitCode = main(process.argv.slice(2));
}
