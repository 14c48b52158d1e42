/**
 * The HTTP server of `serve`: the route table (routes.ts) behind WEB_CONFIG_FILE's TLS, basic auth
 * and headers, taken up again as the file changes; malformed requests answered 400 before anything
 * else; connection limits and timeouts bounding what one client may hold. See
 * docs/design/http-hardening.md.
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

/** Bounds on slow clients; why each: the design page's Timeouts. */
const HEADERS_TIMEOUT_MS = 10_000;
const REQUEST_TIMEOUT_MS = 30_000;
const CONNECTIONS_CHECKING_INTERVAL_MS = 1_000;
/** Far below any scrape interval: an idle scraper's connection holds no slot between scrapes. */
const KEEP_ALIVE_TIMEOUT_MS = 5_000;
const TLS_HANDSHAKE_TIMEOUT_MS = 10_000;

export interface ServerDeps extends RouteDeps {
  /** WEB_CONFIG_FILE, checked for changes on every request and new connection; plain HTTP when absent. */
  web?: WebConfigSource;
  /** METRICS_MAX_CONNECTIONS_PER_CLIENT, METRICS_MAX_CONNECTIONS. */
  connections: { perClient: number; total: number };
  /** AUTH_FAILURE_BUDGET; 0: no budget. */
  authFailureBudget?: number;
  log: Logger;
}

/** client_auth_type and client_allowed_sans on a finished handshake: Node only demands verified certificates itself. */
function acceptsClient(socket: TLSSocket, tls: NonNullable<WebConfig['tls']>): boolean {
  const peer = socket.getPeerCertificate();
  const presented = Object.keys(peer ?? {}).length > 0;
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

/** Node's TLS server reads these two fields per connection. */
function setClientAuth(server: HttpsServer, tls: NonNullable<WebConfig['tls']>): void {
  const fields = server as unknown as { requestCert: boolean; rejectUnauthorized: boolean };
  fields.requestCert = tls.clientAuth !== 'NoClientCert';
  fields.rejectUnauthorized = tls.clientAuth === 'RequireAndVerifyClientCert';
}

/** WEB_CONFIG_FILE as one server uses it; the failure budget and bcrypt worker outlive a change of users. */
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

  /** @param server the server a new TLS context goes to, once created. */
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

  get tls(): WebConfig['tls'] {
    return this.#web?.tls;
  }

  /** Takes up the latest state, a new TLS context included; a few stat calls when nothing changed. */
  refresh(): void {
    const next = this.#source?.refresh();
    if (next === undefined || next === this.#web) return;
    if (next.tls !== undefined) {
      const server = this.#server();
      try {
        (server as HttpsServer).setSecureContext(secureContextOptions(next.tls));
        setClientAuth(server as HttpsServer, next.tls);
      } catch (err) {
        // Not expected (checked when read); the old context stays.
        this.#log.warn({ err }, 'the new TLS configuration could not be applied; the previous one stays in use');
        return;
      }
    }
    if (next.users !== this.#web?.users) this.#auth = this.#newAuth(next.users);
    this.#web = next;
  }

  /** Whether basic auth is on (users configured). */
  get authEnabled(): boolean {
    return this.#auth.enabled;
  }

  setHeaders(res: ServerResponse): void {
    for (const [name, value] of Object.entries(this.#web?.headers ?? {})) res.setHeader(name, value);
  }

  /** Basic auth when users are configured; answers 401 or 429 itself. @returns whether the request may go on. */
  async admit(req: IncomingMessage, res: ServerResponse): Promise<boolean> {
    if (!this.#auth.enabled) return true;
    const verdict = await this.#auth.verify(req.headers.authorization, req.socket.remoteAddress);
    if (verdict.outcome === 'busy' || verdict.outcome === 'budget') {
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
 * One request: basic auth on every path the table guards, unknown ones too, so a client without
 * credentials learns nothing; then the table. An unguarded path never checks credentials, so it
 * spends no failed login of the budget.
 */
async function answer(web: WebConfigInUse, routes: ReadonlyMap<string, Route>, req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> {
  web.refresh();
  web.setHeaders(res);
  const route = routes.get(url.pathname);
  const guarded = route?.auth ?? true;
  if (guarded && !(await web.admit(req, res))) return;
  if (route === undefined) return send(res, 404, 'not found\n');
  if (!route.methods.includes(req.method ?? '')) return send(res, 405, route.wrongMethod, { headers: { allow: route.methods.join(', ') } });
  if (route.refusesBody && (Number(req.headers['content-length'] ?? 0) > 0 || req.headers['transfer-encoding'] !== undefined)) {
    return send(res, 413, 'request bodies are not accepted\n');
  }
  await route.handle(req, res, url, !guarded && web.authEnabled);
}

const TIMEOUTS = {
  headersTimeout: HEADERS_TIMEOUT_MS,
  requestTimeout: REQUEST_TIMEOUT_MS,
  keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS,
  connectionsCheckingInterval: CONNECTIONS_CHECKING_INTERVAL_MS,
};

/** A TLS server whose connections take up the latest web configuration before Node starts their handshake. */
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

/** Creates (does not start) the server. */
export function createMetricsServer(deps: ServerDeps): Server {
  const { log } = deps;
  const web = new WebConfigInUse(deps, () => server);
  const routes = serverRoutes(deps);
  const malformed = new MalformedRequestLog(log);
  const listener: RequestListener = (req, res) => {
    // Drained and ignored, so the connection stays usable.
    req.resume();
    const url = requestTarget(req.url);
    if (url === undefined) {
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
  server.on('clientError', (err: Error, socket: Duplex) => answerClientError(err, socket, malformed));
  server.on('close', () => {
    malformed.close();
    web.close();
  });
  // Last: it takes over the `connection` listeners added before it.
  const connectionsRefused = deps.metrics.http.connectionsRefused;
  for (const reason of REFUSAL_REASONS) connectionsRefused.inc({ reason }, 0);
  limitConnections(server, { ...deps.connections, onRefused: (reason) => connectionsRefused.inc({ reason }), log });
  return server;
}
