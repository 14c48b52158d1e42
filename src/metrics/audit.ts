/** The metrics of the audit inside serve (AUDIT_SCHEDULE), per source; a one-shot `verify` serves none. */
import { Counter, Gauge, type Registry } from 'prom-client';
import type { AuditResult } from '../sync/audit/source.js';

export class AuditMetrics {
  readonly verifiedThrough: Gauge<'source'>;
  readonly driftWindows: Gauge<'source'>;
  readonly repairedWindows: Counter<'source'>;
  readonly requests: Counter<'source'>;
  readonly lastRun: Gauge<'source'>;

  constructor(registry: Registry, prefix: string) {
    this.verifiedThrough = new Gauge({
      name: `${prefix}sync_verified_through_timestamp_seconds`,
      help: "Unix time up to which the last audit found the stored windows equal to E6's counts (after its repairs), from the oldest window kept.",
      labelNames: ['source'] as const,
      registers: [registry],
    });
    this.driftWindows = new Gauge({
      name: `${prefix}audit_drift_windows`,
      help: "Windows whose stored records still differed from E6's count after the last audit and its repairs (0: none left).",
      labelNames: ['source'] as const,
      registers: [registry],
    });
    this.repairedWindows = new Counter({
      name: `${prefix}audit_windows_repaired_total`,
      help: 'Windows the audits found differing from E6 and loaded again.',
      labelNames: ['source'] as const,
      registers: [registry],
    });
    this.requests = new Counter({
      name: `${prefix}audit_requests_total`,
      help: "E6 requests of the audits' comparisons (the repair runs' requests not counted).",
      labelNames: ['source'] as const,
      registers: [registry],
    });
    this.lastRun = new Gauge({
      name: `${prefix}audit_last_run_timestamp_seconds`,
      help: 'Unix time at which the last audit of the source finished its comparison (and repairs).',
      labelNames: ['source'] as const,
      registers: [registry],
    });
  }

  /** The source's series at 0 before its first audit. */
  scheduled(source: string): void {
    this.driftWindows.set({ source }, 0);
    this.repairedWindows.inc({ source }, 0);
    this.requests.inc({ source }, 0);
  }

  /** One audit of `source` finished. */
  record(source: string, result: AuditResult): void {
    this.requests.inc({ source }, result.requests);
    this.repairedWindows.inc({ source }, result.drifted.length - result.left.length);
    this.driftWindows.set({ source }, result.left.length);
    if (result.verifiedThrough !== undefined) this.verifiedThrough.set({ source }, result.verifiedThrough / 1000);
    this.lastRun.set({ source }, Date.now() / 1000);
  }
}
