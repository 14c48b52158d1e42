/**
 * What `sync` prints for the person at the terminal: one summary line per run, written under the
 * last log line once the progress bar is cleared (src/commands/sync.ts). Pure text, no I/O.
 */
import { describeError } from '../../errors.js';
import type { SyncResult } from '../../sync/run/run.js';

/** Whole numbers with thousands separators, the same on every machine (`52,340`). */
const count = (n: number): string => n.toLocaleString('en-US');

/**
 * The run's summary for a person, one line, printed after the bar is cleared:
 * `sync succeeded: 24/24 windows, 52,340 records, 0 quarantined in 12.4 s (4,221 records/s)`
 * (`, 2 new fields or types` after the quarantined when the field catalogue gained some),
 * followed by `: <error>` when the run failed or was interrupted.
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
