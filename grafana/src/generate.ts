/**
 * The generator of grafana/dashboards/*.json: builds the three dashboards and renders them as the
 * files Grafana's file provisioning loads (grafana/provisioning/dashboards/dashboards.yaml).
 *
 * It runs through vitest, which compiles TypeScript on the fly (see grafana/README.md):
 *
 *   UPDATE_DASHBOARDS=1 npx vitest run test/unit/dashboards.test.ts   # writes the files
 *   npx vitest run test/unit/dashboards.test.ts                       # fails if they differ
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Dashboard } from '@grafana/grafana-foundation-sdk/dashboard';
import { analyticsHistoryDashboard } from './analytics-history.js';
import { exporterHealthDashboard } from './exporter-health.js';
import { platformUsageDashboard } from './platform-usage.js';

/** grafana/dashboards/ of this checkout (absolute). */
export const DASHBOARDS_DIR = resolve(dirname(fileURLToPath(import.meta.url)), '..', 'dashboards');

/** Every dashboard by its file name in grafana/dashboards/. */
export function buildDashboards(): Record<string, Dashboard> {
  return {
    'platform-usage.json': platformUsageDashboard(),
    'analytics-history.json': analyticsHistoryDashboard(),
    'exporter-health.json': exporterHealthDashboard(),
  };
}

/**
 * The files' exact contents by file name: JSON indented by two spaces with a final newline
 * (functions the SDK puts on query objects are dropped by JSON.stringify).
 */
export function renderDashboards(): Record<string, string> {
  return Object.fromEntries(Object.entries(buildDashboards()).map(([file, dash]) => [file, `${JSON.stringify(dash, null, 2)}\n`]));
}

/**
 * Writes every dashboard into `dir` (default grafana/dashboards/), creating it if needed.
 *
 * @returns the absolute paths written.
 * @throws the file system's error when `dir` cannot be created or written.
 */
export function writeDashboards(dir: string = DASHBOARDS_DIR): string[] {
  mkdirSync(dir, { recursive: true });
  return Object.entries(renderDashboards()).map(([file, text]) => {
    const path = join(dir, file);
    writeFileSync(path, text);
    return path;
  });
}
