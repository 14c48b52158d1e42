/**
 * `--help` is short: the commands first, then the few settings a first deployment sets, and where
 * the rest are (`--help-settings`, docs/configuration.md); every setting's flag is still accepted.
 * The exit statuses and texts each command's help promises are test/integration/cli-check.test.ts.
 */
import type { Command } from 'commander';
import { describe, expect, it } from 'vitest';
import { buildProgram } from '../../src/cli.js';
import { configOverrides, HELP_SETTINGS, SETTING_GROUPS, settingsHelp } from '../../src/commands/options.js';
import { SETTINGS } from '../../src/config.js';
import { runCliInProcess } from '../helpers/cli.js';

/** What `--help` prints for `command`, the texts added after it included. */
function helpOf(command: Command): string {
  let text = '';
  command.configureOutput({ writeOut: (s) => (text += s) }).outputHelp();
  return text;
}

/** The long flags a help text lists as options (at the start of a line, after the indent). */
const listedFlags = (help: string) => [...help.matchAll(/^ {2}(?:-\w, )?(--[a-z-]+)/gm)].map((m) => m[1]);

describe('--help', () => {
  const help = helpOf(buildProgram());

  it('lists the commands before the options', () => {
    expect(help.indexOf('Commands:')).toBeGreaterThan(0);
    expect(help.indexOf('Commands:')).toBeLessThan(help.indexOf('Options:'));
    for (const command of ['check', 'fields', 'migrate', 'rollup', 'serve', 'simulate', 'state', 'sync', 'verify']) {
      expect(help, command).toMatch(new RegExp(`^ {2}${command}\\b`, 'm'));
    }
  });

  it('shows only the settings most people set, and says where the rest are', () => {
    const shown = SETTINGS.filter((s) => HELP_SETTINGS.has(s.env)).map((s) => s.flag);
    expect(listedFlags(help.slice(help.indexOf('Options:')))).toEqual([...shown, '--help-settings', '--version', '--help']);
    expect(help).toContain('--help-settings lists all');
    expect(help).toContain('docs/configuration.md');
    expect(help).not.toContain('--sync-window');
  });

  it("puts a command's own options first and names the program's without describing them", () => {
    const sync = helpOf(buildProgram().commands.find((c) => c.name() === 'sync')!);
    const own = sync.slice(sync.indexOf('Options:'), sync.indexOf('Global Options:'));
    expect(listedFlags(own)).toEqual(['--from', '--to', '--wait', '--source', '--help']);
    const global = sync.slice(sync.indexOf('Global Options:'));
    expect(global.replace(/\s+/g, ' ')).toContain('--config-file, --statistics-url,');
    expect(global).not.toContain('[env ');
    expect(sync).not.toContain('--sync-window');
    expect(sync).toContain('--help-settings lists all');
  });

  it('still accepts every setting flag, each overriding its variable', () => {
    const program = buildProgram();
    const flagged = SETTINGS.filter((s) => s.flag !== undefined);
    program.parseOptions(flagged.flatMap((s) => [s.flag!, `value of ${s.env}`]));
    expect(configOverrides(program)).toEqual(Object.fromEntries(flagged.map((s) => [s.env, `value of ${s.env}`])));
  });
});

describe('--help-settings', () => {
  it('groups every setting exactly once', () => {
    const grouped = SETTING_GROUPS.flatMap((g) => g.settings);
    expect([...grouped].sort()).toEqual(SETTINGS.map((s) => s.env).sort());
    expect(new Set(grouped).size).toBe(grouped.length);
  });

  it('prints every setting with its flag, default and variable, and exits 0, after a command too', async () => {
    const text = settingsHelp();
    for (const setting of SETTINGS) {
      const line = text.split('\n').find((l) => l.endsWith(`[env ${setting.env}]`));
      expect(line, setting.env).toBeDefined();
      expect(line, setting.env).toContain(setting.flag ?? `${setting.env} (secret: no flag)`);
      if (setting.default !== undefined) expect(line, setting.env).toContain(`(default ${setting.default})`);
    }
    for (const args of [['--help-settings'], ['sync', '--help-settings']]) {
      const r = await runCliInProcess(args);
      expect(r.code, args.join(' ')).toBe(0);
      expect(r.stdout, args.join(' ')).toBe(text);
      expect(r.stderr, args.join(' ')).toBe('');
    }
  });
});
