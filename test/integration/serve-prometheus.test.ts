import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServe, type RunningServer } from '../../src/serve/lifecycle.js';
import { loadConfig } from '../../src/config.js';
import { silentLogger } from '../helpers/silent-logger.js';
import { startSimulator, type Simulator } from '@analytics-exporter/simulator';
import { useTestDatabase } from '../helpers/db.js';
import { checkMetrics, startPrometheus, type PrometheusServer } from '../helpers/prometheus.js';
import { simulatorEnv } from '../helpers/sync.js';

const db = useTestDatabase();
let sim: Simulator;
let serve: RunningServer;
let prometheus: PrometheusServer;

beforeAll(async () => {
  sim = await startSimulator({ port: 0, records: 20_000, end: new Date(), start: new Date(Date.now() - 2 * 86_400_000) });
  const config = loadConfig({
    ...simulatorEnv(sim),
    DATABASE_URL: db.url,
    METRICS_LISTEN: '127.0.0.1:0',
    SYNC_START_DATE: '1d',
    SYNC_SCHEDULE: '0 0 1 1 *',
  });
  serve = await startServe(config, silentLogger);
  prometheus = await startPrometheus({
    scrapeConfigs: [{ job_name: 'analytics-exporter', scrape_interval: '1s', scrape_timeout: '1s', static_configs: [{ targets: [new URL(serve.url).host] }] }],
  });
});
afterAll(async () => {
  await prometheus?.stop();
  await serve?.stop();
  await sim?.close();
});

async function metricsText(accept?: string): Promise<string> {
  const res = await request(`${serve.url}/metrics`, accept ? { headers: { accept } } : {});
  return res.body.text();
}

describe('serve with real Prometheus tools', () => {
  it('passes promtool check metrics (format and lint)', async () => {
    const result = await checkMetrics(await metricsText());
    expect(result.stdout + result.stderr).toBe('');
    expect(result.code).toBe(0);
  });

  it('is scraped by a real Prometheus: up is 1, upstream samples and health gauges are there', async () => {
    await prometheus.waitFor('up{job="analytics-exporter"} == 1', (r) => r.length === 1, 30_000);
    const logins = await prometheus.waitFor('userlogin_event_count', (r) => r.length > 0);
    expect(logins[0]!.metric).toMatchObject({ job: 'analytics-exporter', customer_id: expect.stringMatching(/^cust-/) });
    const up = await prometheus.query('analytics_exporter_upstream_up');
    expect(up.map((s) => s.value[1])).toEqual(['1']);
    const synced = await prometheus.waitFor('analytics_exporter_sync_runs_total >= 1', (r) => r.length === 1, 30_000);
    expect(Number(synced[0]!.value[1])).toBeGreaterThanOrEqual(1);
    for (const name of [
      'analytics_exporter_sync_last_success_timestamp_seconds',
      'analytics_exporter_sync_watermark_timestamp_seconds',
      'analytics_exporter_build_info',
    ]) {
      expect((await prometheus.query(name)).length, name).toBe(1);
    }
    const targets = await prometheus.targets();
    expect(targets.activeTargets[0]).toMatchObject({ health: 'up', lastError: '' });
  });

  it('is scraped over OpenMetrics too (Prometheus asks for it first)', async () => {
    const text = await metricsText('application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5');
    expect(text.endsWith('# EOF\n')).toBe(true);
    // The scrape above negotiated the same format; its success shows Prometheus parsed it.
    const scrapes = await prometheus.query('scrape_samples_scraped{job="analytics-exporter"}');
    expect(Number(scrapes[0]!.value[1])).toBeGreaterThan(50);
  });
});
