/**
 * The plan of a run: its now (the API's clock), its range (from the watermark, or `--from`/`--to`)
 * and its windows, without the expired ones, with those marked for re-load (a resumed run only),
 * widened over committed and parked ones. Design: docs/design/sync-run.md, docs/design/ledger.md,
 * docs/design/api-clock.md.
 */
import { AbortedError, InvalidArgumentError } from '../../errors.js';
import type { RunContext } from './context.js';
import type { StoreSession } from '../store/ports.js';
import { closeOverCommitted, iso, planWindows, runRange, subtractWindows, unionWindows, type Window } from '../windows.js';

export interface RunPlan {
  range: Window;
  /** Disjoint, in time order. */
  windows: Window[];
  /** ms; undefined before the source's first window. */
  watermarkBefore: number | undefined;
}

/**
 * The run's now, in epoch ms: `options.now` when given, else the API's clock (E6's `Date` header,
 * one request), else the local clock, said at info; the local clock when the run's signal aborts that request.
 */
export async function runNow(ctx: RunContext): Promise<number> {
  if (ctx.options.now !== undefined || ctx.e6.apiNow === undefined) return ctx.now();
  let apiNow: number | undefined;
  try {
    apiNow = await ctx.e6.apiNow(ctx.options.signal ? { signal: ctx.options.signal } : {});
  } catch (err) {
    // Interrupted: the run is still recorded, and ends as interrupted before its first window.
    if (err instanceof AbortedError) return ctx.now();
    throw err;
  }
  if (apiNow !== undefined) return apiNow;
  ctx.log.info("E6 answered with no Date header (or not at all): the run's now is the local clock");
  return ctx.now();
}

/** @throws {InvalidArgumentError} when `--from` is not before the range's end, or the end is later than `now` (ms) minus SYNC_SETTLE. */
export async function planRun(ctx: RunContext, session: StoreSession, now: number): Promise<RunPlan> {
  const { settings: config, options } = ctx;
  const watermarkBefore = await session.ledger.readWatermark();
  const range = runRange({
    from: options.from?.getTime(),
    to: options.to?.getTime(),
    watermark: watermarkBefore,
    startDate: config.startDate,
    lookbackMs: config.lookbackMs,
    settleMs: config.settleMs,
    now,
  });
  if (options.from !== undefined && range.start >= range.end) {
    throw new InvalidArgumentError(`--from ${iso(range.start)} must be before the end of the range ${iso(range.end)} (--to, or now minus SYNC_SETTLE)`);
  }
  const latest = now - config.settleMs;
  if (range.end > latest) {
    throw new InvalidArgumentError(
      `--to ${iso(range.end)} is later than now minus SYNC_SETTLE (${iso(latest)}); windows in the future would be committed empty`,
    );
  }
  const aligned = planWindows(range.start, range.end, config.windowMs);
  const resumed = aligned.length === 0 || options.from !== undefined ? aligned : subtractWindows(aligned, await session.ledger.expiredWindows(span(aligned)));
  const marked = options.from === undefined ? (await session.ledger.reloadWindows()).filter((w) => w.end <= range.end) : [];
  const planned = marked.length === 0 ? resumed : unionWindows(resumed, marked);
  // A window planned over a parked one replaces its rows whole, as a committed one's.
  const ledger =
    planned.length === 0 ? [] : [...(await session.ledger.committedWindows(span(planned))), ...(await session.ledger.parkedWindows(span(planned)))];
  const windows = planned.length === 0 ? [] : closeOverCommitted(planned, ledger);
  // The run's row starts earlier only for marked windows, never for the alignment to SYNC_WINDOW.
  const firstMarked = marked.length === 0 ? undefined : Math.min(...marked.map((w) => w.start));
  const start =
    firstMarked === undefined || firstMarked >= range.start
      ? range.start
      : (windows.find((w) => w.start <= firstMarked && firstMarked < w.end)?.start ?? firstMarked);
  return { range: { start, end: range.end }, windows, watermarkBefore };
}

/** `windows` is not empty. */
export function span(windows: readonly Window[]): Window {
  return { start: windows[0]!.start, end: windows[windows.length - 1]!.end };
}
