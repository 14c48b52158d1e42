/**
 * One audit of one source (`verify`, AUDIT_SCHEDULE): the ledger windows in range compared with E6
 * under the locks a run holds; with `repair`, each stretch of windows that differ (parked ones
 * always) loaded again by runSync. An audit of every retained window records its verified-through.
 * Design: docs/design/audit.md.
 */
import { coerceError } from '../../errors.js';
import { compareWithE6, contiguousRuns, type DriftedWindow } from './compare.js';
import { runContext, schemaLockName, sourceLockName, type SyncDeps } from '../run/context.js';
import { runSync } from '../run/run.js';
import type { SyncResult } from '../run/summary.js';
import { iso, type StoredWindow, type Window } from '../windows.js';

export interface AuditOptions {
  /** Default: every retained window. */
  from?: Date;
  to?: Date;
  repair: boolean;
  /** A repair run's open window rolls back. */
  signal?: AbortSignal;
  /** ms since the epoch, for the repair runs. */
  now?: () => number;
}

export interface AuditResult {
  windows: number;
  /** Differing windows and the parked ones, in time order. */
  drifted: DriftedWindow[];
  /** Still differing: not repaired, or the repair run failed or parked them again. */
  left: DriftedWindow[];
  /** Of the comparison; the repair runs' not counted. */
  requests: number;
  /** ms; undefined when none was audited or the first one differs. */
  verifiedThrough: number | undefined;
  /** One per stretch of contiguous windows that differ. */
  repairs: SyncResult[];
  /** Windows committed short, as the ledger held them before any repair (docs/design/ledger.md). */
  short?: (Window & { claimed: number; served: number })[];
}

const ALL_TIME: Window = { start: 0, end: 8.64e15 };

/**
 * Waits for a run holding the source's lock (ended by `options.signal`).
 * @throws what E6 throws after its retries while comparing (UpstreamError, TokenError), AbortedError,
 *   or the database's error; nothing is repaired then. A failing repair run does not throw.
 */
export async function auditSource(deps: SyncDeps, options: AuditOptions): Promise<AuditResult> {
  const ctx = runContext(deps, {});
  const range: Window = { start: options.from?.getTime() ?? ALL_TIME.start, end: options.to?.getTime() ?? ALL_TIME.end };
  const lockOptions = { wait: true, ...(options.signal ? { signal: options.signal } : {}) };
  const compared = await ctx.store.session(async (session) => {
    // As a run holds them: no window commits or expires meanwhile.
    const locked = await session.lock(sourceLockName(ctx.schema, ctx.source), lockOptions, () =>
      session.lock(schemaLockName(ctx.schema), { ...lockOptions, shared: true }, async () => {
        const windows = await session.ledger.auditWindows(range);
        const against = ctx.settings.shrink === 'keep' ? 'seen' : 'stored';
        return { windows, comparison: await compareWithE6(ctx.e6, windows, { against, ...(options.signal ? { signal: options.signal } : {}) }) };
      }),
    );
    if (!locked.acquired || !locked.value.acquired) throw new Error(`the locks of source ${ctx.source} were not taken`);
    return locked.value.value;
  });
  const { windows } = compared;
  const comparison = { ...compared.comparison, drifted: withParked(compared.comparison.drifted, windows) };
  for (const w of comparison.drifted) {
    const about = { window: [iso(w.start), iso(w.end)], stored: w.stored, upstream: w.upstream ?? null };
    ctx.log.warn(about, w.upstream === undefined ? 'audit: the window is parked; loading it again' : 'audit: the stored window differs from what E6 holds now');
  }
  const short = windows.flatMap((w) => (w.short === undefined ? [] : [{ start: w.start, end: w.end, ...w.short }]));
  for (const w of short) {
    ctx.log.warn(
      { window: [iso(w.start), iso(w.end)], claimed: w.claimed, served: w.served },
      "audit: the window is short: E6's count claimed more records than it served when it was loaded; what it served is stored",
    );
  }
  const repairs: SyncResult[] = [];
  let left = comparison.drifted;
  if (options.repair && left.length > 0) {
    left = [];
    for (const stretch of contiguousRuns(comparison.drifted)) {
      if (options.signal?.aborted) {
        left.push(...stretch);
        continue;
      }
      const span = { start: stretch[0]!.start, end: stretch[stretch.length - 1]!.end };
      const { result, committed } = await repair(deps, span, options);
      if (result !== undefined) repairs.push(result);
      // A run that failed or was stopped keeps the windows it committed.
      if (result?.status !== 'succeeded') left.push(...stretch.filter((w) => !committed.some((c) => c.start <= w.start && w.end <= c.end)));
      else if ((result.parked ?? 0) > 0) {
        const parked = await ctx.store.session((session) => session.ledger.parkedWindows(span));
        left.push(...stretch.filter((w) => parked.some((p) => p.start < w.end && w.start < p.end)));
      }
    }
  }
  const result: AuditResult = {
    windows: comparison.windows,
    drifted: comparison.drifted,
    left,
    requests: comparison.requests,
    verifiedThrough: verifiedThrough(windows, left),
    repairs,
    short,
  };
  if (options.from === undefined && options.to === undefined) await recordVerified(ctx, result.verifiedThrough);
  const summary = { windows: result.windows, drifted: result.drifted.length, left: left.length, requests: result.requests };
  const stopped = options.signal?.aborted === true;
  if (left.length > 0)
    ctx.log.warn(
      summary,
      stopped
        ? 'audit: stopped by a signal during the repairs; the windows left still differ from E6 (run verify --repair again)'
        : options.repair
          ? 'audit: windows still differ from E6 after their repair'
          : 'audit: windows differ from E6',
    );
  else ctx.log.info(summary, result.drifted.length > 0 ? 'audit: the windows that differed from E6 were loaded again' : 'audit: the stored windows match E6');
  return result;
}

/** `result` undefined when the run threw before it was recorded; `committed` stay committed whatever follows. */
async function repair(deps: SyncDeps, window: Window, options: AuditOptions): Promise<{ result: SyncResult | undefined; committed: Window[] }> {
  const committed: Window[] = [];
  const observer = deps.observer;
  const watched: SyncDeps = {
    ...deps,
    observer: {
      ...observer,
      windowCommitted: (summary) => {
        committed.push(summary.window);
        observer?.windowCommitted?.(summary);
      },
    },
  };
  try {
    const result = await runSync(watched, {
      from: new Date(window.start),
      to: new Date(window.end),
      wait: true,
      retention: false,
      ...(options.signal ? { signal: options.signal } : {}),
      ...(options.now ? { now: options.now } : {}),
    });
    return { result, committed };
  } catch (err) {
    deps.log.error({ window: [iso(window.start), iso(window.end)], err: coerceError(err) }, 'audit: the repair of the windows could not run');
    return { result: undefined, committed };
  }
}

/** In time order. */
function withParked(drifted: readonly DriftedWindow[], windows: readonly StoredWindow[]): DriftedWindow[] {
  const found = new Set(drifted.map((w) => w.start));
  const parked = windows.filter((w) => w.parked && !found.has(w.start)).map((w) => ({ start: w.start, end: w.end, stored: w.stored, upstream: undefined }));
  return [...drifted, ...parked].sort((a, b) => a.start - b.start);
}

function verifiedThrough(windows: readonly StoredWindow[], left: readonly DriftedWindow[]): number | undefined {
  const firstLeft = left.length === 0 ? Number.POSITIVE_INFINITY : left[0]!.start;
  let through: number | undefined;
  for (const w of windows) {
    if (w.start >= firstLeft) break;
    through = w.end;
  }
  return through;
}

/** A role with SELECT alone (42501), or a read-only database (25006), audits without recording its verified-through. */
async function recordVerified(ctx: { store: SyncDeps['store']; log: SyncDeps['log'] }, through: number | undefined): Promise<void> {
  try {
    await ctx.store.session((session) => session.ledger.recordVerified(through));
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    if (code !== '42501' && code !== '25006') throw err;
    ctx.log.warn({ err }, 'audit: verified-through not recorded: this role may not update sync_state, or the database is read-only');
  }
}
