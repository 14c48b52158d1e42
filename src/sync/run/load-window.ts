/**
 * Storing one window in one transaction: cleared, each leaf page written as it comes, the derived
 * tables and the ledger last. Design: docs/design/sync-run.md, docs/design/keep-union.md.
 */
import { coerceError } from '../../errors.js';
import type { LoadContext, WindowJob } from './context.js';
import type { FieldChange } from './field-contract.js';
import { inexactCounts, mergeFields, mergeRollupCounts, uncatalogueRecords, type RollupCounts, type WindowFields } from '../derived/index.js';
import type { WindowWriter } from '../store/ports.js';
import { emptyTally, windowSummary, type ShrunkWindow, type WindowSummary, type WindowTally } from './summary.js';

/**
 * The reader forgets the window afterwards, whatever happened.
 * @throws what reading or the store throws (but a data refusal); the window then rolls back.
 */
export async function loadWindow(ctx: LoadContext, job: WindowJob): Promise<WindowSummary & { watermark: number | undefined }> {
  const started = performance.now();
  try {
    const { summary, fields } = await ctx.session.inWindow({ window: job.window, runId: ctx.runId }, (writer) => storeWindow(ctx, job, writer, started));
    ctx.contract?.committed(fields);
    return summary;
  } finally {
    ctx.reader.drop(job.index);
  }
}

/** @param started `performance.now()` when the load began. */
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
  // Quarantined records count: E6 still returns them.
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
  // The pages' counts hold the refused records and miss the kept ones.
  uncatalogueRecords(fields, stored.refused);
  const changes = ctx.contract?.changes(fields) ?? [];
  await writer.addDerived(stored.refused.length + kept > 0 ? inexactCounts() : rollup, fields, changes);
  const watermark = await writer.record({ recordCount: tally.records, totalRecords: tally.totalRecords - tally.boundary, pages: Math.max(1, tally.pages) });
  const contract = { changes, breaches: [...breaches.values()] };
  return { summary: windowSummary(window, tally, ctx.reader.stats(index), { started, shrunk, watermark, contract }), fields };
}

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
      // Here, where pages are written in window order (docs/design/derived-tables.md).
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
    // The store's own failure is earlier in order; what it has outstanding is stopped.
    throw (await writer.abort(coerceError(err))) ?? err;
  }
}
