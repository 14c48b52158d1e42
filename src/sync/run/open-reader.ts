/** The window reader (src/sync/read/) set up with a run's settings and what the ledger knows (docs/design/sync-run.md). */
import type { RunContext } from './context.js';
import { span } from './plan.js';
import type { StoreSession } from '../store/ports.js';
import { preparePage, type PageRules, type PreparedPage } from '../read/prepare.js';
import { WindowReader } from '../read/reader.js';
import { RecordEstimate } from '../read/slices.js';
import { iso, recordTime, type Window } from '../windows.js';

/** Nothing is requested before the first window is loaded; close it when the run ends. */
export async function openReader(
  ctx: RunContext,
  session: StoreSession,
  run: { runId: number; windows: readonly Window[] },
): Promise<WindowReader<PreparedPage>> {
  const { settings: config, log, observer, options } = ctx;
  const { runId, windows } = run;
  const timeField = config.recordTimeField;
  const rules: PageRules = { timeField, walk: ctx.walk, catalogue: ctx.tables.rollup.catalogue };
  // Committed windows in and just before the run: their counts plan slices, their ends tell which
  // run window has a window before it that keeps its start's boundary set. A parked window keeps
  // its end's too: it is loaded later (park.ts), and the window after it must not hold them meanwhile.
  const range = windows.length === 0 ? undefined : span(windows);
  const ledger = range === undefined ? [] : await session.ledger.ledgerCounts(range);
  const parked = range === undefined ? [] : await session.ledger.parkedWindows({ start: range.start - 1, end: range.end });
  return new WindowReader(ctx.e6, windows, {
    pageSize: config.pageSize,
    concurrency: config.concurrency,
    minSplitMs: config.minSplitMs,
    instantAttempts: config.windowAttempts,
    maxRequests: config.windowMaxRequests,
    prepare: (page, place) => preparePage(rules, page, place),
    toDate: config.toDate,
    committedEnds: new Set([...ledger, ...parked].map((w) => w.end)),
    heldBefore: (cut, boundarySet) => session.ledger.heldAtEnd(cut, boundarySet),
    timesOf: (prepared) => prepared.rows.eventTimes,
    eventTime: (record) => (timeField ? recordTime(record, timeField) : undefined),
    estimate: new RecordEstimate(ledger),
    onPageSizeClamped: (event) => {
      log.warn(
        { runId, pageSizeAsked: event.asked, pageSizeServed: event.served, pageSizeEchoed: event.echoed },
        'E6 served fewer records on a page than the page size asked and its totalRecords held: the page was not taken as complete, and this run reads at the size served',
      );
      observer?.pageSizeClamped?.(event);
    },
    onUnstableInstant: (event) => {
      log.warn(
        {
          runId,
          instant: [iso(event.instant.start), iso(event.instant.end)],
          records: event.records,
          attempt: event.attempt,
          maxAttempts: config.windowAttempts,
        },
        'two reads of an instant holding more than a page returned different records (E6 order not stable); reading it again',
      );
      observer?.unstableInstant?.(event);
    },
    onRepeatedPages: (event) => {
      const stored = event.outcome === 'stored';
      log.warn(
        {
          runId,
          window: [iso(event.window.start), iso(event.window.end)],
          instant: [iso(event.range.start), iso(event.range.end)],
          pageSize: event.pageSize,
          repeatedPages: event.repeated.slice(0, 20).map((r) => [r.page, r.copyOf]),
          repeated: event.repeated.length,
          otherPageSize: event.otherPageSize,
          outcome: event.outcome,
        },
        stored
          ? 'pages repeat: E6 pages of an instant copied earlier pages [page, copyOf] record for record; read again at another page size the records line up, so they really repeat and are stored as often as E6 holds them'
          : 'pages repeat: E6 pages of an instant copied earlier pages [page, copyOf] record for record, and read again at another page size it answered other records: E6 (or a proxy) ignores pageNumber; no copy is stored and the window is parked',
      );
      observer?.repeatedPages?.(event);
    },
    ...(options.signal ? { signal: options.signal } : {}),
  });
}
