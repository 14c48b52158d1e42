/**
 * What a reload of CONFIG_FILE changes (pure: no file, no client, no clock). `serve` reads the file
 * again on SIGHUP and on `POST /-/reload` (src/serve/lifecycle.ts) and applies the difference
 * {@link diffSources} finds: a source added gets its client, schedules and scrape cache; a source
 * removed loses them and its series; a source changed is replaced as a whole (its running sync
 * aborted, the open window rolled back); an unchanged source keeps every object it had.
 */
import type { SourceConfig } from '../config.js';

/** One source whose settings differ between the configuration in use and the one read. */
interface SourceChange {
  before: SourceConfig;
  after: SourceConfig;
  /**
   * The settings that differ, as paths into {@link SourceConfig} (`sync.windowMs`,
   * `upstream.statisticsUrl`, `labels.environment`), sorted. Names only: never a value, so a
   * changed secret shows as `upstream.clientSecret` and nothing more.
   */
  keys: string[];
}

/** The difference between two lists of sources, matched by name. */
export interface SourcesDiff {
  /** Sources only in the new list, in its order. */
  added: SourceConfig[];
  /** Sources only in the old list, in its order. */
  removed: SourceConfig[];
  /** Sources in both whose settings differ, in the new list's order. */
  changed: SourceChange[];
  /** Sources in both with the same settings, as the OLD list holds them (the objects in use stay), in the new list's order. */
  unchanged: SourceConfig[];
  /**
   * The new list of sources in its order, with each unchanged source's old object: what serve
   * uses from now on.
   */
  sources: SourceConfig[];
}

/** True when nothing is added, removed or changed (the order of the sources aside). */
export function isEmptyDiff(diff: SourcesDiff): boolean {
  return diff.added.length === 0 && diff.removed.length === 0 && diff.changed.length === 0;
}

/**
 * Compares the sources in use with those a reload read, by name.
 *
 * Two sources are the same when every setting that decides what they do is equal: URLs compared
 * as text, a file a setting names by its path (its content is read at use, so a changed secret
 * file applies without a reload), `startDate` by its instant or span. What only words messages
 * is ignored: the line and key path a setting was read from (adding a source above another moves
 * it in the file, and does not change it), `upstream.clientSecretVariable`.
 *
 * @param before the sources in use, names unique.
 * @param after the sources read, names unique.
 * @returns the difference; never throws.
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

/** A source's settings as `path → comparable text`; a SettingFile stands for its path. */
function flatten(source: SourceConfig): Map<string, string> {
  const out = new Map<string, string>();
  const walk = (value: unknown, path: string): void => {
    if (MESSAGE_ONLY.has(path)) return;
    if (value === undefined) return;
    if (value instanceof URL) out.set(path, value.href);
    else if (value instanceof Date) out.set(path, value.toISOString());
    else if (Array.isArray(value)) out.set(path, JSON.stringify(value));
    else if (value !== null && typeof value === 'object') {
      // A file a setting names: its path decides; where it was written only words messages.
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
