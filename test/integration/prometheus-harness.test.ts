/**
 * Proves the Prometheus test harness itself: a real Prometheus scrapes a plain HTTP server on
 * loopback and answers queries about what it stored, PromQL errors surface as thrown errors,
 * and promtool tells valid, broken and unlinted exposition text apart.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkMetrics, findPrometheusBinaries, startPrometheus, type PrometheusServer } from '../helpers/prometheus.js';

const EXPOSITION = [
  '# HELP harness_widgets_total Widgets made, by colour.',
  '# TYPE harness_widgets_total counter',
  'harness_widgets_total{color="blue"} 42',
  'harness_widgets_total{color="red"} 7',
  '# HELP harness_temperature_celsius Current temperature.',
  '# TYPE harness_temperature_celsius gauge',
  'harness_temperature_celsius 21.5',
  '',
].join('\n');

const JOB = 'harness_exposition';

describe('Prometheus binaries', () => {
  it('finds prometheus and promtool with a version', () => {
    const binaries = findPrometheusBinaries();
    expect(existsSync(binaries.prometheus)).toBe(true);
    expect(existsSync(binaries.promtool)).toBe(true);
    expect(binaries.version).toMatch(/^\d+\.\d+\.\d+/);
  });
});

describe('throwaway Prometheus scraping a loopback server', () => {
  let exposition: Server;
  let prometheus: PrometheusServer;
  let scrapes = 0;

  beforeAll(async () => {
    exposition = createServer((request, response) => {
      scrapes++;
      response.writeHead(200, { 'content-type': 'text/plain; version=0.0.4; charset=utf-8' });
      response.end(EXPOSITION);
    });
    await new Promise<void>((resolve) => exposition.listen(0, '127.0.0.1', resolve));
    const { port } = exposition.address() as AddressInfo;

    const startedAt = performance.now();
    prometheus = await startPrometheus({
      scrapeConfigs: [{ job_name: JOB, scrape_interval: '1s', static_configs: [{ targets: [`127.0.0.1:${port}`] }] }],
    });
    const readyMs = performance.now() - startedAt;
    await prometheus.waitFor(`up{job="${JOB}"} == 1`, (result) => result.length === 1, 15_000);
    const scrapedMs = performance.now() - startedAt;
    console.log(`Prometheus ${findPrometheusBinaries().version} ready in ${Math.round(readyMs)} ms, first scrape recorded after ${Math.round(scrapedMs)} ms`);
  });

  afterAll(async () => {
    const dir = prometheus?.dir;
    await prometheus?.stop();
    if (dir !== undefined) expect(existsSync(dir)).toBe(false);
    await new Promise((resolve) => exposition?.close(resolve));
  });

  it('listens on loopback only and reports the target as up', async () => {
    expect(prometheus.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const { activeTargets } = await prometheus.targets();
    const target = activeTargets.find((t) => t.labels.job === JOB);
    expect(target?.health).toBe('up');
    expect(target?.lastError).toBe('');
    expect(scrapes).toBeGreaterThan(0);
  });

  it('answers queries with the scraped values', async () => {
    const widgets = await prometheus.query(`harness_widgets_total{job="${JOB}", color="blue"}`);
    expect(widgets).toHaveLength(1);
    expect(widgets[0]?.metric).toMatchObject({ __name__: 'harness_widgets_total', color: 'blue', job: JOB });
    expect(widgets[0]?.value[1]).toBe('42');

    const [temperature] = await prometheus.query(`harness_temperature_celsius{job="${JOB}"}`);
    expect(Number(temperature?.value[1])).toBe(21.5);

    const [sum] = await prometheus.query(`sum(harness_widgets_total{job="${JOB}"})`);
    expect(sum?.value[1]).toBe('49');
    expect(await prometheus.query('1 + 1')).toEqual([{ metric: {}, value: [expect.any(Number), '2'] }]);
  });

  it('throws with the parse error for invalid PromQL, and queryRaw returns it', async () => {
    await expect(prometheus.query('sum(rate(harness_widgets_total[1m])')).rejects.toThrow(/parse error/);
    await expect(prometheus.query('harness_widgets_total{')).rejects.toThrow(/bad_data.*parse error/);
    const raw = await prometheus.queryRaw('rate(harness_widgets_total)');
    expect(raw.status).toBe('error');
    expect(raw.errorType).toBe('bad_data');
    expect(raw.error).toMatch(/range vector/);
  });

  it('waitFor gives up with the last result and the targets when the predicate never holds', async () => {
    await expect(prometheus.waitFor(`up{job="${JOB}"}`, () => false, 300)).rejects.toThrow(
      /Timed out after 300 ms[\s\S]*Targets:\n {2}harness_exposition http:\/\/127\.0\.0\.1:\d+\/metrics: up/,
    );
  });
});

describe('startPrometheus with a config Prometheus rejects', () => {
  it('throws with Prometheus’ log and leaves no folder behind', async () => {
    const before = new Set(readdirSync(tmpdir()).filter((name) => name.startsWith('prometheus-test-')));
    await expect(startPrometheus({ scrapeConfigs: [{ job_name: 'broken', no_such_field: true }] })).rejects.toThrow(
      /Prometheus exited \(code \d+\) while starting[\s\S]*no_such_field/,
    );
    const left = readdirSync(tmpdir()).filter((name) => name.startsWith('prometheus-test-') && !before.has(name));
    // Another file's server may have started meanwhile; ours would be the one holding "broken".
    const ours = left.filter((name) => readFileSync(join(tmpdir(), name, 'prometheus.yml'), 'utf8').includes('"broken"'));
    expect(ours).toEqual([]);
  });
});

describe('checkMetrics (promtool check metrics)', () => {
  it('passes valid, lint-clean exposition text', async () => {
    const result = await checkMetrics(EXPOSITION);
    expect(result).toEqual({ code: 0, stdout: '', stderr: '' });
  });

  it('fails text with a format error', async () => {
    const result = await checkMetrics('harness_broken{color="blue" 1\n');
    expect(result.code).not.toBe(0);
    expect(result.stderr).toMatch(/parsing error/);
  });

  it('reports lint problems such as a counter without _total', async () => {
    const result = await checkMetrics('# HELP harness_requests Requests.\n# TYPE harness_requests counter\nharness_requests 1\n');
    expect(result.code).not.toBe(0);
    expect(result.stdout + result.stderr).toMatch(/harness_requests counter metrics should have "_total" suffix/);
  });
});
