/**
 * One sync schedule per source, each with its own run state: a slow or failing source's run never
 * delays another's (they share only the database pool, sized for the sources that run at once).
 */
import type { Config, SourceConfig } from '../config.js';
import { isDatabaseUnavailable } from '../failures.js';
import type { Logger } from '../log.js';
import type { ExporterMetrics } from '../metrics/registry.js';
import { sourceSyncDeps } from '../sync/run/context.js';
import { runSync } from '../sync/run/run.js';
import { SyncScheduler } from './cron.js';
import type { PgStore } from '../sync/store/pg/store.js';
import { auditSource, type AuditResult } from '../sync/audit/source.js';
import type { AnalyticsClient } from '../upstream/analytics.js';
import type { ServeDatabase } from './database.js';

/** What one source's schedulers need. */
export interface SourceScheduleContext {
  config: Config;
  log: Logger;
  metrics: ExporterMetrics;
  database: ServeDatabase;
}

/**
 * Builds (does not start) one source's sync scheduler on `client`. A run waits for the database's
 * migration, and tells the database's health what it learnt: unreachable (a sync is then owed on
 * recovery) or reachable. A source without a schedule gets one that never fires on its own
 * (`0 0 1 1 *`, never started). Used at start and by a reload for a source added or changed.
 */
export function buildSourceScheduler(context: SourceScheduleContext, source: SourceConfig, client: AnalyticsClient): SyncScheduler {
  const { config, log, metrics, database } = context;
  const { health } = database;
  const sourceLog = log.child({ source: source.name });
  const observer = metrics.syncObserver(source.name);
  return new SyncScheduler({
    schedule: source.sync.schedule ?? '0 0 1 1 *',
    log: sourceLog,
    source: source.name,
    onSkipped: (reason) => metrics.sync.skipped.inc({ source: source.name, reason }),
    run: async (signal) => {
      const started = performance.now();
      try {
        const { store } = await database.migrated();
        const result = await runSync(sourceSyncDeps(config, source, { store: store.forSource(source.name, sourceLog), client, log: sourceLog, observer }), {
          signal,
        });
        // Another replica runs the source: what its runs loaded or parked shows here too.
        if (result.status === 'locked') await refreshParked({ store, source: source.name, metrics, log: sourceLog });
        if (result.status === 'failed' && isDatabaseUnavailable(result.error)) health.unreachable(result.error, { syncOwed: true });
        else health.reachable();
        return result;
      } catch (err) {
        metrics.recordUnrecordedFailure(source.name, (performance.now() - started) / 1000, err);
        if (isDatabaseUnavailable(err) && !signal.aborted) health.unreachable(err, { syncOwed: true });
        throw err;
      }
    },
  });
}

/**
 * Reads the source's parked windows from the ledger into `analytics_exporter_sync_windows_parked`
 * after a tick that found the source's lock held: the gauge is otherwise set at serve's start and
 * at the end of this process's runs, so a replica that loses the lock at every tick to another
 * would keep the count it read at start, and AnalyticsSyncWindowsParked would fire for it after
 * the other replica had loaded the window. A failed read is logged at debug and left to the next tick.
 */
async function refreshParked(o: { store: PgStore; source: string; metrics: ExporterMetrics; log: Logger }): Promise<void> {
  try {
    o.metrics.setParkedWindows(o.source, await o.store.session((session) => session.ledger(o.source).countParked()));
  } catch (err) {
    o.log.debug({ err }, 'the parked windows could not be read after a locked tick; the next tick tries again');
  }
}

/**
 * Builds (does not start) one source's audit scheduler (AUDIT_SCHEDULE): `verify --repair` of the
 * source on the schedule (src/sync/audit/source.ts), its outcome in the audit metrics. An audit that
 * fails (E6 or the database down) is logged and left to the next tick.
 *
 * @returns undefined when AUDIT_SCHEDULE is `off`.
 */
export function buildSourceAudit(context: SourceScheduleContext, source: SourceConfig, client: AnalyticsClient): SyncScheduler<AuditResult> | undefined {
  const { config, log, metrics, database } = context;
  const schedule = config.serve.auditSchedule;
  if (schedule === undefined) return undefined;
  const sourceLog = log.child({ source: source.name });
  const observer = metrics.syncObserver(source.name);
  metrics.auditScheduled(source.name);
  const run = async (signal: AbortSignal): Promise<AuditResult> => {
    const { store } = await database.migrated();
    const deps = sourceSyncDeps(config, source, { store: store.forSource(source.name, sourceLog), client, log: sourceLog, observer });
    const result = await auditSource(deps, { repair: true, signal });
    metrics.recordAudit(source.name, result);
    return result;
  };
  return new SyncScheduler({ schedule, log: sourceLog, source: source.name, job: 'audit', run });
}
