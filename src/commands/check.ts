/**
 * `analytics-exporter check`: validates the configuration, then runs the checks of
 * src/app/check.ts and prints one line per step (with CONFIG_FILE, one block per source under a
 * line naming it). Exit 0 only when every step passes.
 */
import type { Command } from 'commander';
import type { StepResult } from '../app/check.js';
import type { Config, SourceConfig } from '../config.js';
import { requireDemoSimulator } from '../demo.js';
import { ConfigError, displayUrl } from '../errors.js';
import { createLogger } from '../log.js';
import { readWebConfigSetting } from '../serve/web/webconfig.js';
import { configOverrides } from './options.js';
import { EXIT_FAILURE, EXIT_OK, EXIT_USAGE } from './exit.js';
import { loadCommandConfig } from './common.js';

/** Formats a step as `ok    token          detail`. */
export function formatStep(result: StepResult): string {
  return `${result.status.padEnd(5)} ${result.step.padEnd(14)} ${result.detail}`;
}

/** The line above a source's steps: `source production: upstream https://statistics.example.com/ {environment="production"}`. */
export function formatSection(source: SourceConfig): string {
  const labels = Object.entries(source.labels).map(([name, value]) => `${name}=${JSON.stringify(value)}`);
  return `source ${source.name}: ${source.upstream ? `upstream ${describeUpstream(source)}` : 'built-in demo simulator'}${labels.length > 0 ? ` {${labels.join(',')}}` : ''}`;
}

function describeUpstream(source: SourceConfig): string {
  return displayUrl(source.upstream!.statisticsUrl);
}

/** Adds `check` to the program. */
export function registerCheckCommand(program: Command): void {
  program
    .command('check')
    .description('validate the configuration and try the token, E6 and E7 of every source and the database once each; exit 0 only if all pass')
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
        // The configuration holds only WEB_CONFIG_FILE's path; serve reads the file, and the same reader checks it here.
        readWebConfigSetting(config.serve.webConfigFile);
        requireDemoSimulator(config);
      } catch (err) {
        if (!(err instanceof ConfigError)) throw err;
        out(formatStep({ step: 'configuration', status: 'FAIL', detail: err.message.replaceAll('\n', '; ') }));
        process.exitCode = EXIT_USAGE;
        return;
      }
      // With CONFIG_FILE, each source's steps come as a block under a line naming it; the
      // environment's one source is shown as it always was.
      const configFile = overrides.CONFIG_FILE ?? (process.env.CONFIG_FILE || undefined);
      const first = config.sources[0]!;
      out(
        formatStep({
          step: 'configuration',
          status: 'ok',
          detail:
            configFile !== undefined
              ? `${config.sources.length} source${config.sources.length === 1 ? '' : 's'} from ${configFile}: ${config.sources.map((s) => s.name).join(', ')}`
              : first.upstream
                ? `upstream ${describeUpstream(first)}`
                : 'STATISTICS_URL unset: checking against the built-in demo simulator',
        }),
      );
      // Loaded only now: a configuration error is reported without the application layer.
      const { runChecks } = await import('../app/check.js');
      const log = createLogger(config.logLevel, { format: config.logFormat });
      const ok = await runChecks(config, {
        log,
        report: (r) => out(formatStep(r)),
        ...(configFile !== undefined ? { section: (source: SourceConfig) => out(formatSection(source)) } : {}),
      });
      process.exitCode = ok ? EXIT_OK : EXIT_FAILURE;
    });
}
