/** `analytics-exporter serve`: starts src/serve/lifecycle.ts, and maps signals and failures to exit statuses. */
import type { Command } from 'commander';
import type { RunningServer } from '../serve/lifecycle.js';
import { ConfigError } from '../errors.js';
import { createLogger } from '../log.js';
import { EXIT_FAILURE, EXIT_OK, EXIT_USAGE, reportFailure } from './exit.js';
import { loadCommandConfig, loadConfigForCommand } from './common.js';
import { configOverrides } from './options.js';
import { handleShutdownSignals } from './shutdown.js';

/** After the first signal, exit anyway after this long. */
const SHUTDOWN_GRACE_MS = 15_000;

/** Adds `serve` to the program. */
export function registerServeCommand(program: Command): void {
  program
    .command('serve')
    .description(
      "serve /metrics (every source's platform E7 text with the exporter's own metrics), /probe?source=NAME (one source's), /healthz and /readyz, run each source's sync on its schedule (SYNC_SCHEDULE, or the source's sync.schedule in CONFIG_FILE), and audit every source on AUDIT_SCHEDULE (verify --repair)",
    )
    .addHelpText(
      'after',
      '\nWith nothing configured: the built-in demo simulator and the embedded database under DATA_DIR.\nSIGHUP or POST /-/reload reads CONFIG_FILE again (the environment stays as at start); a file that cannot be used keeps the sources in use.\nExit status: 0 after SIGINT/SIGTERM (the running sync rolls back its open window), 1 when it cannot start, 2 bad configuration.',
    )
    .action(async (_options: unknown, command: Command) => {
      const config = loadConfigForCommand(command, true);
      if (config === undefined) return;
      const { startServe } = await import('../serve/lifecycle.js');
      const { refuseSharedServers } = await import('../app/runtime.js');
      const log = createLogger(config.logLevel, { format: config.logFormat });
      // A reload reads CONFIG_FILE again with the start's environment and flags.
      const env = { ...process.env };
      const overrides = configOverrides(command);
      let running: RunningServer;
      try {
        // Exit 1 at once rather than serve without syncs: the locks need sessions of their own.
        await refuseSharedServers(config, log);
        running = await startServe(config, log, () => loadCommandConfig(env, overrides));
      } catch (err) {
        // WEB_CONFIG_FILE, read by serve itself: still a bad configuration.
        if (err instanceof ConfigError) {
          process.stderr.write(`analytics-exporter: invalid configuration: ${err.message}\n`);
          process.exitCode = EXIT_USAGE;
          return;
        }
        process.exitCode = reportFailure(log, err, 'serve could not start');
        return;
      }
      // SIGHUP reloads, as for Prometheus; a reload that ran logged its outcome.
      const onHangup = () =>
        void running.reload('SIGHUP').then((result) => {
          if (!result.ok && result.status === 503) log.warn({ signal: 'SIGHUP' }, result.message);
        });
      process.on('SIGHUP', onHangup);
      await new Promise<void>((resolve) => {
        const shutdown = handleShutdownSignals({
          log,
          stopping: 'shutting down: draining HTTP and the running sync (send the signal again to exit at once)',
          bound: { ms: SHUTDOWN_GRACE_MS, exitCode: EXIT_FAILURE, level: 'error', message: 'shutdown took too long; exiting' },
          forced: 'second signal: exiting at once',
          stop: () => {
            running.stop().then(
              ({ drained }) => {
                log.info({ drained }, 'stopped');
                // What is still busy would keep the process alive.
                if (!drained) process.exit(EXIT_OK);
                process.exitCode = EXIT_OK;
                shutdown.dispose();
                resolve();
              },
              (err: unknown) => {
                log.error({ err }, 'shutdown failed');
                process.exitCode = EXIT_FAILURE;
                shutdown.dispose();
                resolve();
              },
            );
          },
        });
      });
      process.off('SIGHUP', onHangup);
    });
}
