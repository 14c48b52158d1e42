/** `analytics-exporter check`: validates the configuration, runs src/app/check.ts, prints one line per step. */
import type { Command } from 'commander';
import type { Config, SourceConfig } from '../config.js';
import { requireDemoSimulator } from '../demo.js';
import { ConfigError } from '../errors.js';
import { createLogger } from '../log.js';
import { readWebConfigSetting } from '../serve/web/webconfig.js';
import { configOverrides } from './options.js';
import { checkExitStatus } from './exit.js';
import { formatConfigurationDetail, formatSection, formatStep } from './format/check.js';
import { loadCommandConfig } from './common.js';

/** Adds `check` to the program. */
export function registerCheckCommand(program: Command): void {
  program
    .command('check')
    .description(
      'validate the configuration, try the token, E6 and E7 of every source and the database once each, and tell what the database lacks (writes, migrations, privileges); exit 0 only if all pass',
    )
    .addHelpText(
      'after',
      '\nExit status: 0 every step passed, 1 a step failed, 2 bad configuration (the configuration step names the variable, or the file, line and key).',
    )
    .action(async (_options: unknown, command: Command) => {
      const out = (line: string) => process.stdout.write(`${line}\n`);
      let config: Config;
      const overrides = configOverrides(command);
      try {
        config = loadCommandConfig(process.env, overrides);
        // The same reader as serve's.
        readWebConfigSetting(config.serve.webConfigFile);
        requireDemoSimulator(config);
      } catch (err) {
        if (!(err instanceof ConfigError)) throw err;
        out(formatStep({ step: 'configuration', status: 'FAIL', detail: err.message.replaceAll('\n', '; ') }));
        process.exitCode = checkExitStatus({ configuration: 'bad' });
        return;
      }
      // With CONFIG_FILE, each source's steps under a line naming it.
      const configFile = overrides.CONFIG_FILE ?? (process.env.CONFIG_FILE || undefined);
      out(formatStep({ step: 'configuration', status: 'ok', detail: formatConfigurationDetail(config.sources, configFile) }));
      const { runChecks } = await import('../app/check.js');
      const log = createLogger(config.logLevel, { format: config.logFormat });
      const passed = await runChecks(config, {
        log,
        report: (r) => out(formatStep(r)),
        ...(configFile !== undefined ? { section: (source: SourceConfig) => out(formatSection(source)) } : {}),
      });
      process.exitCode = checkExitStatus({ passed });
    });
}
