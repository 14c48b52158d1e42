/**
 * The HTTP server of `serve`: the paths of the route table (src/serve/routes.ts: GET/HEAD
 * `/metrics`, `/probe?source=NAME`, `/healthz`, `/readyz`, `/`; POST `/-/reload`), behind
 * WEB_CONFIG_FILE's TLS, basic auth and headers, taken up again as the file changes; 404 for other
 * paths, 405 for other methods; 400 for a request whose target is not a URL or that is not HTTP,
 * before anything else (src/serve/web/malformed.ts). Connection limits and timeouts bound what one
 * slow or hostile client may hold.
 */
import { createServer, type IncomingMessage, type RequestListener, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer, type Server as HttpsServer } from 'node:https';
import type { Duplex } from 'node:stream';
import type { TLSSocket } from 'node:tls';
import type { Logger } from '../log.js';
import type { ExporterMetrics } from '../metrics/registry.js';
import { send, serverRoutes, type Route, type RouteDeps } from './routes.js';
import { answerClientError, MalformedRequestLog, requestTarget } from './web/malformed.js';
import { BasicAuth } from './web/basic-auth.js';
import { limitConnections, REFUSAL_REASONS } from './web/connections.js';
import { AuthRefusalLog, DEFAULT_AUTH_FAILURE_BUDGET, FailureBudget } from './web/auth-budget.js';
import { BcryptWorker } from './web/bcrypt-worker.js';
import { matchesAllowedSans, secureContextOptions, type WebConfig, type WebConfigSource } from './web/webconfig.js';

/** Bounds that keep a slow or hostile client from holding the server. */
const HEADERS_TIMEOUT_MS = 10_000;
const REQUEST_TIMEOUT_MS = 30_000;
/**
 * How often Node checks open connections against the two timeouts above (its default, 30 s, held
 * a connection that sent its headers a byte at a time for up to 40 s): each expires within a second.
 */
const CONNECTIONS_CHECKING_INTERVAL_MS = 1_000;
/**
 * An idle keep-alive connection is closed after this. Far below any usual scrape interval (10 s
 * and more, 1 m by default): a scraper's connection does not sit idle holding one of its address's
 * slots between scrapes, and the close never races the next scrape's reuse of it (the client has
 * seen the close seconds before). Requests in one burst (several /probe in a row) still share one.
 */
const KEEP_ALIVE_TIMEOUT_MS = 5_000;
/** A TLS connection must finish its handshake within this, or is closed (Node's default: 120 s, which let bare TCP connections hold a slot). */
const TLS_HANDSHAKE_TIMEOUT_MS = 10_000;

export interface ServerDeps extends RouteDeps {
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
 * WEB_CONFIG_FILE as in use by one server: taken up again on every request and every new TLS
 * connection (a new certificate, new users, new headers), its users checked by one BasicAuth whose
 * failure budget and bcrypt worker outlive a change of users.
 */
class WebConfigInUse {
  readonly #server: () => Server;
  readonly #source: WebConfigSource | undefined;
  #web: WebConfig | undefined;
  #auth: BasicAuth;
  readonly #budget: FailureBudget;
  readonly #bcrypt = new BcryptWorker();
  readonly #refused: AuthRefusalLog;
  readonly #metrics: ExporterMetrics;
  readonly #log: Logger;

  /** @param server the server it configures (a new TLS context goes to it), once created. */
  constructor(deps: ServerDeps, server: () => Server) {
    this.#server = server;
    this.#source = deps.web;
    this.#web = deps.web?.current;
    this.#budget = new FailureBudget(deps.authFailureBudget ?? DEFAULT_AUTH_FAILURE_BUDGET);
    this.#auth = this.#newAuth(this.#web?.users ?? {});
    this.#refused = new AuthRefusalLog(deps.log);
    this.#metrics = deps.metrics;
    this.#log = deps.log;
    for (const reason of ['budget', 'busy'] as const) deps.metrics.http.authThrottled.inc({ reason }, 0);
  }

  /** The TLS settings in use; undefined for plain HTTP. */
  get tls(): WebConfig['tls'] {
    return this.#web?.tls;
  }

  /** Takes up the web configuration's latest state, a new TLS context included; a few stat calls when nothing changed. */
  refresh(): void {
    const next = this.#source?.refresh();
    if (next === undefined || next === this.#web) return;
    if (next.tls !== undefined) {
      const server = this.#server();
      try {
        (server as HttpsServer).setSecureContext(secureContextOptions(next.tls));
        setClientAuth(server as HttpsServer, next.tls);
      } catch (err) {
        // Checked when it was read, so not expected; the old context stays.
        this.#log.warn({ err }, 'the new TLS configuration could not be applied; the previous one stays in use');
        return;
      }
    }
    if (next.users !== this.#web?.users) this.#auth = this.#newAuth(next.users);
    this.#web = next;
  }

  /** Sets the configured headers (http_server_config.headers) on a response. */
  setHeaders(res: ServerResponse): void {
    for (const [name, value] of Object.entries(this.#web?.headers ?? {})) res.setHeader(name, value);
  }

  /**
   * Checks the request's basic auth credentials when users are configured; answers 401 (denied)
   * or 429 (too many checks in progress, or this address spent its failed logins) itself.
   *
   * @returns whether the request may go on.
   */
  async admit(req: IncomingMessage, res: ServerResponse): Promise<boolean> {
    if (!this.#auth.enabled) return true;
    const verdict = await this.#auth.verify(req.headers.authorization, req.socket.remoteAddress);
    if (verdict.outcome === 'busy' || verdict.outcome === 'budget') {
      // Refused without running bcrypt: as many checks run as BasicAuth allows, or this address spent its failed logins.
      this.#metrics.http.authThrottled.inc({ reason: verdict.outcome });
      this.#refused.record(verdict.outcome, req.socket.remoteAddress);
      const body = verdict.outcome === 'busy' ? 'too many password checks in progress; retry\n' : 'too many failed logins from this address; retry later\n';
      send(res, 429, body, { headers: { 'retry-after': String(verdict.retryAfterSeconds) } });
      return false;
    }
    if (verdict.outcome === 'denied') {
      send(res, 401, 'unauthorized\n', { headers: { 'www-authenticate': 'Basic realm="analytics-exporter", charset="UTF-8"' } });
      return false;
    }
    return true;
  }

  close(): void {
    this.#refused.close();
    void this.#bcrypt.close();
  }

  #newAuth(users: Record<string, string>): BasicAuth {
    return new BasicAuth(users, { budget: this.#budget, bcrypt: this.#bcrypt });
  }
}

/**
 * Answers one request from the route table (src/serve/routes.ts): the web configuration taken up
 * and its headers set, basic auth (every path, unknown ones too, so that a client without
 * credentials learns nothing of what is served), then 404 for a path not in the table, 405 for a
 * method the path does not answer, 413 for a body where none is taken, else the path's handler.
 */
async function answer(web: WebConfigInUse, routes: ReadonlyMap<string, Route>, req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> {
  web.refresh();
  web.setHeaders(res);
  const route = routes.get(url.pathname);
  if ((route?.auth ?? true) && !(await web.admit(req, res))) return;
  if (route === undefined) return send(res, 404, 'not found\n');
  if (!route.methods.includes(req.method ?? '')) return send(res, 405, route.wrongMethod, { headers: { allow: route.methods.join(', ') } });
  if (route.refusesBody && (Number(req.headers['content-length'] ?? 0) > 0 || req.headers['transfer-encoding'] !== undefined)) {
    return send(res, 413, 'request bodies are not accepted\n');
  }
  await route.handle(req, res, url);
}

/** Node's bounds on slow clients (see the constants above). */
const TIMEOUTS = {
  headersTimeout: HEADERS_TIMEOUT_MS,
  requestTimeout: REQUEST_TIMEOUT_MS,
  keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS,
  connectionsCheckingInterval: CONNECTIONS_CHECKING_INTERVAL_MS,
};

/**
 * A TLS server for `tls` whose connections take up the web configuration's latest state first
 * (before Node's own listener starts the handshake with the context of that moment), and close
 * when the client certificate breaks client_auth_type or client_allowed_sans.
 */
function createTlsServer(web: WebConfigInUse, tls: NonNullable<WebConfig['tls']>, listener: RequestListener, log: Logger): HttpsServer {
  const server = createHttpsServer(
    {
      ...TIMEOUTS,
      ...secureContextOptions(tls),
      requestCert: tls.clientAuth !== 'NoClientCert',
      rejectUnauthorized: tls.clientAuth === 'RequireAndVerifyClientCert',
      handshakeTimeout: TLS_HANDSHAKE_TIMEOUT_MS,
    },
    listener,
  );
  server.prependListener('connection', () => web.refresh());
  server.on('secureConnection', (socket: TLSSocket) => {
    const current = web.tls;
    if (current !== undefined && !acceptsClient(socket, current)) {
      log.warn(
        { clientAuth: current.clientAuth, remote: socket.remoteAddress },
        'closed a TLS connection whose client certificate breaks client_auth_type or client_allowed_sans',
      );
      socket.destroy();
    }
  });
  server.on('tlsClientError', (err: Error) => log.debug({ err }, 'TLS handshake failed'));
  return server;
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
  const web = new WebConfigInUse(deps, () => server);
  const routes = serverRoutes(deps);
  const malformed = new MalformedRequestLog(log);
  const listener: RequestListener = (req, res) => {
    // Drain and ignore any body so the connection stays usable; we never read one.
    req.resume();
    const url = requestTarget(req.url);
    if (url === undefined) {
      // Nothing but the parse: no web configuration check, no authentication, no handler.
      malformed.record('target', req.socket.remoteAddress);
      web.setHeaders(res);
      return send(res, 400, 'bad request: the request target is not a URL\n', { headers: { connection: 'close' } });
    }
    answer(web, routes, req, res, url).catch((err: unknown) => {
      log.error({ err }, 'request handler failed');
      if (!res.headersSent) send(res, 500, 'internal error\n');
      else res.destroy();
    });
  };
  const tls = web.tls;
  const server: Server = tls === undefined ? createServer(TIMEOUTS, listener) : createTlsServer(web, tls, listener, log);
  // Bytes that are not HTTP: answered as Node would (400, 431, 408) and counted, never logged per request.
  server.on('clientError', (err: Error, socket: Duplex) => answerClientError(err, socket, malformed));
  server.on('close', () => {
    malformed.close();
    web.close();
  });
  // Last: it takes over the `connection` listeners added before it (Node's and the TLS refresh), refused connections reach none.
  const connectionsRefused = deps.metrics.http.connectionsRefused;
  for (const reason of REFUSAL_REASONS) connectionsRefused.inc({ reason }, 0);
  limitConnections(server, { ...deps.connections, onRefused: (reason) => connectionsRefused.inc({ reason }), log });
  return server;
}
