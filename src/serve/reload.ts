/**
 * What a reload of CONFIG_FILE changes, as a pure difference of two lists of sources (no file, no
 * client, no clock); sources.ts applies it. See docs/design/serve-lifecycle.md, Reloads.
 */
import type { SourceConfig } from '../config.js';

/** One source whose settings differ between the configuration in use and the one read. */
interface SourceChange {
  before: SourceConfig;
  after: SourceConfig;
  /** Paths into {@link SourceConfig} (`sync.windowMs`), sorted; names only, never a value. */
  keys: string[];
}

/** The difference between two lists of sources, matched by name; each list in the new list's order but `removed`. */
export interface SourcesDiff {
  added: SourceConfig[];
  removed: SourceConfig[];
  changed: SourceChange[];
  /** The OLD list's objects: those in use stay. */
  unchanged: SourceConfig[];
  /** The new list, with each unchanged source's old object: what serve uses from now on. */
  sources: SourceConfig[];
}

/** True when nothing is added, removed or changed (the order of the sources aside). */
export function isEmptyDiff(diff: SourcesDiff): boolean {
  return diff.added.length === 0 && diff.removed.length === 0 && diff.changed.length === 0;
}

/**
 * Compares the sources in use (`before`) with those a reload read (`after`), by name, names unique
 * in each. A file a setting names compares by its path; where a setting was written is ignored.
 * Never throws.
 */
export function diffSources(before: readonly SourceConfig[], after: readonly SourceConfig[]): SourcesDiff {
  const old = new Map(before.map((source) => [source.name, source]));
  const names = new Set(after.map((source) => source.name));
  const diff: SourcesDiff = { added: [], removed: before.filter((source) => !names.has(source.name)), changed: [], unchanged: [], sources: [] };
  for (const source of after) {
    const previous = old.get(source.name);
    if (previous === undefined) {
      diff.added.push(source);
      diff.sources.push(source);
      continue;
    }
    const keys = changedKeys(previous, source);
    if (keys.length === 0) {
      diff.unchanged.push(previous);
      diff.sources.push(previous);
    } else {
      diff.changed.push({ before: previous, after: source, keys });
      diff.sources.push(source);
    }
  }
  return diff;
}

/** The setting paths whose values differ between two sources, sorted. */
export function changedKeys(a: SourceConfig, b: SourceConfig): string[] {
  const left = flatten(a);
  const right = flatten(b);
  const keys = new Set([...left.keys(), ...right.keys()]);
  return [...keys].filter((key) => left.get(key) !== right.get(key)).sort();
}

/** Fields that only word messages, never what a source does. */
const MESSAGE_ONLY = new Set(['upstream.clientSecretVariable']);

/** A source's settings as `path → comparable text`. */
function flatten(source: SourceConfig): Map<string, string> {
  const out = new Map<string, string>();
  const walk = (value: unknown, path: string): void => {
    if (MESSAGE_ONLY.has(path)) return;
    if (value === undefined) return;
    if (value instanceof URL) out.set(path, value.href);
    else if (value instanceof Date) out.set(path, value.toISOString());
    else if (Array.isArray(value)) out.set(path, JSON.stringify(value));
    else if (value !== null && typeof value === 'object') {
      // A SettingFile: its path decides; where it was written only words messages.
      if ('file' in value && 'variable' in value && typeof value.file === 'string') {
        out.set(path, value.file);
        return;
      }
      for (const [key, inner] of Object.entries(value)) walk(inner, path === '' ? key : `${path}.${key}`);
    } else out.set(path, JSON.stringify(value));
  };
  const { name: _name, ...settings } = source;
  walk(settings, '');
  return out;
}
