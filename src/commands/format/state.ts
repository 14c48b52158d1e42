/** What `state set-watermark` and `state reset` print: what changed, and what the next run does. Pure text. */
import type { ReloadMarks, WatermarkMove } from '../../sync/store/ports.js';

/** `source production: watermark <before|none> -> <after>[; --force: …]; the next run plans from <after> minus SYNC_LOOKBACK`, with its newline. */
export function formatWatermarkMove(source: string, move: WatermarkMove): string {
  const before = move.before === undefined ? 'none' : new Date(move.before).toISOString();
  const after = new Date(move.after).toISOString();
  const skipped =
    move.skipped === undefined
      ? ''
      : `; --force: it moved past windows that are not loaded, the first [${new Date(move.skipped.start).toISOString()}, ${new Date(move.skipped.end).toISOString()})`;
  return `source ${source}: watermark ${before} -> ${after}${skipped}; the next run plans from ${after} minus SYNC_LOOKBACK\n`;
}

/** The windows marked for re-load in [from, to), and the expired ones left, with its newline. */
export function formatReloadMarks(source: string, range: { from: Date; to: Date }, marks: ReloadMarks): string {
  const asked = `[${range.from.toISOString()}, ${range.to.toISOString()})`;
  const expired = marks.expired === 0 ? '' : `; ${marks.expired} expired window(s) left as they are (sync --from/--to loads them)`;
  if (marks.windows.length === 0) return `source ${source}: no loaded window overlaps ${asked}; nothing marked${expired}\n`;
  const parked = marks.windows.filter((w) => w.status === 'parked').length;
  const first = new Date(marks.windows[0]!.start).toISOString();
  const last = new Date(marks.windows[marks.windows.length - 1]!.end).toISOString();
  return (
    `source ${source}: ${marks.windows.length} window(s) in [${first}, ${last}) marked for re-load (${parked} parked); ` +
    `the next sync of the source loads them again${expired}\n`
  );
}
