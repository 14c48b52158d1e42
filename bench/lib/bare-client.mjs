// The bare floor of reading: requests the same E6 pages as `sync` (the same windows, pageSize
// 1000) with undici, 4 at a time, and JSON.parse's each body; nothing else. Page 1 of a window
// says how many pages it has. Usage: node bare-client.mjs '{"url","from","to","windowMs","pageSize"}'
// Prints one JSON line: records, requests, recordsPerWindow, seconds, cpuSeconds.
import { performance } from 'node:perf_hooks';
import { URLSearchParams } from 'node:url';
import { request } from 'undici';

const spec = JSON.parse(process.argv[2] ?? '{}');
const CONCURRENCY = 4;
const started = performance.now();

const token = await request(`${spec.url}/connect/token`, {
  method: 'POST',
  headers: { 'content-type': 'application/x-www-form-urlencoded' },
  body: new URLSearchParams({ grant_type: 'client_credentials', client_id: 'demo-client', client_secret: 'demo-secret', scope: 'api.external' }).toString(),
}).then((res) => res.body.json());
const authorization = `Bearer ${token.access_token}`;

const windows = [];
for (let t = Date.parse(spec.from); t < Date.parse(spec.to); t += spec.windowMs) {
  // toDate one millisecond before the window's end: E6's toDate is inclusive, the sync's windows are
  // half-open, so each record is counted in one window only (timestamps are whole milliseconds).
  const end = Math.min(t + spec.windowMs, Date.parse(spec.to)) - 1;
  windows.push({ start: new Date(t).toISOString(), end: new Date(end).toISOString(), records: 0 });
}
// Page 1 of every window, in order; the answer to a page 1 puts the window's other pages first.
const queue = windows.map((w) => ({ window: w, page: 1 }));
let requests = 0;
let records = 0;

async function fetchPage({ window, page }) {
  const query = new URLSearchParams({ startDate: window.start, toDate: window.end, pageSize: String(spec.pageSize), pageNumber: String(page) });
  const res = await request(`${spec.url}/analytics?${query}`, { headers: { authorization } });
  const text = await res.body.text();
  requests++;
  if (res.statusCode !== 200) throw new Error(`E6 answered ${res.statusCode}: ${text.slice(0, 200)}`);
  const body = JSON.parse(text);
  window.records += body.data.length;
  records += body.data.length;
  if (page === 1) {
    const more = [];
    for (let p = 2; p <= body.totalPages; p++) more.push({ window, page: p });
    queue.unshift(...more);
  }
}

// At most CONCURRENCY requests in flight; done when none is and the queue is empty.
await new Promise((resolve, reject) => {
  let active = 0;
  const pump = () => {
    while (active < CONCURRENCY && queue.length > 0) {
      active++;
      fetchPage(queue.shift()).then(() => {
        active--;
        pump();
      }, reject);
    }
    if (active === 0) resolve();
  };
  pump();
});
const seconds = (performance.now() - started) / 1000;
const cpu = process.cpuUsage();
const recordsPerWindow = windows.map((w) => w.records);
process.stdout.write(`${JSON.stringify({ records, requests, recordsPerWindow, seconds, cpuSeconds: (cpu.user + cpu.system) / 1e6 })}\n`);
