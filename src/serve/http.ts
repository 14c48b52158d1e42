/**
 * The HTTP server of `serve`: GET/HEAD `/metrics` (every source), `/probe?source=NAME` (one
 * source), `/healthz` (alive), `/readyz` (database reachable and migrated), `/` (a landing page),
 * POST `/-/reload` (CONFIG_FILE read again); 404 for other paths, 405 for other methods; 400 for
 * a request whose target is not a URL or that is not HTTP, before anything else (src/serve/web/malformed.ts).
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer, type Server as HttpsServer } from 'node:https';
import type { Duplex } from 'node:stream';
import type { TLSSocket } from 'node:tls';
import type { Logger } from '../log.js';
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
import { scrapeBudgetMs, scrapeTimeoutFromHeader, type UpstreamMetrics } from './scrape.js';
import { VERSION } from '../version.js';
import { answerClientError, MalformedRequestLog, requestTarget } from './web/malformed.js';
import { BasicAuth } from './web/basic-auth.js';
import { limitConnections, REFUSAL_REASONS } from './web/connections.js';
import { AuthRefusalLog, DEFAULT_AUTH_FAILURE_BUDGET, FailureBudget } from './web/auth-budget.js';
import { BcryptWorker } from './web/bcrypt-worker.js';
import { matchesAllowedSans, secureContextOptions, type WebConfig, type WebConfigSource } from './web/webconfig.js';

/** Bounds that keep a slow or hostile client from holding the server. */
export const HEADERS_TIMEOUT_MS = 10_000;
export const REQUEST_TIMEOUT_MS = 30_000;
/**
 * How often Node checks open connections against the two timeouts above (its default, 30 s, held
 * a connection that sent its headers a byte at a time for up to 40 s): each expires within a second.
 */
export const CONNECTIONS_CHECKING_INTERVAL_MS = 1_000;
/**
 * An idle keep-alive connection is closed after this. Far below any usual scrape interval (10 s
 * and more, 1 m by default): a scraper's connection does not sit idle holding one of its address's
 * slots between scrapes, and the close never races the next scrape's reuse of it (the client has
 * seen the close seconds before). Requests in one burst (several /probe in a row) still share one.
 */
export const KEEP_ALIVE_TIMEOUT_MS = 5_000;
/** A TLS connection must finish its handshake within this, or is closed (Node's default: 120 s, which let bare TCP connections hold a slot). */
export const TLS_HANDSHAKE_TIMEOUT_MS = 10_000;

export interface Readiness {
  ready: boolean;
  /** One line saying why, for humans and probes' logs. */
  detail: string;
}

export interface ServerDeps {
  metrics: ExporterMetrics;
  /** Every source's E7 reads: all of them for /metrics, one for /probe; its names are the only ones /probe accepts. */
  upstream: UpstreamMetrics;
  /** Database reachable and migrated? Must answer within a few seconds. */
  readiness: () => Promise<Readiness>;
  /** `POST /-/reload`: reads CONFIG_FILE again (src/serve/sources.ts); the path is not served without it. Never rejects. */
  reload?: () => Promise<{ ok: true; message: string } | { ok: false; status: number; message: string }>;
  /** Scrape timeout assumed when Prometheus sends none, in milliseconds. */
  defaultScrapeTimeoutMs: number;
  /**
   * TLS, client certificates, basic auth and headers (WEB_CONFIG_FILE); plain HTTP when absent.
   * Checked for changes on every request and every new connection: a new certificate applies to
   * the connections that follow, new users and headers to the requests that follow.
   */
  web?: WebConfigSource;
  /** Connections one client address may hold open, and all clients together (METRICS_MAX_CONNECTIONS_PER_CLIENT, METRICS_MAX_CONNECTIONS). */
  connections: { perClient: number; total: number };
  /** Failed logins one client address may spend per minute before its uncached attempts are refused (AUTH_FAILURE_BUDGET; 0: no budget). */
  authFailureBudget?: number;
  log: Logger;
}

/** Where `/metrics` bodies end in OpenMetrics. */
const OPENMETRICS_EOF = Buffer.from('# EOF\n');

/**
 * The exporter's own part of `/metrics` bodies: its families from prom-client's objects,
 * serialised in the format asked for (OpenMetrics without `# EOF`), each family's bytes kept
 * until its values change (src/metrics/own-part.ts). Scrapes that arrive in the same turn of the
 * event loop share one collection: under a burst of concurrent scrapes the default metrics
 * (which read /proc) are collected once per turn rather than once per scrape, and every scrape
 * still sees values taken after it arrived.
 */
class OwnPart {
  readonly #exposition: OwnExposition;
  #pending: Promise<OwnSnapshot> | undefined;
  readonly #rendered = new Map<'text' | 'openmetrics', { from: OwnSnapshot; bytes: Buffer }>();
  readonly #probes = new Map<string, { from: OwnSnapshot; bytes: Buffer }>();

  constructor(metrics: ExporterMetrics) {
    this.#exposition = new OwnExposition(metrics.registry);
  }

  /** One collection for every request that arrives in this turn. @throws what prom-client's collection throws. */
  #collect(): Promise<OwnSnapshot> {
    return (this.#pending ??= new Promise<void>((resolve) => setImmediate(resolve)).then(() => {
      // Requests that arrive from now on start the next collection.
      this.#pending = undefined;
      return this.#exposition.collect();
    }));
  }

  /**
   * The own series of one source (those labelled `source="<name>"`) for /probe, serialised in
   * `format` once per collection: the same bytes while the collection is the same.
   *
   * @param source a configured source's name (one entry per source and format is kept).
   * @throws what prom-client's collection throws.
   */
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
    // The scrapes of one turn share one body, made once.
    if (rendered?.from === snapshot) return rendered.bytes;
    const bytes = format === 'openmetrics' ? this.#exposition.openMetrics(snapshot) : this.#exposition.text(snapshot);
    this.#rendered.set(format, { from: snapshot, bytes });
    return bytes;
  }
}

/** What `/probe` was asked for: a configured source, or why the request is refused (one line, no input echoed unless it is a plain name). */
export type ProbeRequest = { source: string } | { error: string };

/** The shape of a source name; anything else is not echoed back. */
const SOURCE_NAME = /^[a-z0-9_-]{1,64}$/;
const PARAMETER_NAME = /^[A-Za-z0-9_.-]{1,32}$/;

/**
 * Validates the query of `/probe`: exactly one `source`, naming a configured source, and no other
 * parameter (none takes a URL or a host: the exporter only ever reads its configured sources).
 *
 * @param query the request's query (`new URL(req.url).searchParams`).
 * @param sources the configured source names, in order.
 * @returns the source to serve, or the one-line reason for a 400. Never throws.
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

/** The own families' series of one source (those labelled `source="<name>"`), for /probe. */
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

function send(res: ServerResponse, status: number, contentType: string, body: string, head: boolean, extra: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': contentType, 'content-length': Buffer.byteLength(body), 'cache-control': 'no-store', ...extra });
  res.end(head ? undefined : body);
}

/** Sends a body made of parts, without joining them into one buffer first. */
function sendParts(res: ServerResponse, contentType: string, parts: readonly Buffer[], head: boolean): void {
  res.writeHead(200, { 'content-type': contentType, 'content-length': parts.reduce((n, part) => n + part.length, 0), 'cache-control': 'no-store' });
  if (head) {
    res.end();
    return;
  }
  res.cork();
  for (const part of parts) if (part.length > 0) res.write(part);
  res.end();
}

/**
 * Applies exporter-toolkit's client_auth_type to a finished TLS handshake. Node can only demand
 * *verified* certificates during the handshake (RequireAndVerifyClientCert); the other modes
 * request a certificate and are judged here, closing connections that break the rule.
 */
function acceptsClient(socket: TLSSocket, tls: NonNullable<WebConfig['tls']>): boolean {
  const peer = socket.getPeerCertificate();
  const presented = Object.keys(peer ?? {}).length > 0;
  // client_allowed_sans is only allowed with the two modes that demand a certificate.
  const sansOk = tls.allowedSans === undefined || (presented && matchesAllowedSans(peer.subjectaltname, tls.allowedSans));
  switch (tls.clientAuth) {
    case 'RequireAnyClientCert':
      return presented && sansOk;
    case 'VerifyClientCertIfGiven':
      return !presented || socket.authorized;
    case 'RequireAndVerifyClientCert':
      return presented && socket.authorized && sansOk;
    default:
      return true;
  }
}

/** Node's TLS server decides whether to ask for a client certificate from these two fields, read per connection. */
function setClientAuth(server: HttpsServer, tls: NonNullable<WebConfig['tls']>): void {
  const fields = server as unknown as { requestCert: boolean; rejectUnauthorized: boolean };
  fields.requestCert = tls.clientAuth !== 'NoClientCert';
  fields.rejectUnauthorized = tls.clientAuth === 'RequireAndVerifyClientCert';
}

/**
 * Creates (does not start) the server.
 *
 * /metrics never fails for an upstream fault: it answers 200 within the scrape timeout with the
 * exporter's own metrics and the samples of every source that could be read in time. /probe does
 * the same for one source, with only that source's own series (blackbox_exporter's probe
 * pattern); a missing, repeated or unconfigured `source`, or any other parameter, is a 400 and
 * reads nothing.
 */
export function createMetricsServer(deps: ServerDeps): Server {
  const { log } = deps;
  const source = deps.web;
  let web = source?.current;
  // One budget and one bcrypt worker per server: they outlive a change of users.
  const budget = new FailureBudget(deps.authFailureBudget ?? DEFAULT_AUTH_FAILURE_BUDGET);
  const bcrypt = new BcryptWorker();
  const newAuth = (users: Record<string, string>): BasicAuth => new BasicAuth(users, { budget, bcrypt });
  let auth = newAuth(web?.users ?? {});
  const refused = new AuthRefusalLog(log);
  for (const reason of ['budget', 'busy'] as const) deps.metrics.authThrottled.inc({ reason }, 0);
  let server: Server;
  /** Takes up the web configuration's latest state; a few stat calls when nothing changed. */
  const refresh = (): void => {
    const next = source?.refresh();
    if (next === undefined || next === web) return;
    if (next.tls !== undefined) {
      try {
        (server as HttpsServer).setSecureContext(secureContextOptions(next.tls));
        setClientAuth(server as HttpsServer, next.tls);
      } catch (err) {
        // Checked when it was read, so not expected; the old context stays.
        log.warn({ err }, 'the new TLS configuration could not be applied; the previous one stays in use');
        return;
      }
    }
    if (next.users !== web?.users) auth = newAuth(next.users);
    web = next;
  };
  const own = new OwnPart(deps.metrics);
  const malformed = new MalformedRequestLog(log);
  const handle = async (req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> => {
    refresh();
    for (const [name, value] of Object.entries(web?.headers ?? {})) res.setHeader(name, value);
    const path = url.pathname;
    const head = req.method === 'HEAD';
    const verdict = auth.enabled ? await auth.verify(req.headers.authorization, req.socket.remoteAddress) : { outcome: 'ok' as const };
    if (verdict.outcome === 'busy' || verdict.outcome === 'budget') {
      // Refused without running bcrypt: as many checks run as BasicAuth allows, or this address spent its failed logins.
      deps.metrics.authThrottled.inc({ reason: verdict.outcome });
      refused.record(verdict.outcome, req.socket.remoteAddress);
      const body = verdict.outcome === 'busy' ? 'too many password checks in progress; retry\n' : 'too many failed logins from this address; retry later\n';
      return send(res, 429, 'text/plain; charset=utf-8', body, head, { 'retry-after': String(verdict.retryAfterSeconds) });
    }
    if (verdict.outcome === 'denied') {
      return send(res, 401, 'text/plain; charset=utf-8', 'unauthorized\n', head, { 'www-authenticate': 'Basic realm="analytics-exporter", charset="UTF-8"' });
    }
    if (path === '/-/reload' && deps.reload !== undefined) {
      if (req.method !== 'POST') return send(res, 405, 'text/plain; charset=utf-8', 'method not allowed: POST /-/reload\n', false, { allow: 'POST' });
      const reload = await deps.reload();
      return send(res, reload.ok ? 200 : reload.status, 'text/plain; charset=utf-8', `${reload.message}\n`, false);
    }
    const known = path === '/metrics' || path === '/probe' || path === '/healthz' || path === '/readyz' || path === '/';
    if (!known) return send(res, 404, 'text/plain; charset=utf-8', 'not found\n', head);
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      return send(res, 405, 'text/plain; charset=utf-8', 'method not allowed\n', false, { allow: 'GET, HEAD' });
    }
    if (Number(req.headers['content-length'] ?? 0) > 0 || req.headers['transfer-encoding'] !== undefined) {
      return send(res, 413, 'text/plain; charset=utf-8', 'request bodies are not accepted\n', head);
    }
    switch (path) {
      case '/healthz':
        return send(res, 200, 'text/plain; charset=utf-8', 'ok\n', head);
      case '/readyz': {
        const readiness = await deps.readiness();
        return send(res, readiness.ready ? 200 : 503, 'text/plain; charset=utf-8', `${readiness.detail}\n`, head);
      }
      case '/':
        return send(res, 200, 'text/html; charset=utf-8', landingPage(deps.upstream.names), head);
      case '/probe': {
        const probe = parseProbeRequest(url.searchParams, deps.upstream.names);
        if ('error' in probe) return send(res, 400, 'text/plain; charset=utf-8', `${probe.error}\n`, head);
        const timeoutMs = scrapeTimeoutFromHeader(req.headers['x-prometheus-scrape-timeout-seconds'], deps.defaultScrapeTimeoutMs);
        const upstream = await deps.upstream.collectSource(probe.source, scrapeBudgetMs(timeoutMs));
        const format = negotiateFormat(req.headers.accept);
        const ownPart = await own.probe(probe.source, format);
        return format === 'openmetrics'
          ? sendParts(res, OPENMETRICS_CONTENT_TYPE, [ownPart, upstream.openMetrics, OPENMETRICS_EOF], head)
          : sendParts(res, TEXT_CONTENT_TYPE, [ownPart, upstream.text], head);
      }
      default: {
        const timeoutMs = scrapeTimeoutFromHeader(req.headers['x-prometheus-scrape-timeout-seconds'], deps.defaultScrapeTimeoutMs);
        // The upstream part first: reading it sets the upstream gauges the own part then shows.
        const upstream = await deps.upstream.collect(scrapeBudgetMs(timeoutMs));
        const format = negotiateFormat(req.headers.accept);
        const ownPart = await own.render(format);
        return format === 'openmetrics'
          ? sendParts(res, OPENMETRICS_CONTENT_TYPE, [ownPart, upstream.openMetrics, OPENMETRICS_EOF], head)
          : sendParts(res, TEXT_CONTENT_TYPE, [ownPart, upstream.text], head);
      }
    }
  };

  const listener = (req: IncomingMessage, res: ServerResponse) => {
    // Drain and ignore any body so the connection stays usable; we never read one.
    req.resume();
    const url = requestTarget(req.url);
    if (url === undefined) {
      // Nothing but the parse: no web configuration check, no authentication, no handler.
      malformed.record('target', req.socket.remoteAddress);
      for (const [name, value] of Object.entries(web?.headers ?? {})) res.setHeader(name, value);
      return send(res, 400, 'text/plain; charset=utf-8', 'bad request: the request target is not a URL\n', req.method === 'HEAD', { connection: 'close' });
    }
    handle(req, res, url).catch((err: unknown) => {
      log.error({ err }, 'request handler failed');
      if (!res.headersSent) send(res, 500, 'text/plain; charset=utf-8', 'internal error\n', false);
      else res.destroy();
    });
  };
  const tls = web?.tls;
  const timeouts = {
    headersTimeout: HEADERS_TIMEOUT_MS,
    requestTimeout: REQUEST_TIMEOUT_MS,
    keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS,
    connectionsCheckingInterval: CONNECTIONS_CHECKING_INTERVAL_MS,
  };
  if (tls === undefined) {
    server = createServer(timeouts, listener);
  } else {
    server = createHttpsServer(
      {
        ...timeouts,
        ...secureContextOptions(tls),
        requestCert: tls.clientAuth !== 'NoClientCert',
        rejectUnauthorized: tls.clientAuth === 'RequireAndVerifyClientCert',
        handshakeTimeout: TLS_HANDSHAKE_TIMEOUT_MS,
      },
      listener,
    );
    // Before Node's own listener, which starts the handshake with the context of that moment.
    server.prependListener('connection', refresh);
    server.on('secureConnection', (socket: TLSSocket) => {
      const current = web?.tls;
      if (current !== undefined && !acceptsClient(socket, current)) {
        log.warn(
          { clientAuth: current.clientAuth, remote: socket.remoteAddress },
          'closed a TLS connection whose client certificate breaks client_auth_type or client_allowed_sans',
        );
        socket.destroy();
      }
    });
    server.on('tlsClientError', (err: Error) => log.debug({ err }, 'TLS handshake failed'));
  }
  // Bytes that are not HTTP: answered as Node would (400, 431, 408) and counted, never logged per request.
  server.on('clientError', (err: Error, socket: Duplex) => answerClientError(err, socket, malformed));
  server.on('close', () => {
    malformed.close();
    refused.close();
    void bcrypt.close();
  });
  // Last: it takes over the `connection` listeners added before it (Node's and the TLS refresh), refused connections reach none.
  const connectionsRefused = deps.metrics.httpConnectionsRefused;
  for (const reason of REFUSAL_REASONS) connectionsRefused.inc({ reason }, 0);
  limitConnections(server, { ...deps.connections, onRefused: (reason) => connectionsRefused.inc({ reason }), log });
  return server;
}
