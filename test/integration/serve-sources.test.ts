/**
 * serve with two sources, each on a simulator of its own (its own credentials and data): /metrics
 * serves both, labelled apart and merged into one family per name; a closed or slow source gives
 * its `upstream_up` 0 within the scrape timeout while the other is served; /probe serves one
 * source and refuses any other query without reading anything; and a real Prometheus scrapes
 * /probe with the job prometheus/prometheus.yml shows.
 */
import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { request } from 'undici';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { startServe, type RunningServer } from '../../src/serve/lifecycle.js';
import { loadConfig, type SourceConfig } from '../../src/config.js';
import { parseExposition, type Sample } from '../../src/exposition/index.js';
import { silentLogger } from '../helpers/silent-logger.js';
import { NO_FAULTS, startSimulator, type Simulator } from '@analytics-exporter/simulator';
import { useTestDatabase } from '../helpers/db.js';
import { checkMetrics, startPrometheus } from '../helpers/prometheus.js';

const CONFIG_FILE = join(resolve(dirname(fileURLToPath(import.meta.url)), '../../prometheus'), 'prometheus.yml');
const PROBE_JOB = 'analytics-exporter-probe';

const db = useTestDatabase();
let simA: Simulator;
let simB: Simulator;
let schemaCounter = 0;
const running: RunningServer[] = [];

beforeAll(async () => {
  const window = { end: new Date(), start: new Date(Date.now() - 2 * 86_400_000) };
  [simA, simB] = await Promise.all([
    startSimulator({ port: 0, records: 2_000, seed: 1, customers: 3, clientId: 'client-a', clientSecret: 'secret-a', ...window }),
    startSimulator({ port: 0, records: 3_000, seed: 2, customers: 5, clientId: 'client-b', clientSecret: 'secret-b', ...window }),
  ]);
});
afterEach(async () => {
  for (const sim of [simA, simB]) Object.assign(sim.faults, NO_FAULTS);
  while (running.length) await running.pop()!.stop();
});
afterAll(async () => {
  await Promise.all([simA?.close(), simB?.close()]);
});

/** A source on `url` with its own credentials, built from loadConfig's environment source with the name changed. */
function source(name: string, url: string, credentials: [string, string], labels: Record<string, string>): SourceConfig {
  const [clientId, secret] = credentials;
  const base = loadConfig({ STATISTICS_URL: url, AUTH_URL: url, CLIENT_ID: clientId, CLIENT_SECRET: secret, UPSTREAM_MAX_ATTEMPTS: '1' }).sources[0]!;
  return { ...base, name, labels };
}

/** serve on sources a (simA) and b (simB unless `bUrl` says otherwise). */
async function serve(bUrl = simB.url): Promise<RunningServer> {
  const base = loadConfig({
    DATABASE_URL: db.url,
    DATABASE_SCHEMA: `sources_${++schemaCounter}`,
    METRICS_LISTEN: '127.0.0.1:0',
    SYNC_SCHEDULE: 'off',
    UPSTREAM_MAX_ATTEMPTS: '1',
  });
  const sources = [
    source('a', simA.url, ['client-a', 'secret-a'], { environment: 'production' }),
    source('b', bUrl, ['client-b', 'secret-b'], { environment: 'sandbox' }),
  ];
  const server = await startServe({ ...base, sources }, silentLogger);
  running.push(server);
  return server;
}

async function get(url: string, headers: Record<string, string> = {}) {
  const started = performance.now();
  const res = await request(url, { headers, reset: true });
  const body = await res.body.text();
  return { status: res.statusCode, headers: res.headers, body, ms: performance.now() - started };
}

function samples(text: string): Sample[] {
  const parsed = parseExposition(text);
  expect(parsed.invalid).toEqual([]);
  return parsed.families.flatMap((family) => family.samples);
}

const label = (sample: Sample, name: string) => sample.labels.find(([n]) => n === name)?.[1];
const series = (list: Sample[]) => list.map((s) => `${s.name}${JSON.stringify(s.labels)} ${s.value}`).sort();
const logins = (list: Sample[], src: string) => list.filter((s) => s.name === 'userlogin_event_count' && label(s, 'source') === src);
const valueOf = (list: Sample[], name: string, labels: Record<string, string>) =>
  list.find((s) => s.name === name && Object.entries(labels).every(([k, v]) => label(s, k) === v))?.value;

describe('serve with two sources', () => {
  it("serves both sources' samples in one family per name, labelled source and environment, each as /probe serves it alone", async () => {
    const s = await serve();
    const res = await get(`${s.url}/metrics`);
    expect(res.status).toBe(200);
    const all = samples(res.body);
    expect(res.body.match(/^# TYPE userlogin_event_count /gm)).toHaveLength(1);
    for (const [src, environment, sim] of [
      ['a', 'production', simA],
      ['b', 'sandbox', simB],
    ] as const) {
      const ours = logins(all, src);
      expect(ours.length).toBeGreaterThan(0);
      for (const sample of ours)
        expect(sample.labels.slice(0, 2)).toEqual([
          ['source', src],
          ['environment', environment],
        ]);
      expect(valueOf(all, 'analytics_exporter_upstream_up', { source: src })).toBe(1);
      // Each source authenticated with its own client at its own simulator.
      expect(sim.stats.tokenRequests).toBeGreaterThanOrEqual(1);
      expect(valueOf(all, 'analytics_exporter_token_requests_total', { source: src })).toBeGreaterThanOrEqual(1);
      const probe = await get(`${s.url}/probe?source=${src}`);
      expect(probe.status).toBe(200);
      expect(series(logins(samples(probe.body), src))).toEqual(series(ours));
    }
    // Different data behind the two sources.
    expect(series(logins(all, 'a').map((x) => ({ ...x, labels: x.labels.slice(2) })))).not.toEqual(
      series(logins(all, 'b').map((x) => ({ ...x, labels: x.labels.slice(2) }))),
    );
    const check = await checkMetrics(res.body);
    expect(check.stdout + check.stderr).toBe('');
    expect(check.code).toBe(0);
  });

  it("/probe?source=a serves only a's samples and own series; an unknown source, a missing one or another parameter is a 400 that reads nothing", async () => {
    const s = await serve();
    const probe = await get(`${s.url}/probe?source=a`);
    expect(probe.status).toBe(200);
    expect(probe.headers['content-type']).toBe('text/plain; version=0.0.4; charset=utf-8');
    const list = samples(probe.body);
    expect(list.every((sample) => label(sample, 'source') === 'a')).toBe(true);
    expect(valueOf(list, 'analytics_exporter_upstream_up', { source: 'a' })).toBe(1);
    expect(valueOf(list, 'analytics_exporter_upstream_scrape_duration_seconds', { source: 'a' })).toBeGreaterThan(0);
    expect(logins(list, 'a').length).toBeGreaterThan(0);
    expect(probe.body).not.toContain('analytics_exporter_build_info');
    // Probes of both sources at once, which may share one collection of the own series, each keep only their source's.
    const concurrent = await Promise.all(['a', 'b', 'a', 'b', 'a', 'b'].map(async (src) => ({ src, res: await get(`${s.url}/probe?source=${src}`) })));
    for (const { src, res } of concurrent) {
      const its = samples(res.body);
      expect(its.every((sample) => label(sample, 'source') === src)).toBe(true);
      expect(valueOf(its, 'analytics_exporter_upstream_up', { source: src })).toBe(1);
      expect(logins(its, src).length).toBeGreaterThan(0);
    }

    const reads = () => [simA, simB].map((sim) => sim.stats.tokenRequests + sim.stats.prometheusRequests + sim.stats.analyticsRequests);
    const before = reads();
    for (const [query, line] of [
      ['?source=nope', 'unknown source nope: the configured sources are a, b\n'],
      ['', 'missing parameter source: /probe?source=NAME, where the configured sources are a, b\n'],
      ['?source=a&target=http%3A%2F%2Fexample.com', 'unknown parameter target: /probe takes only source=NAME\n'],
    ]) {
      const res = await get(`${s.url}/probe${query}`);
      expect(res.status).toBe(400);
      expect(res.body).toBe(line);
    }
    expect(reads()).toEqual(before);
    expect((await get(`${s.url}/`)).body).toContain('<a href="probe?source=b">b</a>');
  });

  it('serves a within the scrape timeout when b is slow, with upstream_up{source="b"} 0 and the timeout counted', async () => {
    const s = await serve();
    simB.faults.latencyMs = 4000;
    const res = await get(`${s.url}/metrics`, { 'x-prometheus-scrape-timeout-seconds': '1.5' });
    expect(res.status).toBe(200);
    expect(res.ms).toBeLessThan(1500);
    const all = samples(res.body);
    expect(logins(all, 'a').length).toBeGreaterThan(0);
    expect(logins(all, 'b')).toEqual([]);
    expect(valueOf(all, 'analytics_exporter_upstream_up', { source: 'a' })).toBe(1);
    expect(valueOf(all, 'analytics_exporter_upstream_up', { source: 'b' })).toBe(0);
    expect(valueOf(all, 'analytics_exporter_upstream_errors_total', { source: 'b', reason: 'timeout' })).toBe(1);
    expect(valueOf(all, 'analytics_exporter_upstream_errors_total', { source: 'a', reason: 'timeout' })).toBeUndefined();
  });

  it('serves a when b is closed, with upstream_up{source="b"} 0 and its failed token request counted for b', async () => {
    const closed = await startSimulator({ port: 0, records: 10 });
    await closed.close();
    const s = await serve(closed.url);
    const all = samples((await get(`${s.url}/metrics`)).body);
    expect(logins(all, 'a').length).toBeGreaterThan(0);
    expect(valueOf(all, 'analytics_exporter_upstream_up', { source: 'a' })).toBe(1);
    expect(valueOf(all, 'analytics_exporter_upstream_up', { source: 'b' })).toBe(0);
    // The first request of a source is E0's.
    expect(valueOf(all, 'analytics_exporter_upstream_errors_total', { source: 'b', reason: 'token' })).toBe(1);
    expect(valueOf(all, 'analytics_exporter_upstream_attempt_failures_total', { source: 'b', endpoint: 'token', reason: 'network' })).toBe(1);
    expect(valueOf(all, 'analytics_exporter_upstream_attempt_failures_total', { source: 'a', endpoint: 'token' })).toBeUndefined();
  });

  it("is scraped through /probe by a real Prometheus with prometheus.yml's probe job: one target per source, the exporter as instance", async () => {
    const s = await serve();
    const host = new URL(s.url).host;
    // The job is shown commented out (it replaces the /metrics job rather than joining it).
    const text = readFileSync(CONFIG_FILE, 'utf8');
    const start = text.indexOf(`  # - job_name: ${PROBE_JOB}\n`);
    expect(start).toBeGreaterThan(0);
    const block = text
      .slice(start)
      .split('\n')
      .filter((line) => line.startsWith('  # '))
      .map((line) => `  ${line.slice(4)}`)
      .join('\n');
    const [job] = parse(block) as Array<Record<string, unknown> & { relabel_configs: Array<Record<string, unknown>> }>;
    expect(job).toMatchObject({ job_name: PROBE_JOB, metrics_path: '/probe', static_configs: [{ targets: ['production', 'sandbox'] }] });
    const address = job!.relabel_configs.find((rule) => rule.target_label === '__address__')!;
    expect(address.replacement).toBe('analytics-exporter:9877');
    address.replacement = host;
    const prometheus = await startPrometheus({
      scrapeConfigs: [{ ...job, scrape_interval: '1s', scrape_timeout: '1s', static_configs: [{ targets: ['a', 'b'] }] }],
    });
    try {
      const up = await prometheus.waitFor(`up{job="${PROBE_JOB}"} == 1`, (r) => r.length === 2, 30_000);
      expect(up.map((r) => [r.metric.source, r.metric.instance]).sort()).toEqual([
        ['a', host],
        ['b', host],
      ]);
      const served = await prometheus.waitFor(`count by (source, environment, instance) (userlogin_event_count{job="${PROBE_JOB}"})`, (r) => r.length === 2);
      expect(served.map((r) => [r.metric.source, r.metric.environment, r.metric.instance]).sort()).toEqual([
        ['a', 'production', host],
        ['b', 'sandbox', host],
      ]);
      expect(await prometheus.query('count({__name__=~".+", exported_source!=""})')).toEqual([]);
      const gauges = await prometheus.query(`analytics_exporter_upstream_up{job="${PROBE_JOB}"}`);
      expect(gauges.map((r) => [r.metric.source, r.value[1]]).sort()).toEqual([
        ['a', '1'],
        ['b', '1'],
      ]);
    } finally {
      await prometheus.stop();
    }
  });
});
