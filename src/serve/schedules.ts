/** One sync and one audit schedule per source: a slow or failing source never delays another. */
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
 * Builds (does not start) one source's sync scheduler on `client`: a run waits for the migration
 * and tells the database's health what it learnt. Without a schedule: `0 0 1 1 *`, never started.
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
        const result = await runSync(
          sourceSyncDeps(config, source, {
            store: store.forSource(source.name, sourceLog, (wait) => observer.lockWaited?.(wait)),
            client,
            log: sourceLog,
            observer,
          }),
          {
            signal,
          },
        );
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
 * Reads `sync_windows_parked` from the ledger after a locked tick: a replica that always loses the
 * lock would otherwise keep its start's count, and fire the alert after the other loaded the window.
 */
async function refreshParked(o: { store: PgStore; source: string; metrics: ExporterMetrics; log: Logger }): Promise<void> {
  try {
    o.metrics.setParkedWindows(o.source, await o.store.session((session) => session.ledger(o.source).countParked()));
  } catch (err) {
    o.log.debug({ err }, 'the parked windows could not be read after a locked tick; the next tick tries again');
  }
}

/** Builds (does not start) one source's `verify --repair` on AUDIT_SCHEDULE; undefined when it is `off`. */
export function buildSourceAudit(context: SourceScheduleContext, source: SourceConfig, client: AnalyticsClient): SyncScheduler<AuditResult> | undefined {
  const { config, log, metrics, database } = context;
  const schedule = config.serve.auditSchedule;
  if (schedule === undefined) return undefined;
  const sourceLog = log.child({ source: source.name });
  const observer = metrics.syncObserver(source.name);
  metrics.auditScheduled(source.name);
  const run = async (signal: AbortSignal): Promise<AuditResult> => {
    const { store } = await database.migrated();
    const deps = sourceSyncDeps(config, source, {
      store: store.forSource(source.name, sourceLog, (wait) => observer.lockWaited?.(wait)),
      client,
      log: sourceLog,
      observer,
    });
    const result = await auditSource(deps, { repair: true, signal });
    metrics.recordAudit(source.name, result);
    return result;
  };
  return new SyncScheduler({ schedule, log: sourceLog, source: source.name, job: 'audit', run });
}
