/**
 * The window reader's request queue (src/sync/read/request-queue.ts) alone, against fake E6 pages
 * held until the test lets each one go: its budgets, earliest window first, and abort.
 */
import { describe, expect, it } from 'vitest';
import { AbortedError } from '../../src/errors.js';
import { RequestQueue, type PageRequest, type QueuedWindows } from '../../src/sync/read/request-queue.js';
import type { E6Pages } from '../../src/sync/store/ports.js';
import type { AnalyticsPage, PageQuery } from '../../src/upstream/analytics.js';
import { FakeE6, record } from '../helpers/fake-e6.js';

const HOUR = 3_600_000;
const T0 = Date.UTC(2026, 9, 1);
const e6 = new FakeE6(Array.from({ length: 30 }, (_, i) => record(i, T0 + i * 10 * 60_000)));

/** Page `pageNumber` of window `i` (an hour from T0 + i hours), 2 records a page. */
function page(i: number, pageNumber = 1): PageRequest {
  return { range: { start: T0 + i * HOUR, end: T0 + (i + 1) * HOUR }, pageNumber, pageSize: 2 };
}

/** The fake E6 behind a gate: each request waits until {@link release} lets the oldest one go. */
function gated() {
  const waiting: (() => void)[] = [];
  const sent: PageQuery[] = [];
  let open = 0;
  let maxOpen = 0;
  const client: E6Pages = {
    async fetchPage(query, options) {
      sent.push(query);
      maxOpen = Math.max(maxOpen, ++open);
      await new Promise<void>((resolve) => waiting.push(resolve));
      open--;
      return e6.fetchPage(query, options);
    },
  };
  return { client, sent, maxOpen: () => maxOpen, release: () => waiting.shift()?.() };
}

/** `n` windows as the reader would show them: every one planned, nothing held, unless a test says otherwise. */
function windowsOf(n: number) {
  const held = Array.from({ length: n }, () => 0);
  const started = Array.from({ length: n }, () => true);
  const awaiting = Array.from({ length: n }, () => false);
  const launched: number[] = [];
  const plan: { allowed: boolean; onStart: (i: number) => void } = { allowed: true, onStart: () => undefined };
  const windows: QueuedWindows = {
    length: n,
    held: (i) => held[i]!,
    started: (i) => started[i]!,
    start: (i) => {
      if (started[i]) return true;
      if (!plan.allowed) return false;
      started[i] = true;
      plan.onStart(i);
      return true;
    },
    awaitingNext: (i) => awaiting[i]!,
    launched: (i) => launched.push(i),
  };
  return { windows, held, started, awaiting, launched, plan };
}

/** Lets every pending promise reaction and the fake's retry loop run. */
async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
}

describe('RequestQueue', () => {
  it('keeps at most `concurrency` requests open, fewer by the pages the window being written holds', async () => {
    const up = gated();
    const w = windowsOf(1);
    const q = new RequestQueue(up.client, w.windows, { concurrency: 2 });
    w.held[0] = 1;
    const pages = [1, 2, 3, 4].map((n) => q.request(0, page(0, n)));
    await settle();
    expect(up.sent).toHaveLength(1);
    w.held[0] = 0;
    q.pump();
    await settle();
    expect(up.sent).toHaveLength(2);
    for (let i = 0; i < 4; i++) {
      up.release();
      await settle();
    }
    const answered: AnalyticsPage[] = await Promise.all(pages);
    expect(answered.map((p) => p.pageNumber)).toEqual([1, 2, 3, 4]);
    // Seven records in the hour, its end included (the fake's toDate is inclusive).
    expect(answered.map((p) => p.data.length)).toEqual([2, 2, 2, 1]);
    expect(up.maxOpen()).toBe(2);
  });

  it('gives later windows `concurrency` pages between them, past that only to the next window the written one waits for', async () => {
    const up = gated();
    const w = windowsOf(3);
    const q = new RequestQueue(up.client, w.windows, { concurrency: 2 });
    w.held[1] = 1;
    void q.request(2, page(2));
    void q.request(2, page(2, 2));
    await settle();
    // Window 1's held page and window 2's open request fill the later windows' budget.
    expect(w.launched).toEqual([2]);
    void q.request(0, page(0));
    await settle();
    expect(w.launched).toEqual([2, 0]);
    up.release(); // window 2's request: the budget is full again with window 2's next one
    await settle();
    expect(w.launched).toEqual([2, 0, 2]);
    void q.request(1, page(1));
    up.release(); // window 0's request
    await settle();
    expect(w.launched).toEqual([2, 0, 2]);
    w.awaiting[0] = true;
    q.pump();
    await settle();
    expect(w.launched).toEqual([2, 0, 2, 1]);
  });

  it('sends the earliest window first, whatever order the requests were queued in', async () => {
    const up = gated();
    const w = windowsOf(3);
    const q = new RequestQueue(up.client, w.windows, { concurrency: 1 });
    const pages = [q.request(2, page(2))];
    await settle();
    pages.push(q.request(2, page(2, 2)), q.request(1, page(1)), q.request(0, page(0)), q.request(1, page(1, 2)));
    for (let i = 0; i < 5; i++) {
      up.release();
      await settle();
    }
    await Promise.all(pages);
    expect(w.launched).toEqual([2, 0, 1, 1, 2]);
    expect(up.sent.map((s) => [(s.startDate.getTime() - T0) / HOUR, s.pageNumber])).toEqual([
      [2, 1],
      [0, 1],
      [1, 1],
      [1, 2],
      [2, 2],
    ]);
  });

  it('plans a later window only when the reader says it may', async () => {
    const up = gated();
    const w = windowsOf(2);
    w.started[1] = false;
    w.plan.allowed = false;
    const q = new RequestQueue(up.client, w.windows, { concurrency: 2 });
    const pages = [q.request(0, page(0))];
    w.plan.onStart = (i) => pages.push(q.request(i, page(i)));
    await settle();
    expect(w.launched).toEqual([0]);
    w.plan.allowed = true;
    q.pump();
    await settle();
    expect(w.started[1]).toBe(true);
    expect(w.launched).toEqual([0, 1]);
    up.release();
    up.release();
    await expect(Promise.all(pages)).resolves.toHaveLength(2);
  });

  it.each([
    ['close()', 'sync interrupted'],
    ["the caller's signal", 'sync interrupted by a signal'],
  ] as const)('ends every waiting request with an AbortedError on %s, and sends nothing more', async (how, message) => {
    const up = gated();
    const w = windowsOf(2);
    const caller = new AbortController();
    const q = new RequestQueue(up.client, w.windows, { concurrency: 1, signal: caller.signal });
    const first = q.request(0, page(0));
    const waiting = [q.request(0, page(0, 2)), q.request(1, page(1))];
    await settle();
    if (how === 'close()') q.close();
    else caller.abort();
    for (const request of waiting) await expect(request).rejects.toThrow(new AbortedError(message));
    expect(q.abortError).toBeInstanceOf(AbortedError);
    expect(q.signal.aborted).toBe(true);
    up.release();
    await first.catch(() => undefined); // sent before: the client sees the queue's signal
    await expect(q.request(1, page(1, 2))).rejects.toThrow(message);
    expect(up.sent).toHaveLength(1);
  });

  it('fails one window: its waiting requests end with the error, the others are still sent', async () => {
    const up = gated();
    const w = windowsOf(2);
    const q = new RequestQueue(up.client, w.windows, { concurrency: 1 });
    const first = q.request(0, page(0));
    const mine = q.request(0, page(0, 2));
    const other = q.request(1, page(1));
    await settle();
    const err = new Error('window 0 failed');
    q.fail(0, err);
    await expect(mine).rejects.toBe(err);
    await expect(q.request(0, page(0, 3))).rejects.toBe(err);
    up.release();
    await settle();
    up.release();
    await expect(first).resolves.toMatchObject({ pageNumber: 1 });
    await expect(other).resolves.toMatchObject({ pageNumber: 1 });
    expect(w.launched).toEqual([0, 1]);
  });
});
