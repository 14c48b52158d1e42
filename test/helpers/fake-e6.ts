/**
 * A fake E6 (API reference, E6) for the run's unit tests: records in memory, answered by range
 * (`startDate` ≤ filter time ≤ `toDate` by default, or < `toDate` with `toDate: 'exclusive'`) in
 * time then id order, offset paging, each page with its body's text as the analytics client gives
 * it. The filter time is the record's `timestamp`, or with `filterTime` a hidden one the record
 * does not carry (an ingestion time). Faults a test switches on: the next
 * requests fail as a 503 would. Requests go through the client's own retry loop (withRetries) with
 * its backoff waited on the global timers, so vitest's fake timers drive it.
 */
import { ResponseTooLargeError, UpstreamHttpError } from '../../src/errors.js';
import type { E6Pages } from '../../src/sync/store/ports.js';
import type { AnalyticsPage, AnalyticsRecord, PageQuery } from '../../src/upstream/analytics.js';
import { withRetries, type RetryPolicy } from '../../src/upstream/retry.js';

export interface FakeRecord extends AnalyticsRecord {
  id: number;
  timestamp: string;
}

/** A record at `ms` (its `timestamp`, RECORD_TIME_FIELD's default) with `fields` besides. */
export function record(id: number, ms: number, fields: Record<string, unknown> = {}): FakeRecord {
  return { id, timestamp: new Date(ms).toISOString(), ...fields };
}

/** Waits on the global timers (faked by vi.useFakeTimers), as retry.ts's sleep waits on node's. */
function timerSleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => (clearTimeout(timer), reject(new Error('aborted'))), { once: true });
  });
}

/** How the fake E6 reads `startDate`/`toDate`. */
export interface FakeE6Filter {
  /** Whether a record exactly at `toDate` is returned (default inclusive). */
  toDate?: 'inclusive' | 'exclusive';
  /** The time E6 filters on (ms); default the record's `timestamp`. */
  filterTime?: (record: FakeRecord) => number;
}

export class FakeE6 implements E6Pages {
  records: FakeRecord[];
  /** Requests answered or failed (retries counted). */
  requests = 0;
  /** Waits between attempts, in milliseconds, as the retry loop chose them. */
  readonly delays: number[] = [];
  /** The next this many requests fail with HTTP 503 (retryable). */
  failNext = 0;
  /**
   * A body cap as UPSTREAM_MAX_BODY is (bytes of a page's text): a page over it fails with
   * `ERR_UPSTREAM_BODY`, reason `response_too_large`, not retried, as the analytics client fails it.
   */
  maxBodyBytes = Number.POSITIVE_INFINITY;
  /** `totalRecords` (and `totalPages`) claim this many records more than are served, as an E6 whose count lies. */
  totalRecordsExtra = 0;
  /** A fault for a request: the error it fails with (through the retry loop, as the client's), or undefined to answer. */
  fault: ((query: PageQuery) => Error | undefined) | undefined;
  readonly #retry: RetryPolicy;
  readonly #filter: FakeE6Filter;

  constructor(records: readonly FakeRecord[], retry: Partial<RetryPolicy> = {}, filter: FakeE6Filter = {}) {
    this.records = [...records];
    this.#filter = filter;
    this.#retry = { maxAttempts: 3, maxDelayMs: 30_000, baseDelayMs: 1000, random: () => 1, sleep: timerSleep, ...retry };
  }

  async fetchPage(query: PageQuery, options: { signal?: AbortSignal } = {}): Promise<AnalyticsPage> {
    return withRetries(() => this.#answer(query), this.#retry, {
      ...(options.signal ? { signal: options.signal } : {}),
      onRetry: (event) => this.delays.push(event.delayMs),
    });
  }

  async #answer(query: PageQuery): Promise<AnalyticsPage> {
    this.requests++;
    if (this.failNext > 0) {
      this.failNext--;
      throw new UpstreamHttpError('analytics', 503, 'fake E6: HTTP 503', { retryable: true });
    }
    const fault = this.fault?.(query);
    if (fault !== undefined) throw fault;
    const from = query.startDate.getTime();
    const to = query.toDate?.getTime() ?? Number.POSITIVE_INFINITY;
    const pageSize = query.pageSize ?? 500;
    const pageNumber = query.pageNumber ?? 1;
    const time = (r: FakeRecord) => Date.parse(r.timestamp);
    const filterTime = this.#filter.filterTime ?? time;
    const inclusive = this.#filter.toDate !== 'exclusive';
    const inRange = this.records
      .filter((r) => filterTime(r) >= from && (inclusive ? filterTime(r) <= to : filterTime(r) < to))
      .sort((a, b) => time(a) - time(b) || a.id - b.id);
    const data = inRange.slice((pageNumber - 1) * pageSize, pageNumber * pageSize);
    const totalRecords = inRange.length + this.totalRecordsExtra;
    const envelope = { pageNumber, pageSize, totalRecords, totalPages: Math.ceil(totalRecords / pageSize), data };
    const text = JSON.stringify(envelope);
    if (Buffer.byteLength(text) > this.maxBodyBytes) {
      throw new ResponseTooLargeError('analytics', `fake E6: response larger than ${this.maxBodyBytes} bytes (UPSTREAM_MAX_BODY)`);
    }
    return { ...envelope, data: (JSON.parse(text) as { data: AnalyticsRecord[] }).data, text, bytes: Buffer.from(text, 'utf8') };
  }
}
