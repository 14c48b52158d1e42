/**
 * `check`: each dependency tried once (token E0, one E6 page, the E7 text, the database: then
 * whether it is writable, migrated, and the role's privileges, check-database.ts), each step
 * reported as it finishes, like `telegraf --test` or `vector validate`.
 */
import { resolve } from 'node:path';
import { openDatabase } from './runtime.js';
import { createPool, describeDatabase } from '../db/pool.js';
import { inspectDatabase, type DatabaseFinding } from './check-database.js';
import { requireOwnSessions } from '../db/pooler.js';
import { readDatabaseTls } from '../db/tls.js';
import { withTrailingSlash, type Config, type SourceConfig } from '../config.js';
import { describeError, displayUrl } from '../errors.js';
import type { Logger } from '../log.js';
import { AnalyticsClient } from '../upstream/analytics.js';
import { startDemoUpstream } from '../demo.js';

const PROBE_RANGE_MS = 24 * 3_600_000;

type StepStatus = 'ok' | 'FAIL' | 'skip';

/** One line of `check` output. */
export interface StepResult {
  step: 'configuration' | 'token' | 'analytics' | 'prometheus' | 'database' | DatabaseFinding['step'] | 'pooling';
  status: StepStatus;
  detail: string;
  /** Absent for configuration and the database's lines. */
  source?: string;
}

export interface CheckDeps {
  log: Logger;
  /** A source's results after its {@link CheckDeps.section}. */
  report: (result: StepResult) => void;
  section?: (source: SourceConfig) => void;
  now?: () => number;
}

/**
 * Sources tried at once, each reported as one block in configuration order; then the database. A
 * failed token step skips the source's API steps. The probes cover the 24 hours before `now` (ms).
 * @returns true when no step failed.
 */
export async function runChecks(config: Config, deps: CheckDeps): Promise<boolean> {
  const { log, report } = deps;
  const now = deps.now ?? Date.now;
  let failed = false;
  const step = async (name: StepResult['step'], sink: (result: StepResult) => void, fn: () => Promise<string>): Promise<boolean> => {
    try {
      sink({ step: name, status: 'ok', detail: await fn() });
      return true;
    } catch (err) {
      failed = true;
      sink({ step: name, status: 'FAIL', detail: describeError(err) });
      return false;
    }
  };

  // Each block is reported live while it is the one being shown; the later ones wait in order.
  let shown = -1;
  const blocks = config.sources.map((source, index) => {
    const waiting: StepResult[] = [];
    const sink = (result: StepResult) => {
      const withSource = { ...result, source: source.name };
      if (index === shown) report(withSource);
      else waiting.push(withSource);
    };
    // A source that cannot even be set up (a TLS file the client refuses) fails its own block, not the others'.
    const done = checkSource(source, sink, step, log.child({ source: source.name }), now).catch((err: unknown) => {
      failed = true;
      sink({ step: 'token', status: 'FAIL', detail: describeError(err) });
    });
    return { source, waiting, done };
  });
  for (const [index, block] of blocks.entries()) {
    shown = index;
    deps.section?.(block.source);
    for (const result of block.waiting.splice(0)) report(result);
    await block.done;
  }

  // After the connection's line: read-only, migrations, privileges (each a line).
  let findings: DatabaseFinding[] = [];
  if (config.database.url === undefined) {
    // The embedded database is opened as every command opens it: locked to this process, so a
    // second process on DATA_DIR (a running serve, say) fails here, naming the holder.
    await step('database', report, async () => {
      const db = await openDatabase(config, log, 1);
      try {
        const { rows } = await db.pool.query<{ version: string }>('select current_setting($1) as version', ['server_version']);
        findings = await inspectDatabase(db.pool, config);
        return `embedded PostgreSQL ${rows[0]?.version ?? '?'} (PGlite) in ${resolve(config.database.dataDir)}`;
      } finally {
        await db.close();
      }
    });
  } else {
    const url = config.database.url;
    const reached = await step('database', report, async () => {
      // The pool every command uses, so that check tries the same TLS attempts (sslmode).
      const pool = createPool({ url, tls: readDatabaseTls(config.database.tls) }, log, { max: 1 });
      try {
        const { rows } = await pool.query<{ version: string; ssl: boolean | null }>(
          'select current_setting($1) as version, (select ssl from pg_stat_ssl where pid = pg_backend_pid()) as ssl',
          ['server_version'],
        );
        findings = await inspectDatabase(pool, config);
        return `PostgreSQL ${rows[0]?.version ?? '?'} at ${describeDatabase(url)} (${rows[0]?.ssl ? 'TLS' : 'plain'}, sslmode=${config.database.tls.mode})`;
      } finally {
        await pool.end().catch(() => undefined);
      }
    });
    // Its own step: a pooler sharing servers breaks the advisory locks (src/db/pooler.ts).
    if (reached) await step('pooling', report, () => requireOwnSessions({ url, tls: readDatabaseTls(config.database.tls) }, log));
    else report({ step: 'pooling', status: 'skip', detail: 'not tried: no database' });
  }
  for (const finding of findings) report(finding);
  if (findings.some((f) => f.status === 'FAIL')) failed = true;
  return !failed;
}

/** The demo simulator for the source without STATISTICS_URL. */
async function checkSource(
  source: SourceConfig,
  sink: (result: StepResult) => void,
  step: (name: StepResult['step'], sink: (result: StepResult) => void, fn: () => Promise<string>) => Promise<boolean>,
  log: Logger,
  now: () => number,
): Promise<void> {
  const demo = source.upstream === undefined ? await startDemoUpstream(log, source.demo) : undefined;
  const upstream = source.upstream ?? demo!.config;
  const client = AnalyticsClient.fromConfig(upstream, { log });
  try {
    const tokenOk = await step('token', sink, async () => {
      await client.tokens.getToken();
      return `Bearer token from ${displayUrl(upstream.tokenUrl)} (${upstream.tokenAuthMethod}, scope ${upstream.scope})`;
    });
    const end = new Date(now());
    const start = new Date(end.getTime() - PROBE_RANGE_MS);
    if (tokenOk) {
      await step('analytics', sink, async () => {
        const page = await client.fetchPage({ startDate: start, toDate: end, pageSize: 1 });
        return `E6 ${displayUrl(new URL('analytics', withTrailingSlash(upstream.statisticsUrl)))}: ${page.totalRecords} records in the last 24h`;
      });
      await step('prometheus', sink, async () => {
        const text = await client.fetchPrometheusText({ startDate: start, toDate: end });
        const samples = text.split('\n').filter((line) => line.trim() !== '' && !line.startsWith('#')).length;
        return `E7 text with ${samples} sample lines for the last 24h`;
      });
    } else {
      sink({ step: 'analytics', status: 'skip', detail: 'not tried: no token' });
      sink({ step: 'prometheus', status: 'skip', detail: 'not tried: no token' });
    }
  } finally {
    await client.close();
    await demo?.close();
  }
}
