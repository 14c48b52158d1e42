/**
 * The settings reference of docs/configuration.md, written from the settings table
 * (src/config/settings.ts) in the groups of `SETTING_GROUPS` (src/commands/options.ts). The page's
 * prose is written by hand; each group's block between its two markers is generated:
 *
 *   <!-- settings: Sync -->        heading, the group's sentence, a table of its settings
 *   <!-- /settings -->
 *
 *   npm run docs:settings              # rewrites the blocks
 *   npm run docs:settings -- --check   # exits 1 when the page differs from what it would write
 *
 * test/unit/settings-doc.test.ts runs the same comparison, so `npm test` fails while they drift.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { SETTING_GROUPS, type SettingGroup } from '../src/commands/options.js';
import { SETTINGS } from '../src/config.js';

/** The page, absolute. */
export const CONFIGURATION_DOC = resolve(fileURLToPath(new URL('../docs/configuration.md', import.meta.url)));
/** What a failure says to do. */
export const REGENERATE = 'npm run docs:settings';

const BLOCK = /<!-- settings: (.+?) -->\n[\s\S]*?<!-- \/settings -->/g;
const BY_ENV = new Map(SETTINGS.map((s) => [s.env, s]));

/** A table cell: pipes escaped, so a help text cannot end its cell early. */
const cell = (text: string) => text.replace(/\|/g, '\\|');

/** One group's block, markers included. */
export function renderGroup(group: SettingGroup): string {
  const rows = group.settings.map((env) => {
    const setting = BY_ENV.get(env);
    if (setting === undefined) throw new Error(`SETTING_GROUPS (src/commands/options.ts) names ${env}, which is not a setting`);
    const flag = setting.flag === undefined ? 'none: a secret, and command lines show in `ps`' : `\`${setting.flag}\``;
    const byDefault = setting.default === undefined ? 'unset' : `\`${setting.default}\``;
    return `| \`${env}\` | ${flag} | ${cell(byDefault)} | ${cell(setting.help)} |`;
  });
  return [
    `<!-- settings: ${group.title} -->`,
    `## ${group.title}`,
    '',
    group.about,
    '',
    '| Variable | Flag | Default | Meaning |',
    '|---|---|---|---|',
    ...rows,
    '<!-- /settings -->',
  ].join('\n');
}

/**
 * The page as the script writes it: `current` with each group's block rendered again.
 *
 * @throws {Error} when a setting is in no group, or the page lacks a group's block, holds one
 *   twice, holds one of no group, or holds them in another order than `SETTING_GROUPS`.
 */
export function renderConfigurationDoc(current: string): string {
  const grouped = new Set(SETTING_GROUPS.flatMap((g) => g.settings));
  const ungrouped = SETTINGS.filter((s) => !grouped.has(s.env)).map((s) => s.env);
  if (ungrouped.length > 0) throw new Error(`settings in no group of SETTING_GROUPS (src/commands/options.ts): ${ungrouped.join(', ')}`);
  const titles = [...current.matchAll(BLOCK)].map((m) => m[1]!);
  const expected = SETTING_GROUPS.map((g) => g.title);
  if (titles.join('\n') !== expected.join('\n')) {
    throw new Error(`${CONFIGURATION_DOC} must hold one block per group, in this order: ${expected.join('; ')} (it holds: ${titles.join('; ') || 'none'})`);
  }
  const byTitle = new Map(SETTING_GROUPS.map((g) => [g.title, g]));
  return current.replace(BLOCK, (_, title: string) => renderGroup(byTitle.get(title)!));
}

/** Rewrites the page's blocks; true when that changed it. */
export function writeConfigurationDoc(): boolean {
  const current = readFileSync(CONFIGURATION_DOC, 'utf8');
  const next = renderConfigurationDoc(current);
  if (next !== current) writeFileSync(CONFIGURATION_DOC, next);
  return next !== current;
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  if (process.argv.includes('--check')) {
    const current = readFileSync(CONFIGURATION_DOC, 'utf8');
    if (renderConfigurationDoc(current) !== current) {
      process.stderr.write(`${CONFIGURATION_DOC} differs from the settings table: run ${REGENERATE}\n`);
      process.exitCode = 1;
    }
  } else {
    process.stdout.write(writeConfigurationDoc() ? `wrote ${CONFIGURATION_DOC}\n` : `${CONFIGURATION_DOC} is up to date\n`);
  }
}
