/**
 * The plan of a run: its range (from the watermark, or `--from`/`--to`) and the windows to load in
 * it (windows.ts), leaving out expired windows, adding the windows `state reset` marked for re-load
 * (a resumed run only), and closing over committed and parked ones.
 */
import { InvalidArgumentError } from '../../errors.js';
import type { RunContext } from './context.js';
import type { StoreSession } from '../store/ports.js';
import { closeOverCommitted, iso, planWindows, runRange, subtractWindows, unionWindows, type Window } from '../windows.js';

/** What a run loads. */
export interface RunPlan {
  range: Window;
  /** The windows to load, disjoint, in time order. */
  windows: Window[];
  /** The watermark when the run started (ms), or undefined before the source's first window. */
  watermarkBefore: number | undefined;
}

/**
 * Plans the run at `now` (ms).
 *
 * @throws {InvalidArgumentError} when `--from` is not before the range's end, or the end is later
 *   than now minus SYNC_SETTLE (windows in the future would be committed empty).
 */
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
  // Loading windows that have not happened yet would move the watermark past data still to come.
  const latest = now - config.settleMs;
  if (range.end > latest) {
    throw new InvalidArgumentError(
      `--to ${iso(range.end)} is later than now minus SYNC_SETTLE (${iso(latest)}); windows in the future would be committed empty`,
    );
  }
  const aligned = planWindows(range.start, range.end, config.windowMs);
  // RETENTION dropped the records of expired windows on purpose: only an explicit --from reloads them.
  const resumed = aligned.length === 0 || options.from !== undefined ? aligned : subtractWindows(aligned, await session.ledger.expiredWindows(span(aligned)));
  // Windows `state reset` marked are loaded by the next resumed run wherever they lie before its
  // end (before the lookback too); an explicit --from loads its range only.
  const marked = options.from === undefined ? (await session.ledger.reloadWindows()).filter((w) => w.end <= range.end) : [];
  const planned = marked.length === 0 ? resumed : unionWindows(resumed, marked);
  // Parked windows too: a window planned over one replaces its ledger rows whole, as it replaces a
  // committed window's, and so loads it again (it then becomes committed).
  const ledger =
    planned.length === 0 ? [] : [...(await session.ledger.committedWindows(span(planned))), ...(await session.ledger.parkedWindows(span(planned)))];
  const windows = planned.length === 0 ? [] : closeOverCommitted(planned, ledger);
  // The run's row covers the marked windows it loads before its resumed range, from the start of
  // the window loading the first of them (widened over the ledger windows it overlaps). Nothing else
  // moves it: the resumed range starts at the watermark minus SYNC_LOOKBACK even when its first
  // window, aligned to SYNC_WINDOW, starts earlier.
  const firstMarked = marked.length === 0 ? undefined : Math.min(...marked.map((w) => w.start));
  const start =
    firstMarked === undefined || firstMarked >= range.start
      ? range.start
      : (windows.find((w) => w.start <= firstMarked && firstMarked < w.end)?.start ?? firstMarked);
  return { range: { start, end: range.end }, windows, watermarkBefore };
}

/** From the first window's start to the last one's end; `windows` is not empty. */
export function span(windows: readonly Window[]): Window {
  return { start: windows[0]!.start, end: windows[windows.length - 1]!.end };
}
