/** Choosing sources by name, for `sync --source` (pure: no database, no upstream). */
import type { Config, SourceConfig } from '../config.js';
import { InvalidArgumentError } from '../errors.js';

/** In configuration order; every source when `names` is empty or absent. @throws {InvalidArgumentError} naming the first unknown one. */
export function selectSources(config: Pick<Config, 'sources'>, names: readonly string[] | undefined): SourceConfig[] {
  if (names === undefined || names.length === 0) return config.sources;
  const known = new Set(config.sources.map((s) => s.name));
  const unknown = names.find((n) => !known.has(n));
  if (unknown !== undefined) {
    throw new InvalidArgumentError(`--source ${unknown} is not a configured source; configured: ${config.sources.map((s) => s.name).join(', ')}`);
  }
  return config.sources.filter((s) => names.includes(s.name));
}
