/**
 * The Prometheus dashboards against an E7 that serves what the API reference promises and one
 * family nobody told us about: `userlogin_event_count` (the one name the reference gives) and
 * `formsigned_event_count`, from a test-only front (test/helpers/e7-front.ts) before the
 * simulator, whose own families are never seen. serve reads it, a real Prometheus scrapes serve,
 * and every PromQL target of every dashboard runs with its variables substituted (All, and real
 * values picked): none may fail, and none may be empty but the counters of errors that did not
 * happen ({@link MAY_BE_EMPTY}). The event panels must show exactly the two families served.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dashboardQueries, evaluatePromQL, hasData, loadDashboards, promApi, resolveVariables } from '../helpers/dashboard-queries.js';
import { useTestDatabase } from '../helpers/db.js';
import { startE7Front } from '../helpers/e7-front.js';
import { startStack, type Stack } from '../helpers/stack.js';

/** E7's text: the reference's family and an unknown one; Fjordvik Kommune has only the unknown one. */
const E7_TEXT = [
  'userlogin_event_count{customer="Acme AS",customer_id="cust-0001"} 12',
  'userlogin_event_count{customer="Nordlys Energi AS",customer_id="cust-0002"} 7',
  'formsigned_event_count{customer="Acme AS",customer_id="cust-0001"} 3',
  'formsigned_event_count{customer="Fjordvik Kommune",customer_id="cust-0003"} 5',
  '',
].join('\n');
/** The families' names as the panels show them (label `event`). */
const EVENTS = ['formsigned', 'userlogin'];

/**
 * Targets allowed to be empty (dashboard uid / panel title / refId), each a counter of an error
 * that does not happen here: labelled counters have no series until their first increment.
 */
const MAY_BE_EMPTY: Record<string, string> = {
  'analytics-exporter-health / Upstream errors by reason / A': 'upstream_errors_total{reason}: no read of E6 or E7 fails here',
  'analytics-exporter-health / Invalid upstream lines / A': 'upstream_invalid_lines_total{reason}: every line of E7_TEXT is valid',
  'analytics-exporter-health / Retries and token requests / A': 'upstream_retries_total{endpoint}: every request is answered at once',
};

const dashboards = loadDashboards();

describe('dashboards against an E7 serving only userlogin_event_count and one unknown family', () => {
  const db = useTestDatabase();
  let stack: Stack;

  beforeAll(async () => {
    stack = await startStack({
      databaseUrl: db.url,
      records: 2_000,
      env: { AUDIT_SCHEDULE: '*/5 * * * * *' },
      front: (sim) => startE7Front(sim.url, E7_TEXT),
    });
    const job = `job="${stack.job}"`;
    // Both families scraped, a sync and an audit done, a few scrapes of history, and an upstream
    // request between two scrapes (without which the p95 of request durations is NaN).
    await stack.prometheus.waitFor(`count(count by (__name__) ({__name__=~".+_event_count", ${job}})) == 2`, (r) => r.length === 1, 30_000);
    await stack.prometheus.waitFor(`analytics_exporter_sync_last_success_timestamp_seconds{${job}} > 0`, (r) => r.length === 1, 60_000);
    await stack.prometheus.waitFor(`analytics_exporter_audit_last_run_timestamp_seconds{${job}}`, (r) => r.length === 1, 60_000);
    await stack.prometheus.waitFor(`count_over_time(up{${job}}[1m]) >= 4`, (r) => r.length === 1, 30_000);
    await stack.prometheus.waitFor(`sum(increase(analytics_exporter_upstream_request_duration_seconds_count{${job}}[1m])) > 0`, (r) => r.length === 1, 30_000);
  }, 90_000);
  afterAll(async () => {
    await stack?.stop();
  });

  it('sees only the two families of the front, none of the simulator', async () => {
    const names = await promApi<string[]>(stack.prometheus.url, '/api/v1/label/__name__/values', { 'match[]': '{__name__=~".+_event_count"}' });
    expect(names).toEqual(['formsigned_event_count', 'userlogin_event_count']);
  });

  it('runs every PromQL target of every dashboard without error, empty only where an error did not happen', async () => {
    const now = Date.now() / 1000;
    const variables = await resolveVariables(stack.prometheus.url, dashboards, now);
    // Every customer of any family is offered, also one with no logins.
    expect.soft(variables.options.get('analytics-platform-usage')!.get('customer')).toEqual(['Acme AS', 'Fjordvik Kommune', 'Nordlys Energi AS']);
    const prom = dashboardQueries(dashboards, 'prometheus');
    for (const key of Object.keys(MAY_BE_EMPTY)) expect(prom.map((q) => q.key)).toContain(key);

    const evaluations = await evaluatePromQL(stack.prometheus.url, prom, variables, now);
    const failed = evaluations.filter((e) => e.error !== undefined).map((e) => `${e.where}: ${e.error}`);
    expect.soft(failed, 'PromQL targets Prometheus refused').toEqual([]);
    const empty = evaluations.filter((e) => !hasData(e));
    expect
      .soft(
        empty.filter((e) => !(e.query.key in MAY_BE_EMPTY)).map((e) => e.where),
        'PromQL targets without data',
      )
      .toEqual([]);
    expect(new Set(empty.map((e) => e.query.key)), 'MAY_BE_EMPTY matches what is empty').toEqual(new Set(Object.keys(MAY_BE_EMPTY)));

    // The event panels show exactly the families E7 serves, by their names without the suffix.
    const usage = evaluations.filter((e) => e.query.dashboard.uid === 'analytics-platform-usage');
    const shown = new Set(usage.flatMap((e) => (e.series ?? []).flatMap((s) => (s.labels.event === undefined ? [] : [s.labels.event]))));
    expect([...shown].sort()).toEqual(EVENTS);
    const byType = usage.find((e) => e.query.key === 'analytics-platform-usage / Events by type / A' && e.scenario === 'All')!;
    expect(byType.series!.map((s) => s.labels.event).sort()).toEqual(EVENTS);
    const allEvents = usage.find((e) => e.query.key === 'analytics-platform-usage / All events / A' && e.scenario === 'All')!;
    expect(allEvents.series!.map((s) => Number(s.values[0]))).toEqual([12 + 7 + 3 + 5]);
  }, 60_000);
});
