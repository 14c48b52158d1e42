/**
 * A window that cannot be loaded never stalls its source. A window whose load fails for a reason
 * of its own ({@link isWindowFault}: its size, or E6 contradicting itself about it, each after the
 * reader's own attempts) is *parked* (parked.ts): kept in the ledger with the reason, the watermark
 * passes it, and the run goes on with the next windows. It is loud: a warning naming the window
 * and the reason, the gauge `analytics_exporter_sync_windows_parked{source}` (from the ledger at
 * each run's end), the run's `parked` count (`sync` then exits 1). A later load of the window (the
 * lookback, `sync --from/--to` over it, the audit) makes it committed.
 *
 * Outages are not the window's fault and still fail the run: network, timeouts, HTTP statuses,
 * bodies the client retries, the token (E0), the database, a signal.
 */
import { describeError, InconsistentWindowError, ResponseTooLargeError } from '../../errors.js';
import { failureReason } from '../../failures.js';
import type { LoadContext, WindowJob } from './context.js';
import { loadWindow } from './load-window.js';
import type { RunTally } from './report.js';
import type { ParkedEvent, WindowSummary } from './summary.js';
import { iso, type Window } from '../windows.js';

/**
 * Whether a window's load failed for a reason of its own, which parks it instead of failing the
 * run: an E6 answer over UPSTREAM_MAX_BODY even at one record a page of an instant (oversize.ts:
 * `response_too_large`, from E6 only), or E6 contradicting itself about the window after
 * SYNC_WINDOW_ATTEMPTS ({@link InconsistentWindowError}: an instant whose pairs of reads kept
 * disagreeing, page 1 of a part contradicting its envelope). Both are what the reader concluded
 * after its own attempts, so the window is not read again in the run.
 *
 * Body faults of one response (invalid JSON, an invalid envelope, a page inconsistent with
 * itself, an unknown coding) are not: the client retries them (UPSTREAM_MAX_ATTEMPTS) as a
 * truncation or a proxy's page, and they fail the run as before, like every outage (network,
 * timeouts, HTTP statuses, the token, the database, a signal).
 */
export function isWindowFault(err: unknown): boolean {
  return err instanceof InconsistentWindowError || (err instanceof ResponseTooLargeError && err.endpoint === 'analytics');
}

/**
 * Loads one window as load-window.ts does, and parks it when that fails for a reason of its own
 * ({@link isWindowFault}), telling the log, the observer and `tally`.
 *
 * @returns the committed (or kept) window's summary; undefined when it was parked.
 * @throws what loading throws that is not the window's fault, and what parking throws (the
 *   database's error).
 */
export async function loadOrPark(ctx: LoadContext, job: WindowJob, tally: RunTally): Promise<(WindowSummary & { watermark: number | undefined }) | undefined> {
  try {
    return await loadWindow(ctx, job);
  } catch (err) {
    if (!isWindowFault(err) || ctx.options.signal?.aborted) throw err;
    await park(ctx, job.window, err, tally);
    return undefined;
  }
}

/** Parks `window` for `err` in the ledger, and says so. */
async function park(ctx: LoadContext, window: Window, err: unknown, tally: RunTally): Promise<void> {
  const event: ParkedEvent = { window, reason: failureReason(err), error: describeError(err) };
  const watermark = await ctx.session.ledger.parkWindow({ window, runId: ctx.runId }, event.error);
  tally.park(watermark);
  const [from, to] = [iso(window.start), iso(window.end)];
  ctx.log.warn(
    { runId: ctx.runId, window: [from, to], reason: event.reason, error: event.error, watermark: watermark === undefined ? null : iso(watermark) },
    `window parked: it cannot be loaded for a reason of its own, and is kept in sync_windows as parked; the run goes on with the next windows. ` +
      `Load it with sync --from ${from} --to ${to} once the cause is gone` +
      (err instanceof ResponseTooLargeError ? ' (raise UPSTREAM_MAX_BODY)' : ''),
  );
  ctx.observer?.windowParked?.(event);
}

/**
 * Counts the source's parked windows in the ledger into `tally` at the run's end (for the gauge).
 * Never throws: a run that failed on the database leaves the count unknown.
 */
export async function countParked(ctx: LoadContext, tally: RunTally): Promise<void> {
  try {
    tally.parkedWindows = (await ctx.session.ledger.parkedWindows()).filter((w) => !w.expired).length;
  } catch {
    tally.parkedWindows = undefined;
  }
}
