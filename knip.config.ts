/**
 * knip (`npm run lint:unused`): no unused file, dependency or export. It runs twice:
 *   knip               every file: tests, bench/, soak/, scripts/, configs (their plugins) too;
 *   knip --production  only what the product runs (patterns marked `!`): an export of src/ that
 *                      only tests import is reported, as it belongs in test/helpers/, unless it
 *                      is tagged `@internal` (a reference implementation the tests hold to).
 * In production mode an export used in its own module is a unit its tests reach, not an unused
 * one; the full run still reports an export nothing outside its module imports.
 */
import type { KnipConfig } from 'knip';

export default ({ production = false }: { production?: boolean }): KnipConfig => ({
  // System tools the tests and benchmarks run (Debian packages, see .ci/run), not npm packages.
  ignoreBinaries: ['faketime', 'openssl', 'pg_config', 'promtool', 'psql'],
  // Unused exports are checked in src/, the product; the tools around it are not held to it yet.
  ignoreIssues: {
    '{bench,soak,grafana,prometheus,scripts,test}/**': ['exports', 'types'],
    'packages/simulator/{src,test}/**': ['exports', 'types'],
  },
  workspaces: {
    '.': {
      entry: [
        'src/cli.ts!',
        // Started as child processes by bench/suites/etl.ts (runScriptChild), not imported.
        'bench/lib/fetch-only.ts',
        // Run by hand (`npx tsx bench/count-requests.ts`): a sync's E6 requests against the pages needed.
        'bench/count-requests.ts',
        // Run by hand (`npx tsx bench/window-replace.ts`): what records' indexes cost a window's replacement.
        'bench/window-replace.ts',
        'bench/lib/bare-client.mjs',
      ],
      project: [
        'src/**/*.ts!',
        'test/**/*.ts',
        'bench/**/*.{ts,mjs}',
        'soak/**/*.ts',
        'scripts/**/*.{ts,mjs}',
        'grafana/src/**/*.ts',
        'prometheus/src/**/*.ts',
      ],
      ignoreExportsUsedInFile: production,
    },
    'packages/simulator': {
      entry: ['src/bin.ts!', 'src/index.ts!'],
      project: ['src/**/*.ts!', 'test/**/*.ts'],
      ignoreExportsUsedInFile: production,
    },
  },
});
