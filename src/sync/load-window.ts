/**
 * Storing one window: in one transaction of the store, what was stored for it is cleared, every
 * leaf page the reader gives is written as it comes, the derived tables get the window's counts,
 * and the ledger records it (advancing the watermark). A window that E6 now returns with fewer
 * records than are stored is kept as stored under SYNC_SHRINK=keep (the transaction rolled back).
 */
import { coerceError } from '../errors.js';
import type { LoadContext, WindowJob } from './context.js';
import { mergeFields, mergeRollupCounts, type RollupCounts, type WindowFields } from './derived.js';
import type { WindowWriter } from './ports.js';
import { emptyTally, windowSummary, type ShrunkWindow, type WindowSummary, type WindowTally } from './summary.js';

/** Thrown inside a window's transaction to roll it back when a shrunk window is kept. */
class KeepStoredWindow extends Error {
  constructor(readonly shrunk: ShrunkWindow) {
    super('window kept');
  }
}

/**
 * Loads one window; a shrunk window kept as stored (SYNC_SHRINK=keep) comes back as a summary of
 * nothing committed. The reader forgets the window afterwards, whatever happened.
 *
 * @throws what reading the window throws (E6 faults, an instant whose reads kept disagreeing) or
 *   what the store throws; the window is then rolled back whole.
 */
export async function loadWindow(ctx: LoadContext, job: WindowJob): Promise<WindowSummary & { watermark: number | undefined }> {
  const started = performance.now();
  try {
    return await ctx.session.inWindow({ window: job.window, runId: ctx.runId }, (writer) => storeWindow(ctx, job, writer, started));
  } catch (err) {
    if (!(err instanceof KeepStoredWindow)) throw err;
    // Rolled back: the rows and the ledger entry stored before are as they were.
    const tally = { ...emptyTally(), totalRecords: err.shrunk.returned };
    const watermark = await ctx.session.readWatermark();
    return windowSummary(job.window, tally, ctx.reader.stats(job.index), { started, shrunk: err.shrunk, watermark });
  } finally {
    ctx.reader.drop(job.index);
  }
}

/**
 * The window's transaction: any throw rolls it back whole, {@link KeepStoredWindow} included.
 *
 * @param started `performance.now()` when the window's load began.
 */
async function storeWindow(
  ctx: LoadContext,
  job: WindowJob,
  writer: WindowWriter,
  started: number,
): Promise<WindowSummary & { watermark: number | undefined }> {
  const { window, index } = job;
  const tally = emptyTally();
  tally.replaced = await writer.clear();
  const fields: WindowFields = new Map();
  const rollup: RollupCounts = { exact: true, hourly: new Map(), distinct: new Map() };
  await writeLeaves(ctx, job, writer, { tally, fields, rollup });
  tally.records = await writer.end();
  // Quarantined records count as stored for the shrink check: E6 still returns them.
  const shrunk: ShrunkWindow | undefined =
    tally.records + tally.quarantined < tally.replaced
      ? { window, stored: tally.replaced, returned: tally.records, action: ctx.settings.shrink === 'keep' ? 'kept' : 'replaced' }
      : undefined;
  if (shrunk?.action === 'kept') throw new KeepStoredWindow(shrunk);
  await writer.addDerived(rollup, fields);
  const watermark = await writer.record({ recordCount: tally.records, totalRecords: tally.totalRecords, pages: Math.max(1, tally.pages) });
  return windowSummary(window, tally, ctx.reader.stats(index), { started, shrunk, watermark });
}

/** Writes each leaf of the window as it comes, counting it into `into`. */
async function writeLeaves(
  ctx: LoadContext,
  job: WindowJob,
  writer: WindowWriter,
  into: { tally: WindowTally; fields: WindowFields; rollup: RollupCounts },
): Promise<void> {
  const { tally, fields, rollup } = into;
  const observer = ctx.observer;
  const stored = (records: number): void => observer?.pageLoaded?.({ records });
  try {
    for await (const leaf of ctx.reader.leaves(job.index)) {
      const page = leaf.page;
      tally.pages++;
      tally.totalRecords += page.length;
      tally.boundary += page.boundary;
      tally.outside += page.outside;
      tally.untimed += page.untimed;
      mergeFields(fields, page.fields);
      if (page.rollup !== undefined) mergeRollupCounts(rollup, page.rollup);
      tally.quarantined += page.quarantine.length;
      await writer.write(page.rows, page.quarantine, stored);
    }
  } catch (err) {
    // The store's own failure (earlier in order) wins over a read failure; what it has outstanding
    // is stopped, so the window can roll back.
    throw (await writer.abort(coerceError(err))) ?? err;
  }
}
