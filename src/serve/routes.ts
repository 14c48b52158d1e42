/**
 * What `serve` answers, as one table ({@link serverRoutes}): each path's methods, whether basic
 * auth guards it (`/healthz` and `/readyz` not, with WEB_HEALTH_WITHOUT_AUTH on) and a body is
 * refused, and its handler; http.ts routes by it alone. docs/security.md lists it. `/metrics` and
 * `/probe` answer in the format Accept asks for: the own part, then the upstream's, never joined
 * in memory. See docs/design/scrape-path.md.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  OPENMETRICS_CONTENT_TYPE,
  TEXT_CONTENT_TYPE,
  negotiateFormat,
  serializeOpenMetricsBuffer,
  serializeTextBuffer,
  type MetricFamily,
} from '../exposition/index.js';
import type { ExporterMetrics } from '../metrics/registry.js';
import { OwnExposition, type OwnSnapshot } from '../metrics/own-part.js';
import { VERSION } from '../version.js';
import { scrapeBudgetMs, scrapeTimeoutFromHeader, type E7Scraper, type UpstreamPart } from './scrape.js';

export interface Readiness {
  ready: boolean;
  /** One line saying why. */
  detail: string;
}

/** What the handlers of {@link serverRoutes} read. */
export interface RouteDeps {
  metrics: ExporterMetrics;
  /** Its names are the only ones /probe accepts. */
  scraper: E7Scraper;
  /** Must answer within a few seconds. */
  readiness: () => Promise<Readiness>;
  /** `POST /-/reload`, served only when given. Never rejects. */
  reload?: () => Promise<{ ok: true; message: string } | { ok: false; status: number; message: string }>;
  /** When Prometheus sends none. */
  defaultScrapeTimeoutMs: number;
  /** WEB_HEALTH_WITHOUT_AUTH: `/healthz` and `/readyz` outside basic auth; default true. */
  healthWithoutAuth?: boolean;
}

/** One path of the table. */
export interface Route {
  /** Any other method gets 405 with `Allow: <these>` and {@link wrongMethod}. */
  readonly methods: readonly string[];
  /** Whether `basic_auth_users`, when there are any, guard the path. */
  readonly auth: boolean;
  /** Whether a request with a body is answered 413. */
  readonly refusesBody: boolean;
  readonly wrongMethod: string;
  /**
   * `unchecked`: basic auth is on but this path answers without credentials; the answer then says
   * no more than a scrape would. @throws what a handler's I/O throws (the server answers 500).
   */
  readonly handle: (req: IncomingMessage, res: ServerResponse, url: URL, unchecked: boolean) => Promise<void> | void;
}

const TEXT = 'text/plain; charset=utf-8';

const OPENMETRICS_EOF = Buffer.from('# EOF\n');

/** A route that only reads: GET and HEAD, no body, behind basic auth unless `auth` is false. */
function readOnly(handle: Route['handle'], auth = true): Route {
  return { methods: ['GET', 'HEAD'], auth, refusesBody: true, wrongMethod: 'method not allowed\n', handle };
}

/** `/metrics`, `/probe`, `/healthz`, `/readyz`, `/` and, with `deps.reload`, `/-/reload`; behind basic auth but `/healthz` and `/readyz`. */
export function serverRoutes(deps: RouteDeps): ReadonlyMap<string, Route> {
  const own = new OwnPart(deps.metrics);
  const probesAuth = deps.healthWithoutAuth === false;
  const routes = new Map<string, Route>([
    [
      '/metrics',
      readOnly(async (req, res) => {
        // The upstream part first: reading it sets the upstream gauges the own part then shows.
        const upstream = await deps.scraper.collect(scrapeBudget(req, deps.defaultScrapeTimeoutMs));
        await sendExposition(req, res, upstream, (format) => own.render(format));
      }),
    ],
    [
      '/probe',
      readOnly(async (req, res, url) => {
        const probe = parseProbeRequest(url.searchParams, deps.scraper.names);
        if ('error' in probe) return send(res, 400, `${probe.error}\n`);
        const upstream = await deps.scraper.collectSource(probe.source, scrapeBudget(req, deps.defaultScrapeTimeoutMs));
        await sendExposition(req, res, upstream, (format) => own.probe(probe.source, format));
      }),
    ],
    ['/healthz', readOnly((_req, res) => send(res, 200, 'ok\n'), probesAuth)],
    [
      '/readyz',
      readOnly(async (_req, res, _url, unchecked) => {
        const readiness = await deps.readiness();
        // The detail may name the database's host and its error: not for a client without credentials.
        const body = unchecked ? (readiness.ready ? 'ready' : 'not ready') : readiness.detail;
        send(res, readiness.ready ? 200 : 503, `${body}\n`);
      }, probesAuth),
    ],
    ['/', readOnly((_req, res) => send(res, 200, landingPage(deps.scraper.names), { type: 'text/html; charset=utf-8' }))],
  ]);
  const reload = deps.reload;
  if (reload !== undefined) {
    routes.set('/-/reload', {
      methods: ['POST'],
      auth: true,
      refusesBody: false,
      wrongMethod: 'method not allowed: POST /-/reload\n',
      handle: async (_req, res) => {
        const result = await reload();
        send(res, result.ok ? 200 : result.status, `${result.message}\n`);
      },
    });
  }
  return routes;
}

/** Sends a text answer (default plain UTF-8) with `cache-control: no-store`; no body for HEAD. */
export function send(res: ServerResponse, status: number, body: string, options: { type?: string; headers?: Record<string, string> } = {}): void {
  const head = res.req.method === 'HEAD';
  res.writeHead(status, { 'content-type': options.type ?? TEXT, 'content-length': Buffer.byteLength(body), 'cache-control': 'no-store', ...options.headers });
  res.end(head ? undefined : body);
}

function scrapeBudget(req: IncomingMessage, defaultScrapeTimeoutMs: number): number {
  return scrapeBudgetMs(scrapeTimeoutFromHeader(req.headers['x-prometheus-scrape-timeout-seconds'], defaultScrapeTimeoutMs));
}

/** The format Accept asks for: the own part, the upstream's, `# EOF` in OpenMetrics. @throws what `ownPart` throws. */
async function sendExposition(
  req: IncomingMessage,
  res: ServerResponse,
  upstream: UpstreamPart,
  ownPart: (format: 'text' | 'openmetrics') => Promise<Buffer>,
): Promise<void> {
  const format = negotiateFormat(req.headers.accept);
  const own = await ownPart(format);
  if (format === 'openmetrics') sendParts(res, OPENMETRICS_CONTENT_TYPE, [own, upstream.openMetrics, OPENMETRICS_EOF]);
  else sendParts(res, TEXT_CONTENT_TYPE, [own, upstream.text]);
}

/** Sends a body made of parts without joining them; no body for HEAD. */
function sendParts(res: ServerResponse, contentType: string, parts: readonly Buffer[]): void {
  res.writeHead(200, { 'content-type': contentType, 'content-length': parts.reduce((n, part) => n + part.length, 0), 'cache-control': 'no-store' });
  if (res.req.method === 'HEAD') {
    res.end();
    return;
  }
  res.cork();
  for (const part of parts) if (part.length > 0) res.write(part);
  res.end();
}

/** The own part of `/metrics` and `/probe` bodies: scrapes that arrive in one turn share one collection. */
class OwnPart {
  readonly #exposition: OwnExposition;
  #pending: Promise<OwnSnapshot> | undefined;
  readonly #rendered = new Map<'text' | 'openmetrics', { from: OwnSnapshot; bytes: Buffer }>();
  readonly #probes = new Map<string, { from: OwnSnapshot; bytes: Buffer }>();

  constructor(metrics: ExporterMetrics) {
    this.#exposition = new OwnExposition(metrics.registry);
  }

  /** @throws what prom-client's collection throws. */
  #collect(): Promise<OwnSnapshot> {
    return (this.#pending ??= new Promise<void>((resolve) => setImmediate(resolve)).then(() => {
      this.#pending = undefined;
      return this.#exposition.collect();
    }));
  }

  /** The series labelled `source="<source>"`, a configured source. @throws what prom-client's collection throws. */
  async probe(source: string, format: 'text' | 'openmetrics'): Promise<Buffer> {
    const snapshot = await this.#collect();
    const key = `${format} ${source}`;
    const rendered = this.#probes.get(key);
    if (rendered?.from === snapshot) return rendered.bytes;
    const families = sourceFamilies(snapshot.families, source);
    const bytes = format === 'openmetrics' ? serializeOpenMetricsBuffer(families, { eof: false }) : serializeTextBuffer(families);
    this.#probes.set(key, { from: snapshot, bytes });
    return bytes;
  }

  /** @throws what prom-client's collection throws. */
  async render(format: 'text' | 'openmetrics'): Promise<Buffer> {
    const snapshot = await this.#collect();
    const rendered = this.#rendered.get(format);
    if (rendered?.from === snapshot) return rendered.bytes;
    const bytes = format === 'openmetrics' ? this.#exposition.openMetrics(snapshot) : this.#exposition.text(snapshot);
    this.#rendered.set(format, { from: snapshot, bytes });
    return bytes;
  }
}

/** A configured source, or the one-line reason for a 400. */
export type ProbeRequest = { source: string } | { error: string };

/** Only input of these shapes is echoed back. */
const SOURCE_NAME = /^[a-z0-9_-]{1,64}$/;
const PARAMETER_NAME = /^[A-Za-z0-9_.-]{1,32}$/;

/**
 * Validates `/probe`'s query: exactly one `source`, a configured one, and no other parameter (none
 * takes a URL or a host: only configured sources are ever read). Never throws.
 */
export function parseProbeRequest(query: URLSearchParams, sources: readonly string[]): ProbeRequest {
  const configured = `the configured sources are ${sources.join(', ')}`;
  for (const name of new Set(query.keys())) {
    if (name !== 'source') {
      return { error: `${PARAMETER_NAME.test(name) ? `unknown parameter ${name}` : 'an unknown parameter'}: /probe takes only source=NAME` };
    }
  }
  const values = query.getAll('source');
  if (values.length === 0) return { error: `missing parameter source: /probe?source=NAME, where ${configured}` };
  if (values.length > 1) return { error: `parameter source given ${values.length} times: /probe reads one source` };
  const name = values[0]!;
  if (!sources.includes(name)) {
    return { error: `${SOURCE_NAME.test(name) ? `unknown source ${name}` : 'source is not a source name ([a-z0-9_-]+)'}: ${configured}` };
  }
  return { source: name };
}

function sourceFamilies(families: readonly MetricFamily[], source: string): MetricFamily[] {
  const out: MetricFamily[] = [];
  for (const family of families) {
    const samples = family.samples.filter((sample) => sample.labels.some(([name, value]) => name === 'source' && value === source));
    if (samples.length > 0) out.push({ ...family, samples });
  }
  return out;
}

function landingPage(sources: readonly string[]): string {
  // Source names are [a-z0-9_-]+: nothing to escape in HTML or in a query.
  const probes = sources.map((name) => `<a href="probe?source=${name}">${name}</a>`).join(', ');
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>analytics-exporter</title></head>
<body>
<h1>analytics-exporter ${VERSION}</h1>
<p>Prometheus exporter and ETL for the forms platform analytics API.</p>
<ul>
<li><a href="metrics">/metrics</a>: the platform's metrics of every source and the exporter's own</li>
<li>/probe?source=NAME: one source's platform metrics and its own series (${probes})</li>
<li><a href="healthz">/healthz</a>: alive</li>
<li><a href="readyz">/readyz</a>: database reachable and migrated</li>
</ul>
</body></html>
`;
}
