/**
 * The import rules of docs/architecture.md, checked by `npm run lint` (dependency-cruiser).
 * Type-only imports count too (`tsPreCompilationDeps`): a cycle through types is still a cycle
 * a reader has to follow.
 *
 * Layers, lowest first (a layer imports only the ones below it):
 *   leaves       errors.ts, failures.ts, redact.ts, time.ts, settle.ts, heap.ts, version.ts, types/
 *   config       config.ts, config/ (plain settings and their parsing; no runtime module)
 *   log.ts
 *   exposition/  the Prometheus text format (parse, merge, serialise): pure functions
 *   db/, upstream/  PostgreSQL and the platform's API (E0, E6, E7), independent of each other
 *   sync/        the ETL (windows, reads, loads, derived tables)
 *   metrics/     the exporter's own metrics
 *   app/, serve/ what the commands run (sync, check, derived tables; serve's lifecycle and HTTP side)
 *   commands/    one file per CLI command: parse, call one app function, map to an exit status
 *   cli.ts       dispatch
 * The simulator is a package of its own (packages/simulator): it imports nothing from src/, and
 * src/ loads it only on demand (a dynamic import), for the demo.
 */
/** Files of a layer, as a path pattern. */
export const LAYER = {
  leaves: '^src/((errors|failures|redact|time|settle|heap|version)\\.ts$|types/)',
  config: '^src/(config\\.ts|config/)',
  log: '^src/log\\.ts$',
  exposition: '^src/exposition/',
  db: '^src/db/',
  upstream: '^src/upstream/',
  sync: '^src/sync/',
  metrics: '^src/metrics/',
  app: '^src/(app/|demo\\.ts$)',
  serve: '^src/serve/',
  commands: '^src/commands/',
  cli: '^src/cli\\.ts$',
  simulator: '^packages/simulator/',
};

/** A rule: files matching `from` may import nothing matching any of `notTo`. */
function forbid(name, comment, from, notTo) {
  return { name, comment, severity: 'error', from: { path: from }, to: { path: notTo.join('|') } };
}

const above = (...layers) => layers.map((l) => LAYER[l]);

export default {
  forbidden: [
    {
      name: 'no-circular',
      comment: 'A cycle makes two modules one: neither can be read, tested or changed alone.',
      severity: 'error',
      from: { path: '^src/' },
      to: { circular: true },
    },
    forbid('leaves-import-nothing', 'errors, time, settle, heap and version are leaves: everything may use them.', LAYER.leaves, [
      '^src/(?!(errors|failures|redact|time|settle|heap|version)\\.ts$)',
    ]),
    forbid('config-is-a-leaf', 'Configuration is plain types and their parsing; the modules that use a setting read its files.', LAYER.config, [
      '^src/(?!(errors|time)\\.ts$|config\\.ts$|config/)',
    ]),
    forbid('exposition-is-pure', 'The exposition format is pure text work: no I/O, no other layer.', LAYER.exposition, [
      '^src/(?!(errors|time)\\.ts$|exposition/)',
    ]),
    forbid(
      'db-below-sync',
      'db/ is the PostgreSQL plumbing: it knows nothing of the platform or the ETL.',
      LAYER.db,
      above('upstream', 'sync', 'metrics', 'app', 'serve', 'commands', 'cli', 'exposition'),
    ),
    forbid(
      'upstream-below-sync',
      'upstream/ speaks the platform API (E0, E6, E7): it knows nothing of storage or the ETL.',
      LAYER.upstream,
      above('db', 'sync', 'metrics', 'app', 'serve', 'commands', 'cli'),
    ),
    forbid(
      'sync-below-app',
      'The ETL never reaches up: its callers (app, serve, commands) hand it what it needs.',
      LAYER.sync,
      above('metrics', 'app', 'serve', 'commands', 'cli'),
    ),
    forbid(
      'run-and-audit-use-store-ports',
      'The run and the audit see storage through store/ports.ts only; the app layer builds the PostgreSQL store and hands it over.',
      '^src/sync/(run|audit)/',
      ['^src/sync/store/pg/', '^src/db/'],
    ),
    forbid(
      'sync-rooms-below-run',
      'Reading, membership, rows and derived tables are used by the run; they never reach up to it, to the audit or to the store.',
      '^src/sync/(read|membership|rows|derived)/',
      ['^src/sync/(run|audit|store/pg)/'],
    ),
    forbid('store-below-run', 'The store implements the ports for the run; it never calls the run or the audit.', '^src/sync/store/', [
      '^src/sync/(run|audit)/',
    ]),
    forbid('metrics-below-app', "The exporter's own metrics are read by serve, never the reverse.", LAYER.metrics, above('app', 'serve', 'commands', 'cli')),
    forbid('app-below-commands', 'Applications are called by commands, and never call them.', LAYER.app, above('commands', 'cli')),
    forbid('serve-below-commands', 'The serve side is called by its command, and never calls commands.', LAYER.serve, above('commands', 'cli')),
    forbid('commands-below-cli', 'Commands are dispatched by cli.ts.', LAYER.commands, above('cli')),
    {
      name: 'simulator-only-on-demand',
      comment: 'The exporter does not ship the simulator: it may load it only with a dynamic import (and name its types), for the demo.',
      severity: 'error',
      from: { path: '^src/' },
      to: { path: LAYER.simulator, dependencyTypesNot: ['dynamic-import', 'type-import', 'type-only'] },
    },
    forbid('simulator-is-its-own', 'The simulator stands in for the platform; it shares no code with the exporter.', '^packages/simulator/', ['^src/']),
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { extensions: ['.ts', '.js'] },
  },
};
