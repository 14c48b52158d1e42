/**
 * `serve` reads CONFIG_FILE again on SIGHUP and on POST /-/reload (a child process, real
 * PostgreSQL, the simulator): a source added is served by the next scrape and by /probe, while the
 * unchanged source's running sync goes on to the end; a broken file answers 400 with the reason
 * (no secret), sets config_last_reload_successful 0 and keeps every source served; a source
 * removed loses its series and its /probe name; other methods on /-/reload are 405 with Allow: POST.
 * A changed source's running sync is stopped as at shutdown (interrupted, its open window rolled
 * back), its replacement runs on the new settings, and the stored records end exactly E6's.
 * POST /-/reload is behind WEB_CONFIG_FILE's basic auth: a request without credentials reloads nothing.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import { afterAll, describe, expect, it } from 'vitest';
import { startSimulator, type Simulator } from '@analytics-exporter/simulator';
import type { AddressInfo } from 'node:net';
import bcrypt from 'bcryptjs';
import { parseExposition } from '../../src/exposition/index.js';
import { silentLogger } from '../helpers/silent-logger.js';
import { ExporterMetrics } from '../../src/metrics/registry.js';
import { createMetricsServer } from '../../src/serve/http.js';
import { E7Scraper } from '../../src/serve/scrape.js';
import { loadWebConfig, WebConfigSource } from '../../src/serve/web/webconfig.js';
import { spawnServe } from '../helpers/serve-child.js';
import { expectExactDataset } from '../helpers/sync.js';
import { useAppPool, useTestDatabase } from '../helpers/db.js';
import { until } from '../helpers/wait.js';

const db = useTestDatabase();
const bed = useAppPool(db, 2);
const START = '2026-10-02T00:00:00Z';
const END = '2026-11-01T00:00:00Z';
const SECRET = 'demo-secret';
const SCHEMA = 'reload_1';

const dir = mkdtempSync(join(tmpdir(), 'ae-serve-reload-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const CONFIG_FILE = join(dir, 'sources.yaml');

/** A source entry on the simulator; `extra` lines are appended to it. */
function entry(sim: Simulator, name: string, extra: string[] = []): string {
  return [
    `  - name: ${name}`,
    `    statistics_url: ${sim.url}`,
    `    auth_url: ${sim.url}`,
    '    client_id: demo-client',
    `    client_secret: ${SECRET}`,
    `    labels: {environment: ${name}}`,
    ...extra.map((line) => `    ${line}`),
  ].join('\n');
}

function writeSources(...entries: string[]): void {
  writeSourcesTo(CONFIG_FILE, ...entries);
}

function writeSourcesTo(file: string, ...entries: string[]): void {
  writeFileSync(file, `sources:\n${entries.join('\n')}\n`);
}

/** `serve` as a child process on `configFile` and `schema`; each source's first sync starts with it (at start, or when a reload adds it). */
function serve(configFile: string, schema: string): ReturnType<typeof spawnServe> {
  return spawnServe(
    {
      CONFIG_FILE: configFile,
      DATABASE_URL: db.url,
      DATABASE_SCHEMA: schema,
      // The yearly schedule never fires: only the first syncs run.
      SYNC_SCHEDULE: '0 0 1 1 *',
      SYNC_START_DATE: START,
      SYNC_WINDOW: '1d',
      SYNC_PAGE_SIZE: '100',
      SYNC_CONCURRENCY: '1',
      UPSTREAM_MAX_ATTEMPTS: '1',
    },
    bed.closers,
  );
}

async function get(url: string, method = 'GET') {
  const res = await request(url, { method, reset: true });
  return { status: res.statusCode, headers: res.headers, body: await res.body.text() };
}

/** The `source` label values of every own and upstream series of a /metrics body. */
function sourcesIn(body: string): Set<string> {
  const parsed = parseExposition(body);
  expect(parsed.invalid).toEqual([]);
  const names = new Set<string>();
  for (const family of parsed.families) for (const sample of family.samples) for (const [name, value] of sample.labels) if (name === 'source') names.add(value);
  return names;
}

function gauge(body: string, name: string): number | undefined {
  const family = parseExposition(body).families.find((f) => f.name === name);
  return family?.samples[0]?.value;
}

async function runs(source: string, schema = SCHEMA): Promise<string[]> {
  const { rows } = await bed.pool.query<{ status: string }>(`select status from ${schema}.sync_runs where source = $1 order by started_at`, [source]);
  return rows.map((r) => r.status);
}

describe('serve reloads CONFIG_FILE', () => {
  it('adds a source on SIGHUP, keeps the last good sources on a broken file (POST), removes a source', async () => {
    // Slow enough that the first source's startup sync is still loading when the second is added.
    const sim = await startSimulator({ port: 0, records: 3_000, start: new Date(START), end: new Date(END), faults: { latencyMs: 40 } });
    bed.closers.push(() => sim.close());
    writeSources(entry(sim, 'first'));
    const server = await serve(CONFIG_FILE, SCHEMA);
    const { url } = server;
    const reloads = () =>
      server
        .output()
        .split('\n')
        .filter((line) => line.includes('"msg":"CONFIG_FILE reload')).length;

    // Before any reload: one source, the start counted as a good load.
    let metrics = await get(`${url}/metrics`);
    expect(sourcesIn(metrics.body)).toEqual(new Set(['first']));
    expect(gauge(metrics.body, 'analytics_exporter_config_last_reload_successful')).toBe(1);
    const startedAt = gauge(metrics.body, 'analytics_exporter_config_last_reload_success_timestamp_seconds')!;
    expect(startedAt).toBeGreaterThan(0);
    expect((await get(`${url}/probe?source=second`)).status).toBe(400);

    // Other methods on the reload path.
    const wrong = await get(`${url}/-/reload`);
    expect(wrong.status).toBe(405);
    expect(wrong.headers.allow).toBe('POST');

    // SIGHUP while the first source's startup sync is loading windows: the second source is added.
    await until('the first source loading', async () => {
      const { rows } = await bed.pool
        .query<{ n: number }>(`select count(*)::int as n from ${SCHEMA}.sync_windows where source = 'first'`)
        .catch(() => ({ rows: [{ n: 0 }] }));
      return rows[0]!.n >= 1 ? true : undefined;
    });
    // 30 windows at 40 ms a request: the run has more than a second to go.
    expect(await runs('first')).toEqual(['running']);
    // Scrapes go on throughout the reloads, each answered.
    const scrapes: number[] = [];
    let scraping = true;
    const scraper = (async () => {
      while (scraping) scrapes.push((await get(`${url}/metrics`)).status);
    })();
    writeSources(entry(sim, 'first'), entry(sim, 'second'));
    server.child.kill('SIGHUP');
    await until('the reload logged', async () => (reloads() >= 1 ? true : undefined));
    expect(server.output()).toContain('"added":["second"],"removed":[],"changed":{},"unchanged":["first"]');
    metrics = await get(`${url}/metrics`);
    expect(metrics.status).toBe(200);
    expect(sourcesIn(metrics.body)).toEqual(new Set(['first', 'second']));
    expect(metrics.body).toMatch(/analytics_exporter_upstream_up\{source="second"\} 1/);
    const probe = await get(`${url}/probe?source=second`);
    expect(probe.status).toBe(200);
    expect(probe.body).toContain('source="second",environment="second"');
    expect(gauge(metrics.body, 'analytics_exporter_config_last_reload_success_timestamp_seconds')).toBeGreaterThanOrEqual(startedAt);

    // The unchanged source's run was not interrupted: it ends as it would have.
    await until(
      'both first syncs done',
      async () => {
        const done = (s: string[]) => s.length === 1 && s[0] !== 'running';
        return done(await runs('first')) && done(await runs('second')) ? true : undefined;
      },
      60_000,
    );
    expect(await runs('first')).toEqual(['succeeded']);
    expect(await runs('second')).toEqual(['succeeded']);

    // A broken file: POST answers 400 with the reason, without the secret; the last good sources stay.
    writeSources(entry(sim, 'first'), entry(sim, 'second', ['rate_limit: fast']));
    const broken = await get(`${url}/-/reload`, 'POST');
    expect(broken.status).toBe(400);
    expect(broken.body).toContain('sources[1].rate_limit');
    expect(broken.body).not.toContain(SECRET);
    expect(server.output()).toMatch(/"level":"error".*"msg":"CONFIG_FILE reload failed, so the last good configuration stays in use: CONFIG_FILE/);
    expect(
      server
        .output()
        .split('\n')
        .filter((line) => line.includes('reload failed'))
        .join('\n'),
    ).not.toContain(SECRET);
    metrics = await get(`${url}/metrics`);
    expect(gauge(metrics.body, 'analytics_exporter_config_last_reload_successful')).toBe(0);
    expect(sourcesIn(metrics.body)).toEqual(new Set(['first', 'second']));
    expect((await get(`${url}/probe?source=second`)).status).toBe(200);

    // The second source removed: its series are gone from the next scrape, /probe no longer knows it.
    writeSources(entry(sim, 'first'));
    const removed = await get(`${url}/-/reload`, 'POST');
    expect(removed.status).toBe(200);
    expect(removed.body).toContain('0 source(s) added, 1 removed, 0 changed');
    metrics = await get(`${url}/metrics`);
    expect(sourcesIn(metrics.body)).toEqual(new Set(['first']));
    expect(gauge(metrics.body, 'analytics_exporter_config_last_reload_successful')).toBe(1);
    const gone = await get(`${url}/probe?source=second`);
    expect(gone.status).toBe(400);
    expect(gone.body).toContain('unknown source second');
    expect((await get(`${url}/probe?source=first`)).status).toBe(200);

    scraping = false;
    await scraper;
    expect(scrapes.length).toBeGreaterThan(10);
    expect(new Set(scrapes)).toEqual(new Set([200]));

    // A source changed (its labels): replaced, served with the new labels.
    writeSources(entry(sim, 'first').replace('{environment: first}', '{environment: renamed}'));
    const changed = await get(`${url}/-/reload`, 'POST');
    expect(changed.status).toBe(200);
    expect(changed.body).toContain('0 source(s) added, 0 removed, 1 changed');
    expect(server.output()).toContain('"changed":{"first":["labels.environment"]}');
    const relabelled = await get(`${url}/probe?source=first`);
    expect(relabelled.body).toContain('source="first",environment="renamed"');
    expect(relabelled.body).not.toContain('environment="first"');

    // Still running, and stops as usual.
    server.child.kill('SIGTERM');
    expect(await server.exited).toBe(0);
  }, 120_000);

  it('a source a reload adds keeps its E7 limits: a text over its sample_limit fails its read with reason limit', async () => {
    const schema = 'reload_limits';
    const file = join(dir, 'limits.yaml');
    const sim = await startSimulator({ port: 0, records: 100, start: new Date(START), end: new Date(END) });
    bed.closers.push(() => sim.close());
    writeSourcesTo(file, entry(sim, 'first'));
    const server = await serve(file, schema);
    await until('the first source served', async () => ((await get(`${server.url}/readyz`)).status === 200 ? true : undefined));
    // The simulator's E7 text holds more than one sample line.
    writeSourcesTo(file, entry(sim, 'first'), entry(sim, 'capped', ['sample_limit: 1']));
    server.child.kill('SIGHUP');
    await until('the reload logged', async () => (server.output().includes('"added":["capped"]') ? true : undefined));
    const metrics = await get(`${server.url}/metrics`);
    expect(metrics.status).toBe(200);
    expect(metrics.body).toMatch(/analytics_exporter_upstream_up\{source="first"\} 1/);
    expect(metrics.body).toMatch(/analytics_exporter_upstream_up\{source="capped"\} 0/);
    expect(metrics.body).toMatch(/analytics_exporter_upstream_errors_total\{source="capped",reason="limit"\} 1/);
  }, 60_000);

  it('a changed source: its running sync is aborted (the open window rolls back), the new settings run, and the data ends exact', async () => {
    const schema = 'reload_2';
    const file = join(dir, 'changed.yaml');
    const sim = await startSimulator({ port: 0, records: 3_000, start: new Date(START), end: new Date(END), faults: { latencyMs: 40 } });
    bed.closers.push(() => sim.close());
    writeSourcesTo(file, entry(sim, 'only'));
    const server = await serve(file, schema);
    await until('the startup sync loading', async () => {
      const { rows } = await bed.pool
        .query<{ n: number }>(`select count(*)::int as n from ${schema}.sync_windows where source = 'only'`)
        .catch(() => ({ rows: [{ n: 0 }] }));
      return rows[0]!.n >= 1 ? true : undefined;
    });
    expect(await runs('only', schema)).toEqual(['running']);
    // A larger page: a change of the sync's settings, with the run under way.
    writeSourcesTo(file, entry(sim, 'only', ['sync: {page_size: 1000}']));
    const changed = await get(`${server.url}/-/reload`, 'POST');
    expect(changed.status).toBe(200);
    expect(changed.body).toContain('0 source(s) added, 0 removed, 1 changed');
    expect(server.output()).toContain('"changed":{"only":["sync.pageSize"]}');
    // Stopped as at shutdown: the run is interrupted, only whole windows are stored.
    expect((await runs('only', schema))[0]).toBe('interrupted');
    expect(server.output()).toContain('"msg":"sync run interrupted');
    // The replacement's first run, on the new settings, loads the rest: the stored records are exactly E6's.
    await until(
      'the new run done',
      async () => {
        const statuses = await runs('only', schema);
        return statuses.length === 2 && statuses[1] !== 'running' ? statuses : undefined;
      },
      60_000,
    );
    expect(await runs('only', schema)).toEqual(['interrupted', 'succeeded']);
    const partial = await bed.pool.query<{ mismatched: number }>(
      `select count(*)::int as mismatched from ${schema}.sync_windows w where w.record_count <> (select count(*) from ${schema}.records r where r.window_start = w.window_start)`,
    );
    expect(partial.rows[0]!.mismatched).toBe(0);
    expect(await expectExactDataset(bed.pool, schema, sim, new Date(START), new Date(END))).toBe(3_000);
    server.child.kill('SIGTERM');
    expect(await server.exited).toBe(0);
  }, 120_000);

  it('POST /-/reload is behind basic auth like every path: refused without credentials, before anything is reloaded', async () => {
    const file = join(dir, 'web.yaml');
    writeFileSync(file, `basic_auth_users:\n  prometheus: '${bcrypt.hashSync('right-password', 4)}'\n`);
    const metrics = new ExporterMetrics({ processMetrics: false });
    let reloads = 0;
    const server = createMetricsServer({
      metrics,
      scraper: new E7Scraper({
        sources: [],
        metrics,
        windowMs: 60_000,
        cacheTtlMs: 0,
        prefix: undefined,
        ownFamilies: async () => [],
        log: silentLogger,
      }),
      readiness: async () => ({ ready: true, detail: 'ready' }),
      reload: async () => ({ ok: true, message: `reloaded ${++reloads}` }),
      defaultScrapeTimeoutMs: 10_000,
      web: new WebConfigSource(loadWebConfig(file)),
      connections: { perClient: 8, total: 64 },
      log: silentLogger,
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    bed.closers.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/-/reload`;
    const authorization = `Basic ${Buffer.from('prometheus:right-password').toString('base64')}`;
    const wrong = `Basic ${Buffer.from('prometheus:wrong-password').toString('base64')}`;
    const post = async (headers: Record<string, string>) => {
      const res = await request(url, { method: 'POST', headers, reset: true });
      return { status: res.statusCode, body: await res.body.text() };
    };
    expect((await post({})).status).toBe(401);
    expect((await post({ authorization: wrong })).status).toBe(401);
    expect(reloads).toBe(0);
    expect(await post({ authorization })).toEqual({ status: 200, body: 'reloaded 1\n' });
    const get = await request(url, { headers: { authorization }, reset: true });
    await get.body.text();
    expect([get.statusCode, get.headers.allow]).toEqual([405, 'POST']);
    expect(reloads).toBe(1);
  });
});
