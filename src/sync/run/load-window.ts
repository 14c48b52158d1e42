/**
 * Storing one window in one transaction: its leaf pages read ahead into memory up to
 * SYNC_READ_AHEAD, then cleared, each page written in the order read, the derived tables and the
 * ledger last. Only a window over the bound has its transaction open while the rest is read.
 * Once every leaf of a window is taken, the next window's read-ahead begins (read-ahead.ts),
 * so it is read while this one is written: memory holds at most two windows' read-ahead (2 ×
 * SYNC_READ_AHEAD, a page more each) besides the reader's budgets.
 * Design: docs/design/sync-run.md, docs/design/keep-union.md.
 */
import { coerceError } from '../../errors.js';
import type { LoadContext, WindowJob } from './context.js';
import type { ReadAhead } from './read-ahead.js';
import type { FieldChange } from './field-contract.js';
import { inexactCounts, mergeFields, mergeRollupCounts, uncatalogueRecords, type RollupCounts, type WindowFields } from '../derived/index.js';
import type { PreparedPage } from '../read/prepare.js';
import type { Leaf } from '../read/reader.js';
import type { WindowWriter } from '../store/ports.js';
import { emptyTally, windowSummary, type ShrunkWindow, type WindowSummary, type WindowTally } from './summary.js';
import { iso } from '../windows.js';

/** Runs whose first window over SYNC_READ_AHEAD was logged at info; later ones go to debug. */
const streamedRuns = new WeakSet<LoadContext>();

/**
 * The reader forgets the window afterwards, whatever happened.
 * @throws what reading or the store throws (but a data refusal); the window then rolls back.
 */
export async function loadWindow(ctx: LoadContext, job: WindowJob): Promise<WindowSummary & { watermark: number | undefined }> {
  const started = performance.now();
  let ahead: ReadAhead | undefined;
  try {
    ahead = await ctx.readAheads.take(job, () => readAhead(ctx, job));
    const leaves = ahead;
    const read = (): void => ctx.readAheads.begin(job.index, (next) => readAhead(ctx, next));
    if (leaves.rest === undefined) read();
    else leaves.whenRead = read;
    const { summary, fields } = await ctx.session.inWindow({ window: job.window, runId: ctx.runId }, (writer) =>
      storeWindow(ctx, { job, leaves }, writer, started),
    );
    ctx.contract?.committed(fields);
    return summary;
  } finally {
    await ahead?.rest?.return();
    ctx.reader.drop(job.index);
  }
}

/**
 * The window's leaves in reading order until they hold SYNC_READ_AHEAD bytes of E6 bodies; past
 * that the rest is left to stream (logged). @throws what the reader throws; no transaction is open.
 */
async function readAhead(ctx: LoadContext, job: WindowJob): Promise<ReadAhead> {
  const leaves = ctx.reader.leaves(job.index);
  const held: Leaf<PreparedPage>[] = [];
  const limit = ctx.settings.readAheadBytes;
  let bytes = 0;
  while (bytes < limit) {
    const next = await leaves.next();
    if (next.done === true) return { held, rest: undefined };
    held.push(next.value);
    bytes += bodyBytes(next.value.page);
  }
  const first = !streamedRuns.has(ctx);
  streamedRuns.add(ctx);
  ctx.log[first ? 'info' : 'debug'](
    { runId: ctx.runId, window: [iso(job.window.start), iso(job.window.end)], pagesHeld: held.length, bytesHeld: bytes, readAheadBytes: limit },
    "window over SYNC_READ_AHEAD: its transaction opens now and stays open while the rest of its pages are read (a database's idle_in_transaction_session_timeout may end it); raise SYNC_READ_AHEAD to read it whole first",
  );
  return { held, rest: leaves };
}

/** Bytes of the E6 body a prepared page holds; a page not read from E6 (tests) by its records' JSON. */
function bodyBytes(page: PreparedPage): number {
  const rows = page.rows;
  return 'text' in rows ? (rows.bytes?.byteLength ?? rows.text.length) : JSON.stringify(rows.records).length;
}

/** The held leaves, each let go once taken, then the rest as the reader gives them. */
async function* inOrder(ahead: ReadAhead): AsyncGenerator<Leaf<PreparedPage>, void, undefined> {
  for (let leaf = ahead.held.shift(); leaf !== undefined; leaf = ahead.held.shift()) yield leaf;
  if (ahead.rest === undefined) return;
  yield* ahead.rest;
  ahead.whenRead?.();
}

/** @param started `performance.now()` when the load began. */
async function storeWindow(
  ctx: LoadContext,
  load: { job: WindowJob; leaves: ReadAhead },
  writer: WindowWriter,
  started: number,
): Promise<{ summary: WindowSummary & { watermark: number | undefined }; fields: WindowFields }> {
  const { window, index } = load.job;
  const keep = ctx.settings.shrink === 'keep';
  const tally = emptyTally();
  tally.replaced = await writer.clear(keep);
  const fields: WindowFields = new Map();
  const rollup: RollupCounts = { exact: true, hourly: new Map(), distinct: new Map() };
  const breaches = new Map<string, FieldChange>();
  const owned: string[] = [];
  await writeLeaves(ctx, load.leaves, writer, { tally, fields, rollup, breaches, owned });
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
  const served = tally.totalRecords - tally.boundary;
  const unserved = ctx.reader.stats(index).unserved;
  const watermark = await writer.record({
    recordCount: tally.records,
    totalRecords: served,
    pages: Math.max(1, tally.pages),
    ...(unserved > 0 ? { short: { claimed: served + unserved, served } } : {}),
  });
  const contract = { changes, breaches: [...breaches.values()] };
  return { summary: windowSummary(window, tally, ctx.reader.stats(index), { started, shrunk, watermark, contract }), fields };
}

async function writeLeaves(
  ctx: LoadContext,
  leaves: ReadAhead,
  writer: WindowWriter,
  into: { tally: WindowTally; fields: WindowFields; rollup: RollupCounts; breaches: Map<string, FieldChange>; owned: string[] },
): Promise<void> {
  const { tally, fields, rollup, breaches, owned } = into;
  const observer = ctx.observer;
  const stored = (records: number): void => observer?.pageLoaded?.({ records });
  const countRollup = (records: readonly unknown[], keep: readonly number[], times: readonly (number | null)[]) =>
    ctx.walk.observe(records, keep, times, false).rollup;
  try {
    for await (const leaf of inOrder(leaves)) {
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
