/**
 * A window that cannot be loaded never stalls its source: one whose load fails for a reason of
 * its own is parked in the ledger, loudly, and the run goes on. Outages still fail the run.
 * Design: docs/design/ledger.md.
 */
import { describeError, ResponseTooLargeError } from '../../errors.js';
import { classifyFailure, failureReason } from '../../failures.js';
import type { LoadContext, WindowJob } from './context.js';
import { loadWindow } from './load-window.js';
import type { RunTally } from './report.js';
import type { ParkedEvent, WindowSummary } from './summary.js';
import { iso, type Window } from '../windows.js';

/**
 * Whether `err` is the window's own fault (src/failures.ts, `windowLocal`): an E6 answer over
 * UPSTREAM_MAX_BODY even at one record a page, E6 contradicting itself after SYNC_WINDOW_ATTEMPTS,
 * a paging limit at an instant, the window's request bound spent. Outages are not.
 */
export function isWindowFault(err: unknown): boolean {
  return classifyFailure(err).windowLocal;
}

/**
 * @returns the window's summary; undefined when it was parked.
 * @throws what loading throws that is not the window's fault; the database's error from parking.
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

/** For the gauge, at the run's end. Never throws: a database failure leaves the count unknown. */
export async function countParked(ctx: LoadContext, tally: RunTally): Promise<void> {
  try {
    tally.parkedWindows = (await ctx.session.ledger.parkedWindows()).filter((w) => !w.expired).length;
  } catch {
    tally.parkedWindows = undefined;
  }
}
