/**
 * `analytics-exporter check`: validates the configuration, then runs the checks of
 * src/app/check.ts and prints one line per step. Exit 0 only when every step passes.
 */
import type { Command } from 'commander';
import type { StepResult } from '../app/check.js';
import { loadConfig, type Config } from '../config.js';
import { ConfigError } from '../errors.js';
import { createLogger } from '../log.js';
import { configOverrides } from './options.js';
import { EXIT_FAILURE, EXIT_OK, EXIT_USAGE } from './exit.js';

/** Formats a step as `ok    token          detail`. */
export function formatStep(result: StepResult): string {
  return `${result.status.padEnd(5)} ${result.step.padEnd(14)} ${result.detail}`;
}

/** Adds `check` to the program. */
export function registerCheckCommand(program: Command): void {
  program
    .command('check')
    .description('validate the configuration and try the token, E6, E7 and database once each; exit 0 only if all pass')
    .action(async (_options: unknown, command: Command) => {
      const out = (line: string) => process.stdout.write(`${line}\n`);
      let config: Config;
      try {
        config = loadConfig(process.env, configOverrides(command));
      } catch (err) {
        if (!(err instanceof ConfigError)) throw err;
        out(formatStep({ step: 'configuration', status: 'FAIL', detail: err.message.replaceAll('\n', '; ') }));
        process.exitCode = EXIT_USAGE;
        return;
      }
      out(
        formatStep({
          step: 'configuration',
          status: 'ok',
          detail: config.sources[0]!.upstream
            ? `upstream ${config.sources[0]!.upstream.statisticsUrl.origin}${config.sources[0]!.upstream.statisticsUrl.pathname}`
            : 'STATISTICS_URL unset: checking against the built-in demo simulator',
        }),
      );
      // Loaded only now: a configuration error is reported without the application layer.
      const { runChecks } = await import('../app/check.js');
      const log = createLogger(config.logLevel, { format: config.logFormat });
      const ok = await runChecks(config, { log, report: (r) => out(formatStep(r)) });
      process.exitCode = ok ? EXIT_OK : EXIT_FAILURE;
    });
}
