/**
 * Storing one window: in one transaction of the store, what was stored for it is cleared, every
 * leaf page the reader gives is written as it comes, the derived tables get the window's counts,
 * and the ledger records it (advancing the watermark). Records the database refuses are
 * quarantined by the store. Under SYNC_SHRINK=keep a re-read window holds the multiset union of
 * what was stored and what E6 returns now; under `replace`, what E6 returns now.
 */
import { coerceError } from '../../errors.js';
import type { LoadContext, WindowJob } from './context.js';
import type { FieldChange } from './field-contract.js';
import { inexactCounts, mergeFields, mergeRollupCounts, uncatalogueRecords, type RollupCounts, type WindowFields } from '../derived/index.js';
import type { WindowWriter } from '../store/ports.js';
import { emptyTally, windowSummary, type ShrunkWindow, type WindowSummary, type WindowTally } from './summary.js';

/**
 * Loads one window. The reader forgets the window afterwards, whatever happened.
 *
 * @throws what reading the window throws (E6 faults, an instant whose reads kept disagreeing) or
 *   what the store throws (but a data refusal, quarantined); the window is then rolled back whole.
 */
export async function loadWindow(ctx: LoadContext, job: WindowJob): Promise<WindowSummary & { watermark: number | undefined }> {
  const started = performance.now();
  try {
    const { summary, fields } = await ctx.session.inWindow({ window: job.window, runId: ctx.runId }, (writer) => storeWindow(ctx, job, writer, started));
    // Committed: the catalogue holds the window's fields now (a rolled-back window adds none).
    ctx.contract?.committed(fields);
    return summary;
  } finally {
    ctx.reader.drop(job.index);
  }
}

/**
 * The window's transaction: any throw rolls it back whole.
 *
 * @param started `performance.now()` when the window's load began.
 */
async function storeWindow(
  ctx: LoadContext,
  job: WindowJob,
  writer: WindowWriter,
  started: number,
): Promise<{ summary: WindowSummary & { watermark: number | undefined }; fields: WindowFields }> {
  const { window, index } = job;
  const keep = ctx.settings.shrink === 'keep';
  const tally = emptyTally();
  tally.replaced = await writer.clear(keep);
  const fields: WindowFields = new Map();
  const rollup: RollupCounts = { exact: true, hourly: new Map(), distinct: new Map() };
  const breaches = new Map<string, FieldChange>();
  const owned: string[] = [];
  await writeLeaves(ctx, job, writer, { tally, fields, rollup, breaches, owned });
  const stored = await writer.end(owned);
  // What this read returned; quarantined records count as stored: E6 still returns them.
  const returned = stored.records + tally.quarantined + stored.refused.length;
  const kept = stored.kept.records + stored.kept.quarantined;
  tally.records = stored.records + stored.kept.records;
  tally.quarantined += stored.refused.length + stored.kept.quarantined;
  const shrunk: ShrunkWindow | undefined = keep
    ? kept > 0
      ? { window, stored: tally.replaced, returned, kept, action: 'kept' }
      : undefined
    : returned < tally.replaced
      ? { window, stored: tally.replaced, returned, action: 'replaced' }
      : undefined;
  // The pages' counts hold the refused records and miss the kept ones: the store groups its rows then.
  uncatalogueRecords(fields, stored.refused);
  // What the catalogue gains (judged before its commit, against the catalogue as of the window's start).
  const changes = ctx.contract?.changes(fields) ?? [];
  await writer.addDerived(stored.refused.length + kept > 0 ? inexactCounts() : rollup, fields, changes);
  const watermark = await writer.record({ recordCount: tally.records, totalRecords: tally.totalRecords - tally.boundary, pages: Math.max(1, tally.pages) });
  const contract = { changes, breaches: [...breaches.values()] };
  return { summary: windowSummary(window, tally, ctx.reader.stats(index), { started, shrunk, watermark, contract }), fields };
}

/** Writes each leaf of the window as it comes, counting it into `into`. */
async function writeLeaves(
  ctx: LoadContext,
  job: WindowJob,
  writer: WindowWriter,
  into: { tally: WindowTally; fields: WindowFields; rollup: RollupCounts; breaches: Map<string, FieldChange>; owned: string[] },
): Promise<void> {
  const { tally, fields, rollup, breaches, owned } = into;
  const observer = ctx.observer;
  const stored = (records: number): void => observer?.pageLoaded?.({ records });
  const countRollup = (records: readonly unknown[], keep: readonly number[], times: readonly (number | null)[]) =>
    ctx.walk.observe(records, keep, times, false).rollup;
  try {
    for await (const leaf of ctx.reader.leaves(job.index)) {
      // FIELD_CONTRACT=freeze: here, where pages are written in window order, not where they are
      // prepared ahead of the windows before them (contract.ts says why).
      const frozen = ctx.contract?.freeze(leaf.page, countRollup);
      const page = frozen?.page ?? leaf.page;
      if (frozen !== undefined && frozen.refused > 0) {
        tally.contract += frozen.refused;
        for (const b of frozen.breaches) breaches.set(`${b.path}\t${b.type}`, b);
      }
      tally.pages++;
      tally.totalRecords += page.length;
      tally.boundary += page.boundary;
      owned.push(...page.owned);
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
