/**
 * What a run tells the log and the observer: its start, each window, its end (also recorded in the
 * ledger). Design: docs/design/sync-run.md.
 */
import { AbortedError, coerceError, describeError } from '../../errors.js';
import type { LoadContext, RunContext } from './context.js';
import { describeChange, type FieldChange } from '../derived/fields/schema-changes.js';
import type { RunPlan } from './plan.js';
import type { FieldPlaces, RunEnding } from '../store/ports.js';
import type { RunStatus } from '../store/ports.js';
import type { SyncResult, WindowSummary } from './summary.js';
import { iso } from '../windows.js';

export function reportRunStarted(ctx: RunContext, runId: number, plan: RunPlan): void {
  const { range, windows, watermarkBefore } = plan;
  ctx.log.info(
    { runId, from: iso(range.start), to: iso(range.end), windows: windows.length, watermark: watermarkBefore === undefined ? null : iso(watermarkBefore) },
    'sync run started',
  );
  ctx.observer?.runStarted?.({ runId, windows });
}

export function reportWindow(ctx: LoadContext, summary: WindowSummary & { watermark: number | undefined }): void {
  const { log, observer, runId } = ctx;
  const window = [iso(summary.window.start), iso(summary.window.end)];
  // debug: a backfill commits hundreds of windows, and its progress lines (or the bar) say how it goes.
  log.debug(
    {
      runId,
      window,
      records: summary.records,
      totalRecords: summary.totalRecords,
      pages: summary.pages,
      replaced: summary.replaced,
      ...(summary.quarantined ? { quarantined: summary.quarantined } : {}),
      ...(summary.boundary ? { boundary: summary.boundary } : {}),
      ...(summary.outside ? { outside: summary.outside } : {}),
      ...(summary.untimed ? { untimed: summary.untimed } : {}),
      requests: summary.requests,
      ...(summary.splits ? { splits: summary.splits } : {}),
      ...(summary.instants ? { instants: summary.instants } : {}),
      durationMs: Math.round(summary.durationSeconds * 1000),
    },
    'window committed',
  );
  if (summary.short) {
    const { claimed, served } = summary.short;
    log.warn(
      { runId, window, claimed, served },
      "window short: E6's totalRecords claims more records than it serves, identically on every read; the records it serves are stored, " +
        'and the window is marked short in sync_windows (short_claimed, short_served). The audit (verify) checks it again',
    );
    observer?.windowShort?.(summary.short);
  }
  if (summary.shrunk) {
    const { stored: before, returned, kept, action } = summary.shrunk;
    log.warn(
      { runId, window, stored: before, returned, ...(kept === undefined ? {} : { kept }) },
      action === 'kept'
        ? 'E6 no longer returns some records stored for this window (retention or deletion upstream); they are kept beside what it returns now (SYNC_SHRINK=keep)'
        : 'E6 now returns fewer records for this window than were stored; they were replaced (SYNC_SHRINK=replace)',
    );
    observer?.windowShrunk?.(summary.shrunk);
  }
  const contract = summary.contract ?? 0;
  if (summary.quarantined > contract) {
    log.warn(
      { runId, window, quarantined: summary.quarantined - contract },
      'E6 returned records PostgreSQL cannot store; they are kept whole in records_quarantine (payload_text, with json_path and reason, or the sqlstate and message the database refused them with) and the rest of the window is committed',
    );
  }
  if (contract > 0) reportContract(ctx, window, contract, summary.contractBreaches ?? []);
  if (summary.quarantined > 0) observer?.recordsQuarantined?.({ window: summary.window, records: summary.quarantined });
  reportFieldChanges(ctx, summary);
  if (summary.outside > 0) {
    log.warn(
      { runId, window, outside: summary.outside },
      'E6 returned records whose RECORD_TIME_FIELD lies outside the window; they are kept, but check that the field is the event time E6 filters on',
    );
  }
  observer?.windowCommitted?.(summary);
}

/** A warning per run for each change refused under `freeze`, later refusals at debug. */
function reportContract(ctx: LoadContext, window: string[], records: number, breaches: readonly FieldChange[]): void {
  const first = ctx.contract?.firstBreaches(breaches) ?? [];
  const line = { runId: ctx.runId, window, quarantined: records, changes: breaches.map(describeChange) };
  if (first.length === 0) {
    ctx.log.debug(line, 'records bringing a new field or type were quarantined (FIELD_CONTRACT=freeze)');
    return;
  }
  ctx.log.warn(
    { ...line, changes: first.map(describeChange) },
    "records bringing a new top-level field or a new type of one are quarantined in records_quarantine (reason 'contract: …') and the rest of the window is committed (FIELD_CONTRACT=freeze); " +
      'set FIELD_CONTRACT=evolve and load the window again (sync --from --to) to store them',
  );
}

function reportFieldChanges(ctx: LoadContext, summary: WindowSummary): void {
  const changes = summary.fieldChanges ?? [];
  if (changes.length === 0) return;
  const window = [iso(summary.window.start), iso(summary.window.end)];
  for (const change of changes) {
    ctx.log.warn(
      { runId: ctx.runId, window, field: change.path, type: change.type, change: change.newField ? 'new field' : 'new type' },
      `the record schema changed: ${describeChange(change)} appeared in this source's records for the first time (record_fields, record_field_changes)`,
    );
  }
  ctx.observer?.fieldsChanged?.({ window: summary.window, changes });
}

/** The sums of a run's committed windows so far, and what ended it. */
export class RunTally {
  windows = 0;
  pages = 0;
  records = 0;
  quarantined = 0;
  fieldsNew = 0;
  parked = 0;
  short = 0;
  /** In the ledger at the end, for the gauge. */
  parkedWindows: number | undefined;
  /** The source's catalogue fields by their place in records_typed at the end, for the gauge. */
  fields: FieldPlaces | undefined;
  status: RunStatus = 'succeeded';
  error: Error | undefined;

  constructor(public watermark: number | undefined) {}

  add(summary: WindowSummary & { watermark: number | undefined }): void {
    this.windows++;
    this.pages += summary.pages;
    this.records += summary.records;
    this.quarantined += summary.quarantined;
    this.fieldsNew += summary.fieldChanges?.length ?? 0;
    if (summary.short) this.short++;
    this.watermark = summary.watermark;
  }

  park(watermark: number | undefined): void {
    this.parked++;
    this.watermark = watermark;
  }

  fail(thrown: unknown, signal: AbortSignal | undefined): void {
    this.error = coerceError(thrown);
    this.status = this.error instanceof AbortedError || signal?.aborted ? 'interrupted' : 'failed';
  }
}

/** For the gauge, at the run's end, with FIELD_CATALOGUE on. Never throws: a database failure leaves them unknown. */
export async function countFields(ctx: LoadContext, tally: RunTally): Promise<void> {
  if (!ctx.tables.rollup.catalogue) return;
  try {
    tally.fields = await ctx.session.maintenance.fieldPlaces();
  } catch {
    tally.fields = undefined;
  }
}

/**
 * @param run.started `performance.now()` when the run began.
 * @throws the database's error when the end cannot be recorded (after a failed run: on a fresh session either).
 */
export async function endRun(ctx: LoadContext, plan: RunPlan, run: { tally: RunTally; started: number }): Promise<SyncResult> {
  const { tally } = run;
  const { status, error, windows: committed, pages, records, quarantined, watermark, parked, parkedWindows, fieldsNew, fields, short } = tally;
  const durationSeconds = (performance.now() - run.started) / 1000;
  const ending: RunEnding = { status, windows: committed, pages, records, ...(error ? { error: describeError(error) } : {}) };
  try {
    await ctx.session.ledger.finishRun(ctx.runId, ending);
  } catch (recording) {
    // Its connection is gone: a fresh one, so the row does not stay `running`.
    if (error === undefined) throw recording;
    await ctx.store.session((fresh) => fresh.ledger.finishRun(ctx.runId, ending));
  }
  const windowsPlanned = plan.windows.length;
  const result: SyncResult = {
    status,
    runId: ctx.runId,
    range: plan.range,
    windowsPlanned,
    windows: committed,
    pages,
    records,
    quarantined,
    watermark,
    durationSeconds,
    ...(error ? { error } : {}),
    parked,
    ...(parkedWindows !== undefined ? { parkedWindows } : {}),
    ...(fieldsNew ? { fieldsNew } : {}),
    ...(fields ? { fields } : {}),
    ...(short ? { short } : {}),
  };
  const summaryLine = {
    runId: ctx.runId,
    status,
    windows: committed,
    windowsPlanned,
    pages,
    records,
    quarantined,
    ...(fieldsNew ? { fieldsNew } : {}),
    ...(parked ? { parked } : {}),
    ...(short ? { short } : {}),
    durationMs: Math.round(durationSeconds * 1000),
    recordsPerSecond: durationSeconds > 0 ? Math.round(records / durationSeconds) : 0,
    watermark: watermark === undefined ? null : iso(watermark),
    ...(error ? { err: error } : {}),
  };
  if (status === 'succeeded' && parked > 0)
    ctx.log.warn(
      summaryLine,
      `sync run succeeded but parked ${parked} window(s) it could not load (listed above): the data is not exact until they are loaded`,
    );
  else if (status === 'succeeded' && short > 0)
    ctx.log.warn(summaryLine, `sync run succeeded but found ${short} short window(s) (listed above): their records are stored, E6's count says it holds more`);
  else if (status === 'succeeded' && (parkedWindows ?? 0) > 0)
    ctx.log.warn(
      { ...summaryLine, parkedWindows },
      `sync run succeeded, but ${parkedWindows} window(s) parked by earlier runs are still not loaded: the data is not exact until they are`,
    );
  else if (status === 'succeeded') ctx.log[ctx.showsProgress ? 'debug' : 'info'](summaryLine, 'sync run succeeded');
  else if (status === 'interrupted') ctx.log.warn(summaryLine, 'sync run interrupted; committed windows are kept, the next run completes the data');
  else ctx.log.error(summaryLine, 'sync run failed; committed windows are kept, the next run completes the data');
  ctx.observer?.runFinished?.(result);
  return result;
}
