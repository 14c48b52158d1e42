/**
 * A window that cannot be loaded never stalls its source. A window whose load fails for a reason
 * of its own ({@link isWindowFault}: its data or its size) is read again, up to
 * SYNC_WINDOW_ATTEMPTS loads in all, then *parked* (parked.ts): kept in the ledger with the reason,
 * the watermark passes it, and the run goes on with the next windows. It is loud: a warning naming
 * the window and the reason, the gauge `analytics_exporter_sync_windows_parked{source}` (from the
 * ledger at each run's end), the run's `parked` count (`sync` then exits 1). A later load of the
 * window (the lookback, `sync --from/--to` over it, the audit) makes it committed.
 *
 * Outages are not the window's fault and still fail the run: network, timeouts, HTTP statuses,
 * the token (E0), the database, a signal.
 */
import { describeError, InconsistentWindowError, UpstreamError, type FailureReason } from '../errors.js';
import { failureReason } from '../failures.js';
import type { LoadContext, WindowJob } from './context.js';
import { loadWindow } from './load-window.js';
import { openReader } from './read.js';
import type { RunTally } from './report.js';
import type { ParkedEvent, WindowSummary } from './summary.js';
import { iso } from './windows.js';

/**
 * Body faults of E6 that a window keeps giving after the client's retries (UPSTREAM_MAX_ATTEMPTS)
 * and the reader's (a part over UPSTREAM_MAX_BODY split down to one record a page, a page that
 * contradicts its envelope): a fault of what E6 holds for the window, not of the service.
 * `content_type`, `content_encoding` and `invalid_body` are left out: they say the service or a
 * proxy answers otherwise than E6 (an HTML error page, a coding the client cannot decode), for
 * every window alike.
 */
export const WINDOW_FAULT_REASONS: ReadonlySet<FailureReason> = new Set(['response_too_large', 'invalid_json', 'invalid_envelope', 'inconsistent_page']);

/**
 * Whether a window's load failed for a reason of its own (see {@link WINDOW_FAULT_REASONS}), or E6
 * contradicting itself about it ({@link InconsistentWindowError}): such a window is parked after
 * SYNC_WINDOW_ATTEMPTS instead of failing the run.
 */
export function isWindowFault(err: unknown): boolean {
  if (err instanceof InconsistentWindowError) return true;
  return err instanceof UpstreamError && err.endpoint === 'analytics' && err.code === 'ERR_UPSTREAM_BODY' && WINDOW_FAULT_REASONS.has(failureReason(err));
}

/**
 * Loads one window as load-window.ts does, again after a failure of its own, and parks it after
 * SYNC_WINDOW_ATTEMPTS such failures (telling the log, the observer and `tally`).
 *
 * @returns the committed (or kept) window's summary; undefined when it was parked.
 * @throws what loading throws that is not the window's fault ({@link isWindowFault}), and what
 *   parking throws (the database's error).
 */
export async function loadOrPark(ctx: LoadContext, job: WindowJob, tally: RunTally): Promise<(WindowSummary & { watermark: number | undefined }) | undefined> {
  const attempts = ctx.settings.windowAttempts;
  const window = [iso(job.window.start), iso(job.window.end)];
  let failure: unknown;
  for (let attempt = 1; attempt <= attempts; attempt++) {
    try {
      return attempt === 1 ? await loadWindow(ctx, job) : await loadAgain(ctx, job);
    } catch (err) {
      if (!isWindowFault(err) || ctx.options.signal?.aborted) throw err;
      failure = err;
      if (attempt < attempts) {
        ctx.log.warn(
          { runId: ctx.runId, window, attempt, maxAttempts: attempts, reason: failureReason(err), error: describeError(err) },
          'the window could not be loaded for a reason of its own data; reading it again (SYNC_WINDOW_ATTEMPTS)',
        );
      }
    }
  }
  const event: ParkedEvent = { window: job.window, reason: failureReason(failure), error: describeError(failure), attempts };
  const watermark = await ctx.session.parkWindow({ window: job.window, runId: ctx.runId }, event.error);
  tally.park(watermark);
  ctx.log.warn(
    { runId: ctx.runId, window, reason: event.reason, error: event.error, attempts, watermark: watermark === undefined ? null : iso(watermark) },
    `window parked: it could not be loaded after ${attempts} attempts (SYNC_WINDOW_ATTEMPTS) for a reason of its own, and is kept in sync_windows ` +
      `as parked; the run goes on with the next windows. Load it with sync --from ${window[0]} --to ${window[1]} once the cause is gone` +
      (event.reason === 'response_too_large' ? ' (raise UPSTREAM_MAX_BODY)' : ''),
  );
  ctx.observer?.windowParked?.(event);
  return undefined;
}

/** A load after a failed one: a reader of its own for the window (the run's reader dropped it). */
async function loadAgain(ctx: LoadContext, job: WindowJob): Promise<WindowSummary & { watermark: number | undefined }> {
  const reader = await openReader(ctx, ctx.session, { runId: ctx.runId, windows: [job.window] });
  try {
    return await loadWindow({ ...ctx, reader }, { window: job.window, index: 0 });
  } finally {
    reader.close();
  }
}

/**
 * Counts the source's parked windows in the ledger into `tally` at the run's end (for the gauge).
 * Never throws: a run that failed on the database leaves the count unknown.
 */
export async function countParked(ctx: LoadContext, tally: RunTally): Promise<void> {
  try {
    tally.parkedWindows = (await ctx.session.parkedWindows()).filter((w) => !w.expired).length;
  } catch {
    tally.parkedWindows = undefined;
  }
}
