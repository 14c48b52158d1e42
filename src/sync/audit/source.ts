/**
 * One audit of one source (`verify`, and `serve`'s AUDIT_SCHEDULE): the ledger windows in range
 * (committed and parked) are compared with E6 (audit.ts), under the source's sync lock so no run commits meanwhile (and
 * the schema's, shared, so RETENTION does not expire a window meanwhile); with
 * `repair`, the windows that differ are then loaded again by a sync run over each stretch of them
 * (run.ts runSync with `from`/`to`: exactly as `sync` would, SYNC_SHRINK honoured, the source's
 * lock taken by the run). A parked window is loaded again by every audit with repair, whatever
 * the counts say. An audit of every retained window (no from/to) records its verified-through in
 * sync_state for `state show` (state.ts).
 */
import { coerceError } from '../../errors.js';
import { compareWithE6, contiguousRuns, type DriftedWindow } from './compare.js';
import { runContext, schemaLockName, sourceLockName, type SyncDeps } from '../run/context.js';
import { runSync } from '../run/run.js';
import type { SyncResult } from '../run/summary.js';
import { iso, type StoredWindow, type Window } from '../windows.js';

/** What an audit covers and does. */
export interface AuditOptions {
  /** Windows overlapping [from, to) are audited; default: every retained window (expired ones are not). */
  from?: Date;
  to?: Date;
  /** Load the windows that differ again (serve's audit always does). */
  repair: boolean;
  /** Stops the audit (and a repair run: its open window rolls back). */
  signal?: AbortSignal;
  /** The clock (ms since the epoch), for the repair runs. */
  now?: () => number;
}

/** What an audit of one source found and left. */
export interface AuditResult {
  /** Windows compared. */
  windows: number;
  /** Windows whose stored count differed from E6's, and the parked ones, in time order. */
  drifted: DriftedWindow[];
  /** Windows still differing after the audit: those not repaired, or whose repair run did not succeed or parked them again. */
  left: DriftedWindow[];
  /** E6 requests of the comparison (the repair runs' own requests not counted). */
  requests: number;
  /**
   * End of the latest audited window (ms) with no difference left in it or in any audited window
   * before it; undefined when none was audited or the first one differs.
   */
  verifiedThrough: number | undefined;
  /** The repair runs, one per stretch of contiguous windows that differ. */
  repairs: SyncResult[];
}

/** Whether an audit left the source as E6 has it (nothing differing). */
export function auditClean(result: AuditResult): boolean {
  return result.left.length === 0;
}

/** The widest range: every window. */
const ALL_TIME: Window = { start: 0, end: 8.64e15 };

/**
 * Audits `deps.source`: compares its ledger windows in range with E6 (audit.ts) and, with
 * `options.repair`, loads the windows that differ again. Waits for a sync run holding the source's
 * lock (ended by `options.signal`).
 *
 * @returns what was compared, found and left; `{ status: 'locked' }` never: the audit waits.
 * @throws what E6 throws after its retries while comparing (UpstreamError, TokenError),
 *   AbortedError on the signal, or the database's error (nothing is then repaired). A repair run
 *   that fails does not throw: its windows are left, and its result says why.
 */
export async function auditSource(deps: SyncDeps, options: AuditOptions): Promise<AuditResult> {
  const ctx = runContext(deps, {});
  const range: Window = { start: options.from?.getTime() ?? ALL_TIME.start, end: options.to?.getTime() ?? ALL_TIME.end };
  const lockOptions = { wait: true, ...(options.signal ? { signal: options.signal } : {}) };
  const compared = await ctx.store.session(async (session) => {
    // As a run holds them: the source's exclusively (no window of it commits meanwhile), the
    // schema's shared (RETENTION does not expire a window being compared).
    const locked = await session.lock(sourceLockName(ctx.schema, ctx.source), lockOptions, () =>
      session.lock(schemaLockName(ctx.schema), { ...lockOptions, shared: true }, async () => {
        const windows = await session.ledger.auditWindows(range);
        const against = ctx.settings.shrink === 'keep' ? 'seen' : 'stored';
        return { windows, comparison: await compareWithE6(ctx.e6, windows, { against, ...(options.signal ? { signal: options.signal } : {}) }) };
      }),
    );
    // Waiting (wait: true), a lock is always taken or the wait throws.
    if (!locked.acquired || !locked.value.acquired) throw new Error(`the locks of source ${ctx.source} were not taken`);
    return locked.value.value;
  });
  const { windows } = compared;
  const comparison = { ...compared.comparison, drifted: withParked(compared.comparison.drifted, windows) };
  for (const w of comparison.drifted) {
    const about = { window: [iso(w.start), iso(w.end)], stored: w.stored, upstream: w.upstream ?? null };
    ctx.log.warn(about, w.upstream === undefined ? 'audit: the window is parked; loading it again' : 'audit: the stored window differs from what E6 holds now');
  }
  const repairs: SyncResult[] = [];
  let left = comparison.drifted;
  if (options.repair && left.length > 0) {
    left = [];
    for (const stretch of contiguousRuns(comparison.drifted)) {
      // Stopped (shutdown, a signal): what is not repaired yet is left, and said so.
      if (options.signal?.aborted) {
        left.push(...stretch);
        continue;
      }
      const span = { start: stretch[0]!.start, end: stretch[stretch.length - 1]!.end };
      const { result, committed } = await repair(deps, span, options);
      if (result !== undefined) repairs.push(result);
      // A run that failed or was stopped keeps the windows it committed before: those are repaired.
      if (result?.status !== 'succeeded') left.push(...stretch.filter((w) => !committed.some((c) => c.start <= w.start && w.end <= c.end)));
      else if ((result.parked ?? 0) > 0) {
        // The run went on past windows it parked again: those are left.
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
  };
  // Of every retained window only: `state show` reads it as the source's verified-through.
  if (options.from === undefined && options.to === undefined) await ctx.store.session((session) => session.ledger.recordVerified(result.verifiedThrough));
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

/**
 * One repair run over `window` (a stretch of windows that differ): its result (undefined when it
 * threw before it could record a run) and the windows it committed, which stay committed when the
 * run then fails or is stopped.
 */
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

/** The windows that differ and the parked ones (every audit loads a parked window again), in time order. */
function withParked(drifted: readonly DriftedWindow[], windows: readonly StoredWindow[]): DriftedWindow[] {
  const found = new Set(drifted.map((w) => w.start));
  const parked = windows.filter((w) => w.parked && !found.has(w.start)).map((w) => ({ start: w.start, end: w.end, stored: w.stored, upstream: undefined }));
  return [...drifted, ...parked].sort((a, b) => a.start - b.start);
}

/** The end of the latest window with no difference left in it or before it. */
function verifiedThrough(windows: readonly StoredWindow[], left: readonly DriftedWindow[]): number | undefined {
  const firstLeft = left.length === 0 ? Number.POSITIVE_INFINITY : left[0]!.start;
  let through: number | undefined;
  for (const w of windows) {
    if (w.start >= firstLeft) break;
    through = w.end;
  }
  return through;
}
