/**
 * E6 (`GET /analytics`) and E7 (`GET /analytics/prometheus`) over a dataset: one page of records
 * in the envelope of the reference (E6), or the counts of a range as Prometheus text (E7), with
 * the body faults (late arrivals, every-Nth malformed JSON, the queued page faults) applied.
 */
import type http from 'node:http';
import type { PageSizeEcho } from './behaviours.js';
import type { Dataset } from './dataset.js';
import type { RecordOrder } from './order.js';
import { intParam, rangeParams } from './params.js';
import { EVENT_TYPES } from './records.js';
import type { Responder } from './respond.js';
import { DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, type FaultSettings, type QueuedFault } from './settings.js';
import type { RecordView } from './view.js';

/** Escapes an E7 label value for the Prometheus text format 0.0.4: backslash, double quote and line feed. */
export function escapeLabelValue(value: string): string {
  return value.replace(/[\\"\n]/g, (c) => (c === '\\' ? '\\\\' : c === '"' ? '\\"' : '\\n'));
}

/**
 * The range-dependent faults of an E6 request for `[from, to]`: the first entry of
 * `faults.inRanges` overlapping it, else the settings for every request.
 */
function rangeFaults(faults: FaultSettings, from: Date, to: Date): { ignorePageNumber: boolean; totalRecordsExtra: number } {
  const hit = faults.inRanges.find((r) => r.from.getTime() <= to.getTime() && from.getTime() <= r.to.getTime());
  return {
    ignorePageNumber: hit?.ignorePageNumber ?? faults.ignorePageNumber,
    totalRecordsExtra: hit?.totalRecordsExtra ?? faults.totalRecordsExtra,
  };
}

/** E7 metric family of an event type: `UserLogin` → `userlogin_event_count`. */
export function metricName(eventType: string): string {
  return `${eventType.toLowerCase()}_event_count`;
}

/** What the E6 and E7 handlers read of their simulator. */
export interface DataContext {
  dataset: Dataset;
  /** Serves instead of the dataset while {@link RecordView.active} (deletions, hidden filter time, out-of-range numbers). */
  view: RecordView;
  /** 0 = none; see `SimulatorOptions.pageSizeCap`. */
  pageSizeCap: number;
  pageSizeCapEcho: PageSizeEcho;
  /** Read at each request: the live settings. */
  faults: FaultSettings;
  /** Whether a record exactly at `toDate` is in the range. */
  toInclusive: boolean;
  prometheusHelp: boolean;
  /** The live order of E6 records. */
  order: () => RecordOrder;
  /** Draws each E6 request's order. */
  orderRandom: () => number;
  /** Counts one more occurrence of a periodic fault's setting; restarts when the setting changes. */
  tick: (name: string, setting: unknown) => number;
  /** True on every Nth call for `name` (never when `every` is 0). */
  everyNth: (name: string, every: number) => boolean;
  /** Records which fault a response got, for `onRequest`. */
  markInjected: (res: http.ServerResponse, fault: string) => void;
  respond: Responder;
}

/** The E6 and E7 handlers of one simulator. */
export class DataEndpoints {
  readonly #c: DataContext;

  constructor(context: DataContext) {
    this.#c = context;
  }

  /**
   * Answers one E6 request.
   *
   * @param gzip compress the body.
   * @throws {ParameterError} for an invalid query parameter (answered 400 by the caller).
   */
  analytics(url: URL, res: http.ServerResponse, queued: QueuedFault | undefined, gzip = false): void {
    const { dataset, toInclusive, faults, view } = this.#c;
    const params = url.searchParams;
    const pageNumber = intParam(params, 'pageNumber', 1, 1, Number.MAX_SAFE_INTEGER);
    const asked = intParam(params, 'pageSize', DEFAULT_PAGE_SIZE, 1, MAX_PAGE_SIZE);
    // A capped upstream serves and cuts pages at its own size, whatever its envelope says.
    const cap = this.#c.pageSizeCap;
    const pageSize = cap > 0 && asked > cap ? cap : asked;
    const echoed = this.#c.pageSizeCapEcho === 'asked' ? asked : pageSize;
    const { from, to } = rangeParams(params, true);

    const arrivals = faults.arrivals;
    if (arrivals !== undefined && this.#c.tick('arrivals', arrivals) === arrivals.afterRequests) {
      // Without toDate the range is open: new records land between startDate and the data's end.
      const upper = to ?? new Date(Math.max(from!.getTime(), dataset.end.getTime()));
      const inclusive = to === undefined ? true : toInclusive;
      if (arrivals.count > 0 && (inclusive || upper.getTime() > from!.getTime())) {
        dataset.insert(dataset.plausibleRecords(arrivals.count, from!, upper, inclusive, dataset.insertedRecords + 1));
      }
    }

    const offset = (pageNumber - 1) * pageSize;
    const deep = faults.deepPages !== undefined && offset >= faults.deepPages.fromOffset ? faults.deepPages.answer : undefined;
    if (deep === 'refuse') {
      this.#c.markInjected(res, 'deep-page');
      this.#c.respond.sendJson(res, 400, { error: 'invalid_request', error_description: 'Result window is too large' });
      return;
    }
    const ranged = rangeFaults(faults, from!, to ?? dataset.end);
    const viewed = view.active;
    const served = viewed ? view.count(from, to) : dataset.count(from, to, toInclusive);
    // A lying count claims records it never serves; the pages hold only the served ones.
    const totalRecords = served + ranged.totalRecordsExtra;
    let totalPages = Math.ceil(totalRecords / echoed);
    let records: string[] = [];
    // A proxy that drops pageNumber: page 1's records whatever is asked, the number asked echoed.
    const readOffset = ranged.ignorePageNumber ? 0 : offset;
    if (ranged.ignorePageNumber && pageNumber > 1) this.#c.markInjected(res, 'ignore-page-number');
    if (deep === 'empty') this.#c.markInjected(res, 'deep-page');
    if (readOffset < served && queued !== 'empty-page' && deep === undefined) {
      const limit = queued === 'oversized-page' ? pageSize + Math.max(1, Math.ceil(pageSize / 10)) : pageSize;
      records = viewed
        ? view.page(from, to, readOffset, limit)
        : dataset.pageJsonOrdered(from, to, toInclusive, readOffset, limit, this.#c.order(), this.#c.orderRandom);
    }
    if (queued === 'oversized-page') {
      // Too few records left in the range: pad with copies (or new records) to exceed pageSize.
      if (records.length === 0) {
        const upper = to ?? new Date(Math.max(from!.getTime(), dataset.end.getTime()));
        records = dataset.plausibleRecords(1, from!, upper, true, 0).map((r) => JSON.stringify(r));
      }
      while (records.length <= pageSize) records.push(records[records.length - 1]!);
    }
    if (queued === 'inconsistent-total-pages') totalPages += 3;
    if (queued === 'nul-in-record' && records.length > 0) {
      // Valid JSON (the escape \u0000), which PostgreSQL jsonb refuses to store (SQLSTATE 22P05).
      const first = JSON.parse(records[0]!) as Record<string, unknown>;
      first.customerName = `${typeof first.customerName === 'string' ? first.customerName : ''}\u0000`;
      records[0] = JSON.stringify(first);
    }
    const data = queued === 'bad-envelope' ? `{"records":[${records.join(',')}]}` : `[${records.join(',')}]`;
    const body = `{"pageNumber":${pageNumber},"pageSize":${echoed},"totalRecords":${totalRecords},"totalPages":${totalPages},"data":${data}}`;
    const malformed = this.#c.everyNth('malformed', faults.malformedEvery) ? 'malformed-json' : undefined;
    if (queued === undefined && malformed !== undefined) this.#c.markInjected(res, 'malformed-every');
    this.#c.respond.deliver(res, 'application/json; charset=utf-8', body, queued ?? malformed, { endpoint: 'analytics', gzip });
  }

  /**
   * Answers one E7 request.
   *
   * @param gzip compress the body.
   * @throws {ParameterError} for an invalid query parameter (answered 400 by the caller).
   */
  prometheus(url: URL, res: http.ServerResponse, queued: QueuedFault | undefined, gzip = false): void {
    const { dataset, toInclusive, view } = this.#c;
    const { from, to } = rangeParams(url.searchParams, false);
    const counts = view.deletions.size > 0 ? view.eventCounts(from, to) : dataset.eventCounts(from, to, toInclusive);
    const lines: string[] = [];
    for (const eventType of EVENT_TYPES) {
      const name = metricName(eventType);
      if (this.#c.prometheusHelp === true) {
        lines.push(`# HELP ${name} Number of ${eventType} events in the requested range.`, `# TYPE ${name} untyped`);
      }
      for (const c of counts) {
        if (c.eventType !== eventType) continue;
        lines.push(`${name}{customer="${escapeLabelValue(c.customerName)}",customer_id="${escapeLabelValue(c.customerId)}"} ${c.count}`);
      }
    }
    let body = `${lines.join('\n')}\n`;
    if (queued === 'bad-envelope') body = 'userlogin_event_count customer=Acme 12 extra\nthis is not a sample line\n';
    this.#c.respond.deliver(res, 'text/plain; version=0.0.4; charset=utf-8', body, queued === 'bad-envelope' ? undefined : queued, {
      endpoint: 'prometheus',
      gzip,
    });
  }
}
