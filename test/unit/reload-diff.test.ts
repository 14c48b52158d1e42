/**
 * The difference a reload of CONFIG_FILE applies (src/serve/reload.ts): sources matched by name,
 * a source moved in the file or given the same settings again unchanged (its objects kept), a
 * changed setting named by its path and never by its value.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig, type SourceConfig } from '../../src/config.js';
import { changedKeys, diffSources, isEmptyDiff } from '../../src/serve/reload.js';
import { sourceEntry } from '../helpers/source-entry.js';

const dir = mkdtempSync(join(tmpdir(), 'ae-reload-diff-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

let files = 0;
const SECRET = 'reload-secret-value-7';

/** A valid source entry with the file's SECRET, as {@link sourceEntry}. */
const entry = (name: string, extra: string[] = []): string => sourceEntry(name, SECRET, extra);

/** The sources loadConfig reads from a file holding `entries`. */
function sources(...entries: string[]): SourceConfig[] {
  const file = join(dir, `sources-${++files}.yaml`);
  writeFileSync(file, `sources:\n${entries.join('\n')}\n`);
  return loadConfig({ CONFIG_FILE: file }).sources;
}

describe('diffSources', () => {
  it('the same file read twice: nothing added, removed or changed, and the objects in use kept', () => {
    const before = sources(entry('a', ['labels: {environment: production}', 'sync: {window: 1d, schedule: "*/5 * * * *"}']), entry('b'));
    const after = sources(entry('a', ['labels: {environment: production}', 'sync: {window: 1d, schedule: "*/5 * * * *"}']), entry('b'));
    const diff = diffSources(before, after);
    expect(isEmptyDiff(diff)).toBe(true);
    expect(diff.unchanged).toEqual(before);
    expect(diff.sources[0]).toBe(before[0]);
    expect(diff.sources[1]).toBe(before[1]);
  });

  it('a source added above another: the one moved in the file (other lines, other key paths) is unchanged', () => {
    const before = sources(entry('b', ['client_secret_file: ./secret-b']).replace(`    client_secret: ${SECRET}\n`, ''));
    const after = sources(entry('a'), entry('b', ['client_secret_file: ./secret-b']).replace(`    client_secret: ${SECRET}\n`, ''));
    // Messages about b now name another line and sources[1]: not a change of what b does.
    expect(after[1]!.upstream!.clientSecretFile!.at).not.toBe(before[0]!.upstream!.clientSecretFile!.at);
    const diff = diffSources(before, after);
    expect(diff.added.map((s) => s.name)).toEqual(['a']);
    expect(diff.removed).toEqual([]);
    expect(diff.changed).toEqual([]);
    expect(diff.unchanged).toEqual([before[0]]);
    expect(diff.sources.map((s) => s.name)).toEqual(['a', 'b']);
    expect(diff.sources[1]).toBe(before[0]);
  });

  it('a source removed', () => {
    const before = sources(entry('a'), entry('b'), entry('c'));
    const after = sources(entry('a'), entry('c'));
    const diff = diffSources(before, after);
    expect(diff.removed).toEqual([before[1]]);
    expect(diff.added).toEqual([]);
    expect(diff.sources).toEqual([before[0], before[2]]);
    expect(isEmptyDiff(diff)).toBe(false);
  });

  it('changed settings are named by path: sync, labels, upstream URL, a secret (never its value)', () => {
    const before = sources(entry('a', ['labels: {environment: production}']), entry('b'), entry('c'));
    const after = sources(
      entry('a', ['labels: {environment: staging, team: forms}', 'sync: {window: 1d}']),
      entry('b').replace('https://b.example.test/api', 'https://b2.example.test/api'),
      entry('c').replace(SECRET, 'another-secret-value'),
    );
    const diff = diffSources(before, after);
    expect(diff.changed.map((c) => [c.after.name, c.keys])).toEqual([
      ['a', ['labels.environment', 'labels.team', 'sync.windowMs']],
      ['b', ['upstream.statisticsUrl']],
      ['c', ['upstream.clientSecret']],
    ]);
    expect(JSON.stringify(diff.changed.map((c) => c.keys))).not.toContain('another-secret-value');
    expect(diff.changed[0]!.before).toBe(before[0]);
    expect(diff.changed[0]!.after).toBe(after[0]);
    expect(diff.sources).toEqual(after);
  });

  it('a schedule turned on, a relative start date and a file path are compared by what they are', () => {
    const [a] = sources(entry('a', ['sync: {start_date: 30d}']));
    const [same] = sources(entry('a', ['sync: {start_date: 30d}']));
    const [scheduled] = sources(entry('a', ['sync: {start_date: 30d, schedule: "0 * * * *"}']));
    const [fixed] = sources(entry('a', ['sync: {start_date: "2026-01-01T00:00:00Z"}']));
    expect(changedKeys(a!, same!)).toEqual([]);
    expect(changedKeys(a!, scheduled!)).toEqual(['sync.schedule']);
    expect(changedKeys(a!, fixed!)).toEqual(['sync.startDate.agoMs', 'sync.startDate.at']);
  });

  it('renaming a source is a removal and an addition', () => {
    const diff = diffSources(sources(entry('a')), sources(entry('z')));
    expect(diff.removed.map((s) => s.name)).toEqual(['a']);
    expect(diff.added.map((s) => s.name)).toEqual(['z']);
  });
});
