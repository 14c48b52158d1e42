import { describe, expect, it } from 'vitest';
import { Prefetcher } from '../../src/sync/prefetch.js';
import type { AnalyticsClient, AnalyticsPage, PageQuery } from '../../src/upstream/analytics.js';
import type { Window } from '../../src/sync/windows.js';

const HOUR = 3_600_000;

/** A client whose pages answer only when the test says so; it records what is open. */
function fakeClient(pagesPerWindow: (window: number) => number) {
  const open: { window: number; page: number; answer: () => void }[] = [];
  let maxOpen = 0;
  const client = {
    fetchPage(query: PageQuery): Promise<AnalyticsPage> {
      const window = query.startDate.getTime() / HOUR;
      const page = query.pageNumber ?? 1;
      const totalPages = pagesPerWindow(window);
      return new Promise((resolve) => {
        const entry = {
          window,
          page,
          answer: () => {
            open.splice(open.indexOf(entry), 1);
            resolve({ pageNumber: page, pageSize: 1, totalRecords: totalPages, totalPages, data: [{ window, page }] });
          },
        };
        open.push(entry);
        maxOpen = Math.max(maxOpen, open.length);
      });
    },
  };
  return { client: client as unknown as AnalyticsClient, open, maxOpen: () => maxOpen };
}

const windows = (n: number): Window[] => Array.from({ length: n }, (_, i) => ({ start: i * HOUR, end: (i + 1) * HOUR }));
const tick = () => new Promise((resolve) => setImmediate(resolve));

async function answerAll(open: { answer: () => void }[]): Promise<void> {
  for (const entry of [...open]) entry.answer();
  await tick();
}

describe('Prefetcher', () => {
  it('keeps `concurrency` requests open for the window being written while page 1 of later windows waits', async () => {
    const fake = fakeClient(() => 10);
    const prefetcher = new Prefetcher(fake.client, windows(6), { pageSize: 1, concurrency: 4 });
    await tick();
    // Page counts are unknown at first: page 1 of the first four windows.
    expect(fake.open.map((o) => [o.window, o.page])).toEqual([[0, 1], [1, 1], [2, 1], [3, 1]]);
    await answerAll(fake.open);
    // Window 0 holds its page 1 and three requests; page 1 of windows 1–3 waits outside that budget.
    expect(fake.open.map((o) => [o.window, o.page])).toEqual([[0, 2], [0, 3], [0, 4]]);
    const taken = [`0:${(await prefetcher.take(0, 1)).pageNumber}`];
    await tick();
    // Once the writer has it, window 0 has four requests open although three later pages are held.
    expect(fake.open.map((o) => [o.window, o.page])).toEqual([[0, 2], [0, 3], [0, 4], [0, 5]]);
    for (let n = 2; n <= 10; n++) {
      const pending = prefetcher.take(0, n);
      await tick();
      if (fake.open.some((o) => o.window === 0 && o.page === n)) await answerAll(fake.open.filter((o) => o.window === 0 && o.page === n));
      const page = await pending;
      taken.push(`${page.data[0]!.window}:${page.pageNumber}`);
      expect(fake.open.length).toBeLessThanOrEqual(4);
    }
    expect(taken).toEqual(Array.from({ length: 10 }, (_, i) => `0:${i + 1}`));
    expect(fake.maxOpen()).toBe(4);
    prefetcher.close();
  });

  it('fetches one page at a time with concurrency 1', async () => {
    const fake = fakeClient(() => 3);
    const prefetcher = new Prefetcher(fake.client, windows(3), { pageSize: 1, concurrency: 1 });
    for (let w = 0; w < 3; w++) {
      for (let n = 1; n <= 3; n++) {
        const pending = prefetcher.take(w, n);
        await tick();
        expect(fake.open.length).toBe(1);
        await answerAll(fake.open);
        expect((await pending).pageNumber).toBe(n);
      }
      prefetcher.drop(w);
    }
    expect(fake.maxOpen()).toBe(1);
    prefetcher.close();
  });

  it('holds at most `concurrency` pages for later windows, however many there are', async () => {
    const fake = fakeClient(() => 1);
    const prefetcher = new Prefetcher(fake.client, windows(20), { pageSize: 1, concurrency: 3 });
    await tick();
    await answerAll(fake.open); // page 1 of windows 0–2 held
    // The writer has taken nothing: window 0 holds its page 1, later windows three pages between them.
    for (let round = 0; round < 5; round++) await answerAll(fake.open);
    expect(fake.open).toEqual([]);
    for (let w = 0; w < 20; w++) {
      const page = prefetcher.take(w, 1);
      await tick();
      await answerAll(fake.open);
      expect((await page).data[0]).toEqual({ window: w, page: 1 });
      prefetcher.drop(w);
      expect(fake.open.length).toBeLessThanOrEqual(3);
    }
    prefetcher.close();
  });
});
