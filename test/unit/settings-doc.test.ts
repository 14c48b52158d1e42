/**
 * docs/configuration.md holds the tables scripts/settings-doc.ts writes from the settings table
 * (src/config/settings.ts), so the page cannot fall out of step with the code; regenerate with
 * `npm run docs:settings`. The README's short table is checked in test/unit/config.test.ts.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { CONFIGURATION_DOC, REGENERATE, renderConfigurationDoc } from '../../scripts/settings-doc.js';
import { SETTINGS } from '../../src/config.js';

const page = readFileSync(CONFIGURATION_DOC, 'utf8');

describe('docs/configuration.md', () => {
  it(`holds the tables the settings table gives, byte for byte (${REGENERATE})`, () => {
    expect(page, `docs/configuration.md differs from src/config/settings.ts: run ${REGENERATE}`).toBe(renderConfigurationDoc(page));
  });

  it('has a row per setting with its flag and default', () => {
    for (const setting of SETTINGS) {
      const flag = setting.flag === undefined ? 'none: a secret, and command lines show in `ps`' : `\`${setting.flag}\``;
      const byDefault = setting.default === undefined ? 'unset' : `\`${setting.default}\``;
      expect(page, setting.env).toContain(`| \`${setting.env}\` | ${flag} | ${byDefault} |`);
    }
  });

  it('would be rewritten if a table were edited by hand, and names a missing group', () => {
    const edited = page.replace('| `SYNC_WINDOW` | `--sync-window` | `1h` |', '| `SYNC_WINDOW` | `--sync-window` | `2h` |');
    expect(edited).not.toBe(page);
    expect(renderConfigurationDoc(edited)).toBe(page);
    const withoutLogging = page.replace(/<!-- settings: Logging -->[\s\S]*?<!-- \/settings -->/, '');
    expect(() => renderConfigurationDoc(withoutLogging)).toThrow(/one block per group, in this order: .*Logging/);
  });
});
