import type { Command } from 'commander';
import { SETTINGS } from '../config.js';

/** camelCased flag (as commander stores it) → the environment variable it overrides. */
const FLAG_TO_ENV = new Map(
  SETTINGS.filter((s) => s.flag !== undefined).map((s) => [s.flag!.slice(2).replace(/-([a-z])/g, (_, c: string) => c.toUpperCase()), s.env]),
);

/**
 * Collects the configuration flags given on the command line (global or the command's own),
 * keyed by the environment variable each overrides, for `loadConfig`.
 */
export function configOverrides(command: Command): Record<string, string> {
  const overrides: Record<string, string> = {};
  for (const [key, value] of Object.entries(command.optsWithGlobals())) {
    const env = FLAG_TO_ENV.get(key);
    if (env !== undefined && typeof value === 'string') overrides[env] = value;
  }
  return overrides;
}
