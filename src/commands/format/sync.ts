/** What `sync` prints at a terminal once the bar is cleared: one summary line per run. Pure text. */
import { describeError } from '../../errors.js';
import type { SyncResult } from '../../sync/run/run.js';

/** Whole numbers with thousands separators, the same on every machine (`52,340`). */
const count = (n: number): string => n.toLocaleString('en-US');

/**
 * `sync succeeded: 24/24 windows, 52,340 records, 0 quarantined in 12.4 s (4,221 records/s)`, new
 * fields and parked windows when there are some, `: <error>` when the run failed or was interrupted.
 */
export function formatRunSummary(result: Exclude<SyncResult, { status: 'locked' }>): string {
  const seconds = result.durationSeconds;
  const rate = seconds > 0 ? Math.round(result.records / seconds) : 0;
  const text =
    `sync ${result.status}: ${count(result.windows)}/${count(result.windowsPlanned)} windows, ${count(result.records)} records, ` +
    `${count(result.quarantined)} quarantined${result.fieldsNew ? `, ${count(result.fieldsNew)} new fields or types` : ''}` +
    `${result.parked ? `, ${count(result.parked)} windows parked` : ''} in ${seconds.toFixed(1)} s (${count(rate)} records/s)`;
  return result.error === undefined ? text : `${text}: ${describeError(result.error)}`;
}

/** One source's summary line with its newline, named (`production: sync succeeded: …`) when several sources ran. */
export function formatSourceSummary(source: string, result: Exclude<SyncResult, { status: 'locked' }>, several: boolean): string {
  return `${several ? `${source}: ` : ''}${formatRunSummary(result)}\n`;
}
