/**
 * The route table of serve's HTTP server (src/serve/routes.ts) against a real server in the test
 * process: every path of the table and a path not in it, with every method, without basic auth
 * configured and with it (no credentials, wrong ones, right ones); each status and Allow header is
 * the one the table gives, and the one docs/security.md's table of routes gives. The table itself
 * is pinned to today's paths and methods.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import bcrypt from 'bcryptjs';
import { request } from 'undici';
import { afterAll, describe, expect, it } from 'vitest';
import { silentLogger } from '../helpers/silent-logger.js';
import { ExporterMetrics } from '../../src/metrics/registry.js';
import { createMetricsServer, type ServerDeps } from '../../src/serve/http.js';
import { serverRoutes, type Route } from '../../src/serve/routes.js';
import { E7Scraper } from '../../src/serve/scrape.js';
import { loadWebConfig, WebConfigSource } from '../../src/serve/web/webconfig.js';
import type { AnalyticsClient } from '../../src/upstream/analytics.js';

const dir = mkdtempSync(join(tmpdir(), 'ae-serve-routes-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'OPTIONS', 'PATCH'] as const;

/** What a path's handler answers to a request whose method the path accepts, here (source `a` configured, the database ready). */
const HANDLED: Readonly<Record<string, number>> = {
  '/metrics': 200,
  '/probe?source=a': 200,
  // A missing or unconfigured source reads nothing.
  '/probe': 400,
  '/probe?source=nope': 400,
  '/healthz': 200,
  '/readyz': 200,
  '/': 200,
  '/-/reload': 200,
};
const TARGETS = [...Object.keys(HANDLED), '/nope', '/metrics/'];

const basic = (password: string): string => `Basic ${Buffer.from(`prometheus:${password}`).toString('base64')}`;
type Credentials = 'none' | 'wrong' | 'right';
const HEADERS: Readonly<Record<Credentials, Record<string, string>>> = {
  none: {},
  wrong: { authorization: basic('wrong-password') },
  right: { authorization: basic('right-password') },
};

/** A source whose E7 text is one counter. */
const client = { fetchPrometheusText: () => Promise.resolve('logins_total 1\n') } as unknown as AnalyticsClient;

function deps(web: WebConfigSource | undefined, healthWithoutAuth?: boolean): ServerDeps {
  const metrics = new ExporterMetrics({ processMetrics: false });
  return {
    metrics,
    scraper: new E7Scraper({
      sources: [{ name: 'a', labels: {}, client }],
      metrics,
      windowMs: 60_000,
      cacheTtlMs: 0,
      prefix: undefined,
      ownFamilies: async () => [],
      log: silentLogger,
    }),
    readiness: async () => ({ ready: true, detail: 'ready' }),
    reload: async () => ({ ok: true, message: 'reloaded' }),
    defaultScrapeTimeoutMs: 10_000,
    ...(web ? { web } : {}),
    ...(healthWithoutAuth === undefined ? {} : { healthWithoutAuth }),
    connections: { perClient: 64, total: 64 },
    // No budget: the wrong passwords below are many.
    authFailureBudget: 0,
    log: silentLogger,
  };
}

/** The status and Allow header the table gives a request. */
function expected(table: ReadonlyMap<string, Route>, target: string, method: string, guarded: boolean): { status: number; allow?: string } {
  const route = table.get(new URL(target, 'http://localhost').pathname);
  // Every path is behind basic auth, one not in the table too: 401 before 404.
  if (guarded && (route?.auth ?? true)) return { status: 401 };
  if (route === undefined) return { status: 404 };
  if (!route.methods.includes(method)) return { status: 405, allow: route.methods.join(', ') };
  return { status: HANDLED[target]! };
}

/** Every target and method of the walk against a server made from `serverDeps`: `METHOD target status` each. */
async function statuses(serverDeps: ServerDeps, credentials: Credentials, allowOf?: (target: string, method: string) => boolean): Promise<string[]> {
  const server = createMetricsServer(serverDeps);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  try {
    const seen: string[] = [];
    for (const target of TARGETS) {
      for (const method of METHODS) {
        const res = await request(`${base}${target}`, { method, headers: HEADERS[credentials] });
        await res.body.text();
        seen.push(`${method} ${target} ${res.statusCode}${allowOf?.(target, method) ? ` allow=${String(res.headers.allow)}` : ''}`);
      }
    }
    return seen;
  } finally {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}

async function walk(serverDeps: ServerDeps, credentials: Credentials, authConfigured: boolean): Promise<void> {
  const table = serverRoutes(serverDeps);
  const want = (target: string, method: string) => expected(table, target, method, authConfigured && credentials !== 'right');
  const seen = await statuses(serverDeps, credentials, (target, method) => want(target, method).allow !== undefined);
  const wanted = TARGETS.flatMap((target) =>
    METHODS.map((method) => {
      const { status, allow } = want(target, method);
      return `${method} ${target} ${status}${allow === undefined ? '' : ` allow=${allow}`}`;
    }),
  );
  expect(seen).toEqual(wanted);
}

/** One row of docs/security.md's table of routes: requests (NAME a configured source, OTHER not one), methods, status by credentials. */
interface DocRoute {
  requests: string[];
  methods: string[] | 'any other' | 'any';
  status: Record<Credentials, number>;
}

/** The table under docs/security.md's heading "Routes of `serve`". */
function docRoutes(): DocRoute[] {
  const text = readFileSync(new URL('../../docs/security.md', import.meta.url), 'utf8');
  const section = /^## Routes of `serve`\n([\s\S]*?)(?=^## )/m.exec(text)?.[1] ?? '';
  const rows = section.split('\n').filter((line) => line.startsWith('| ') && !/^\| (Request|---)/.test(line));
  expect(rows.length, 'the table of routes in docs/security.md').toBeGreaterThan(0);
  return rows.map((line) => {
    const [request, methods, none, wrong, right] = line
      .split('|')
      .slice(1, -1)
      .map((cell) => cell.trim());
    const status = (cell: string | undefined) => Number(/^\d{3}/.exec(cell ?? '')?.[0]);
    return {
      requests: [...request!.matchAll(/`([^`]+)`|(any other path)/g)].map((m) => m[1] ?? m[2]!),
      methods: methods === 'any other' || methods === 'any' ? methods : methods!.split(', '),
      status: { none: status(none), wrong: status(wrong), right: status(right) },
    };
  });
}

/** What the doc's table says `METHOD target` answers with `credentials`. */
function docStatus(doc: DocRoute[], target: string, method: string, credentials: Credentials): string {
  const request = target.replace('?source=a', '?source=NAME').replace('?source=nope', '?source=OTHER');
  const path = (text: string) => text.replace(/\?.*/, '');
  const named = doc.find((row) => row.requests.includes(request) && Array.isArray(row.methods) && row.methods.includes(method));
  // A method no row of the request names: the path's "any other" row; a path of no row: "any other path".
  const ofPath = doc.filter((row) => row.requests.some((r) => path(r) === path(request)));
  const other = ofPath.length > 0 ? ofPath.find((r) => r.methods === 'any other') : doc.find((r) => r.requests.includes('any other path'));
  const row = named ?? other;
  return `${method} ${target} ${row === undefined ? 'not in the table' : row.status[credentials]}`;
}

describe('the route table', () => {
  it("holds today's paths, methods and auth", () => {
    const table = serverRoutes(deps(undefined));
    const summary = Object.fromEntries(
      [...table].map(([path, route]) => [path, { methods: route.methods.join(', '), auth: route.auth, body: route.refusesBody }]),
    );
    expect(summary).toEqual({
      '/metrics': { methods: 'GET, HEAD', auth: true, body: true },
      '/probe': { methods: 'GET, HEAD', auth: true, body: true },
      // WEB_HEALTH_WITHOUT_AUTH (on by default): the probes answer without credentials.
      '/healthz': { methods: 'GET, HEAD', auth: false, body: true },
      '/readyz': { methods: 'GET, HEAD', auth: false, body: true },
      '/': { methods: 'GET, HEAD', auth: true, body: true },
      '/-/reload': { methods: 'POST', auth: true, body: false },
    });
    const guarded = serverRoutes(deps(undefined, false));
    expect([...guarded].filter(([, route]) => !route.auth)).toEqual([]);
    // Without a reload to run, /-/reload is not served (404).
    const { reload: _reload, ...withoutReload } = deps(undefined);
    expect([...serverRoutes(withoutReload).keys()]).not.toContain('/-/reload');
  });

  it('answers every path and method as the table says, without basic auth configured', async () => {
    await walk(deps(undefined), 'none', false);
    await walk(deps(undefined), 'wrong', false);
  });

  it('answers every path and method as the table says, behind basic auth: 401 without the right credentials', async () => {
    const file = join(dir, 'web.yaml');
    writeFileSync(file, `basic_auth_users:\n  prometheus: '${bcrypt.hashSync('right-password', 4)}'\n`);
    for (const credentials of ['none', 'wrong', 'right'] as const) {
      await walk(deps(new WebConfigSource(loadWebConfig(file))), credentials, true);
      await walk(deps(new WebConfigSource(loadWebConfig(file)), false), credentials, true);
    }
  });

  it("answers every route and method behind basic auth as docs/security.md's table of routes says", async () => {
    const file = join(dir, 'web-doc.yaml');
    writeFileSync(file, `basic_auth_users:\n  prometheus: '${bcrypt.hashSync('right-password', 4)}'\n`);
    const doc = docRoutes();
    const paths = new Set(doc.flatMap((row) => row.requests).map((request) => request.replace(/\?.*/, '')));
    for (const path of serverRoutes(deps(undefined)).keys()) expect(paths, `docs/security.md lists ${path}`).toContain(path);
    const documented = (table: DocRoute[], credentials: Credentials) =>
      TARGETS.flatMap((target) => METHODS.map((method) => docStatus(table, target, method, credentials)));
    const seen: Partial<Record<Credentials, string[]>> = {};
    for (const credentials of ['none', 'wrong', 'right'] as const) {
      seen[credentials] = await statuses(deps(new WebConfigSource(loadWebConfig(file))), credentials);
      expect(seen[credentials], `with ${credentials} credentials`).toEqual(documented(doc, credentials));
    }
    // The comparison notices a wrong row: /healthz said to need credentials.
    const wrong = doc.map((row) => (row.requests.includes('/healthz') ? { ...row, status: { none: 401, wrong: 401, right: 200 } } : row));
    expect(documented(wrong, 'none')).not.toEqual(seen.none);
  });

  it('refuses a body where the table says so (413), and takes one on POST /-/reload', async () => {
    const serverDeps = deps(undefined);
    const server = createMetricsServer(serverDeps);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      const statuses: Record<string, number> = {};
      for (const [path, route] of serverRoutes(serverDeps)) {
        const res = await request(`${base}${path}`, { method: route.methods[0]!, body: 'x=1', headers: { 'content-type': 'text/plain' } });
        await res.body.text();
        statuses[path] = res.statusCode;
      }
      expect(statuses).toEqual({ '/metrics': 413, '/probe': 413, '/healthz': 413, '/readyz': 413, '/': 413, '/-/reload': 200 });
    } finally {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});
