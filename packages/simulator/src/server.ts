/**
 * The simulator's HTTP(S) server: E0 (`POST /connect/token`), E6 (`GET /analytics`) and E7
 * (`GET /analytics/prometheus`) on one host, over a {@link Dataset}, with fault injection.
 *
 * Where the reference is silent (error statuses and bodies, E7's optional parameters, rate
 * limits) the behaviour follows the RFCs named at each handler and is our guess; docs/simulator.md
 * lists these choices.
 */
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { AdminEndpoints } from './admin.js';
import { Link } from './bandwidth.js';
import { resolveBehaviours } from './behaviours.js';
import { Dataset } from './dataset.js';
import { DataEndpoints } from './endpoints.js';
import { InvalidArgumentError } from './errors.js';
import { shouldGzip } from './gzip.js';
import { OutOfRange } from './out-of-range.js';
import { RECORD_ORDERS, type RecordOrder } from './order.js';
import { ParameterError } from './params.js';
import { mulberry32 } from './random.js';
import { Responder } from './respond.js';
import {
  ANALYTICS_ONLY_FAULTS,
  checkFaultNumbers,
  DEFAULT_CLIENT_ID,
  DEFAULT_CLIENT_SECRET,
  DEFAULT_SCOPE,
  DEFAULT_TOKEN_LIFETIME_SECONDS,
  emptyStats,
  faultLabel,
  NO_FAULTS,
  type FaultRequest,
  type FaultSettings,
  type FaultTarget,
  type QueuedFault,
  type Simulator,
  type SimulatorOptions,
  type SimulatorStats,
} from './settings.js';
import { TokenEndpoint } from './token.js';
import { RecordView } from './view.js';

interface QueueEntry {
  fault: QueuedFault;
  remaining: number;
  target: FaultTarget;
  when: ((request: FaultRequest) => boolean) | undefined;
}

type Endpoint = 'analytics' | 'prometheus';

/** @returns `value` when it is one of {@link RECORD_ORDERS}. @throws {InvalidArgumentError} otherwise, naming the value. */
function checkOrder(value: unknown): RecordOrder {
  if (!(RECORD_ORDERS as readonly unknown[]).includes(value)) {
    throw new InvalidArgumentError(`order must be ${RECORD_ORDERS.join(', ')}; got ${String(value)}`);
  }
  return value as RecordOrder;
}

/**
 * Starts the simulator and resolves once it listens.
 *
 * Serves E0 `POST /connect/token`, E6 `GET /analytics`, E7 `GET /analytics/prometheus`
 * (reference: Authentication, E0, E6, E7, Limits), and with `admin` the admin requests under
 * `/admin/`; anything else is 404, a wrong method 405.
 *
 * @throws {InvalidArgumentError} for invalid dataset, fault, order or behaviour options.
 * @throws the listen error (e.g. `EADDRINUSE`, `EACCES`) when the port cannot be bound.
 */
export async function startSimulator(options: SimulatorOptions = {}): Promise<Simulator> {
  const dataset = options.dataset ?? new Dataset(options);
  const host = options.host ?? '127.0.0.1';
  const lifetimeSeconds = options.tokenLifetimeSeconds ?? DEFAULT_TOKEN_LIFETIME_SECONDS;
  if (!Number.isSafeInteger(lifetimeSeconds) || lifetimeSeconds < 1) {
    throw new InvalidArgumentError(`tokenLifetimeSeconds must be a whole number ≥ 1; got ${lifetimeSeconds}`);
  }
  /** The live order (see {@link Simulator.order}); read by every E6 request. */
  let order = checkOrder(options.order ?? 'stable');
  const log = options.logger;
  const faults: FaultSettings = { ...NO_FAULTS, ...options.faults };
  checkFaultNumbers(faults);
  const behaviours = resolveBehaviours(options);
  const toInclusive = (options.toDate ?? 'inclusive') === 'inclusive';
  const view = new RecordView(dataset, {
    filterTimeLagMs: behaviours.filterTimeLagMs,
    outOfRange: behaviours.outOfRangeEvery > 0 ? new OutOfRange(dataset, behaviours.outOfRangeEvery, behaviours.outOfRangeValues) : undefined,
    toInclusive,
  });

  /** The fault each response got, for onRequest. */
  const injected = new WeakMap<http.ServerResponse, string>();
  const queue: QueueEntry[] = [];
  const random = mulberry32(dataset.seed ^ 0x2545f491);
  const stats: SimulatorStats = emptyStats();
  let closed = false;
  const link = behaviours.bandwidthBytesPerSecond > 0 ? new Link(behaviours.bandwidthBytesPerSecond) : undefined;
  const respond = new Responder(stats, faults, () => closed, link);
  const token = new TokenEndpoint(
    {
      clientId: options.clientId ?? DEFAULT_CLIENT_ID,
      scope: options.scope ?? DEFAULT_SCOPE,
      lifetimeSeconds,
      tokenPrefix: options.tokenPrefix ?? '',
      now: options.now ?? Date.now,
    },
    options.clientSecret ?? DEFAULT_CLIENT_SECRET,
    faults,
    respond,
  );

  // "Every Nth" counters restart whenever their setting changes value (or, for arrivals, object).
  const periodic = new Map<string, { setting: unknown; count: number }>();
  const tick = (name: string, setting: unknown): number => {
    let state = periodic.get(name);
    if (state === undefined || state.setting !== setting) {
      state = { setting, count: 0 };
      periodic.set(name, state);
    }
    return ++state.count;
  };
  const everyNth = (name: string, every: number): boolean => every > 0 && tick(name, every) % every === 0;

  /** The token bucket of `faults.rateLimit`, started full for each new setting object. */
  let bucket: { setting: NonNullable<FaultSettings['rateLimit']>; tokens: number; atMs: number } | undefined;
  /** Takes a token of `faults.rateLimit`; returns undefined when the request may go on, else the seconds to wait (≥ 1). */
  const overRateLimit = (): number | undefined => {
    const limit = faults.rateLimit;
    if (limit === undefined) return undefined;
    const t = performance.now();
    if (bucket === undefined || bucket.setting !== limit) bucket = { setting: limit, tokens: limit.burst, atMs: t };
    bucket.tokens = Math.min(limit.burst, bucket.tokens + ((t - bucket.atMs) / 1000) * limit.perSecond);
    bucket.atMs = t;
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      return undefined;
    }
    return Math.max(1, Math.ceil((1 - bucket.tokens) / limit.perSecond));
  };

  const admin = behaviours.admin ? new AdminEndpoints(dataset, view, respond, stats) : undefined;
  const data = new DataEndpoints({
    dataset,
    view,
    pageSizeCap: behaviours.pageSizeCap,
    pageSizeCapEcho: behaviours.pageSizeCapEcho,
    faults,
    toInclusive,
    prometheusHelp: options.prometheusHelp === true,
    order: () => order,
    // Draws each E6 request's order; seeded, so a run repeats, and advanced per request, so two requests differ.
    orderRandom: mulberry32(dataset.seed ^ 0x0bad5eed),
    tick,
    everyNth,
    markInjected: (res, fault) => injected.set(res, fault),
    respond,
  });

  // ----------------------------------------------------------------------------------------
  // Faults.

  const takeQueuedFault = (endpoint: Endpoint | 'token', url: URL): QueuedFault | undefined => {
    const index = queue.findIndex(
      (e) =>
        (endpoint === 'token'
          ? e.target === 'token'
          : (e.target === 'any' || e.target === endpoint) && (endpoint === 'analytics' || !ANALYTICS_ONLY_FAULTS.has(e.fault))) &&
        (e.when === undefined || e.when({ endpoint, url })),
    );
    if (index < 0) return undefined;
    const entry = queue[index]!;
    entry.remaining--;
    if (entry.remaining <= 0) queue.splice(index, 1);
    return entry.fault;
  };

  /**
   * Faults decided before the body is built: a queued status, the rate limit, `rateLimitEvery`, random errors.
   * @returns true when the request has been answered.
   */
  const answeredByFault = (res: http.ServerResponse, queued: QueuedFault | undefined): boolean => {
    if (typeof queued === 'object') {
      const headers: http.OutgoingHttpHeaders = {};
      if (queued.retryAfter !== undefined) headers['retry-after'] = queued.retryAfter;
      if (queued.status === 401) headers['www-authenticate'] = 'Bearer realm="simulator", error="invalid_token"';
      respond.sendJson(res, queued.status, { error: 'simulated_fault', status: queued.status }, headers);
      return true;
    }
    const waitSeconds = overRateLimit();
    if (waitSeconds !== undefined) {
      injected.set(res, 'rate-limit');
      const limit = faults.rateLimit!;
      respond.sendJson(
        res,
        429,
        { error: 'rate_limited', error_description: `more than ${limit.perSecond} requests per second (burst ${limit.burst})` },
        { 'retry-after': String(waitSeconds) },
      );
      return true;
    }
    if (everyNth('rateLimit', faults.rateLimitEvery)) {
      injected.set(res, 'rate-limit');
      respond.sendJson(res, 429, { error: 'rate_limited', error_description: 'too many requests' }, { 'retry-after': String(faults.retryAfterSeconds) });
      return true;
    }
    if (faults.errorRate > 0 && random() < faults.errorRate) {
      injected.set(res, 'error-rate');
      respond.sendJson(res, faults.errorStatus, { error: 'simulated_error', status: faults.errorStatus });
      return true;
    }
    return false;
  };

  // ----------------------------------------------------------------------------------------
  // Routing.

  /** Which endpoint a path is on which port; undefined = not served there. */
  const endpointOf = (path: string, authPort: boolean): Endpoint | 'token' | undefined => {
    if (path === '/connect/token') return authPort || options.separateAuth !== true ? 'token' : undefined;
    if (authPort) return undefined;
    return path === '/analytics' ? 'analytics' : path === '/analytics/prometheus' ? 'prometheus' : undefined;
  };

  const route = async (req: http.IncomingMessage, res: http.ServerResponse, authPort: boolean): Promise<void> => {
    const url = new URL(req.url ?? '/', 'http://simulator.invalid');
    const path = url.pathname;
    const endpoint = endpointOf(path, authPort);
    if (endpoint === 'token') stats.tokenRequests++;
    else if (endpoint === 'analytics') stats.analyticsRequests++;
    else if (endpoint === 'prometheus') stats.prometheusRequests++;
    else stats.otherRequests++;

    if (faults.latencyMs > 0) await sleep(faults.latencyMs);
    if (closed) return;

    if (endpoint === undefined && admin !== undefined && !authPort && path.startsWith('/admin/')) {
      await admin.handle(req, res, path);
      return;
    }
    if (endpoint === undefined) {
      respond.sendJson(res, 404, { error: 'not_found', error_description: `no resource at ${path}` });
      return;
    }
    const allowed = endpoint === 'token' ? 'POST' : 'GET';
    if (req.method !== allowed) {
      respond.sendJson(res, 405, { error: 'method_not_allowed', error_description: `${path} accepts ${allowed}` }, { allow: allowed });
      return;
    }
    if (endpoint === 'token') {
      const queuedForToken = takeQueuedFault('token', url);
      if (queuedForToken !== undefined) injected.set(res, faultLabel(queuedForToken));
      await token.handle(req, res, queuedForToken);
      return;
    }
    const problem = token.bearerProblem(req);
    if (problem !== undefined) {
      respond.invalidToken(res, problem);
      return;
    }
    const queued = takeQueuedFault(endpoint, url);
    if (queued !== undefined) injected.set(res, faultLabel(queued));
    if (answeredByFault(res, queued)) return;
    const gzip = behaviours.gzip !== 'off' && shouldGzip(behaviours.gzip, req.headers['accept-encoding']);
    try {
      if (endpoint === 'analytics') data.analytics(url, res, queued, gzip);
      else data.prometheus(url, res, queued, gzip);
    } catch (err) {
      if (!(err instanceof ParameterError)) throw err;
      respond.sendJson(res, 400, { error: 'invalid_request', parameter: err.parameter, error_description: err.message });
    }
  };

  const onRequest = (req: http.IncomingMessage, res: http.ServerResponse, authPort = false): void => {
    const startedMs = performance.now();
    res.once('finish', () => {
      log?.debug({ method: req.method, path: req.url, status: res.statusCode, ms: Math.round(performance.now() - startedMs) }, 'simulator request');
    });
    if (options.onRequest !== undefined) {
      const report = options.onRequest;
      res.once('close', () => {
        const pathname = (req.url ?? '/').split('?')[0]!;
        const endpoint = endpointOf(pathname, authPort) ?? 'other';
        try {
          report({ endpoint, method: req.method ?? '', path: req.url ?? '/', status: res.headersSent ? res.statusCode : undefined, fault: injected.get(res) });
        } catch (err) {
          log?.error({ err }, 'simulator onRequest hook threw');
        }
      });
    }
    route(req, res, authPort).catch((err: unknown) => {
      log?.error({ err, method: req.method, path: req.url }, 'simulator handler failed');
      if (!res.headersSent) respond.sendJson(res, 500, { error: 'server_error' });
      else res.destroy();
    });
  };
  const tls = options.tls;
  const createServer = (handler: http.RequestListener): http.Server => {
    const created: http.Server = tls
      ? https.createServer(
          {
            cert: tls.cert,
            key: tls.key,
            ...(tls.ca !== undefined ? { ca: tls.ca } : {}),
            requestCert: tls.requireClientCert === true,
            rejectUnauthorized: tls.requireClientCert === true,
          },
          handler,
        )
      : http.createServer(handler);
    // A client that breaks off mid-request must not take the server down.
    created.on('clientError', (_err, socket) => socket.destroy());
    return created;
  };
  const listen = (target: http.Server, port: number): Promise<void> =>
    new Promise<void>((resolve, reject) => {
      target.once('error', reject);
      target.listen(port, host, () => {
        target.off('error', reject);
        resolve();
      });
    });
  const shutDown = (target: http.Server): Promise<void> =>
    new Promise<void>((resolve) => {
      if (!target.listening) {
        target.closeAllConnections();
        resolve();
        return;
      }
      target.close(() => resolve());
      target.closeAllConnections();
    });

  const server = createServer((req, res) => onRequest(req, res));
  await listen(server, options.port ?? 0);
  const authServer = options.separateAuth === true ? createServer((req, res) => onRequest(req, res, true)) : undefined;
  if (authServer !== undefined) {
    try {
      await listen(authServer, 0);
    } catch (err) {
      await shutDown(server);
      throw err;
    }
  }

  const shownHost = host === '0.0.0.0' ? '127.0.0.1' : host === '::' ? '::1' : host;
  const urlOf = (target: http.Server): string =>
    `${tls ? 'https' : 'http'}://${shownHost.includes(':') ? `[${shownHost}]` : shownHost}:${(target.address() as AddressInfo).port}`;
  const url = urlOf(server);
  const authUrl = authServer !== undefined ? urlOf(authServer) : url;
  const authPort = authServer !== undefined ? (authServer.address() as AddressInfo).port : undefined;
  /** Serialises setAuthDown calls. */
  let authChange: Promise<void> = Promise.resolve();

  let closing: Promise<void> | undefined;
  return {
    url,
    authUrl,
    dataset,
    get order(): RecordOrder {
      return order;
    },
    set order(value: RecordOrder) {
      order = checkOrder(value);
    },
    faults,
    stats,
    queueFault(fault, times = 1, target = 'any', when = undefined) {
      if (!Number.isSafeInteger(times) || times < 1) throw new InvalidArgumentError(`times must be a whole number ≥ 1; got ${times}`);
      if (target === 'token' && ANALYTICS_ONLY_FAULTS.has(fault))
        throw new InvalidArgumentError(`fault ${JSON.stringify(fault)} applies to E6 only, not to token requests`);
      if (typeof fault === 'object' && !(Number.isInteger(fault.status) && fault.status >= 100 && fault.status <= 599)) {
        throw new InvalidArgumentError(`fault status must be an HTTP status from 100 to 599; got ${fault.status}`);
      }
      queue.push({ fault, remaining: times, target, when });
    },
    pendingFaults() {
      return queue.reduce((sum, e) => sum + e.remaining, 0);
    },
    insertRecords(records) {
      dataset.insert(records);
    },
    deleteRecords(selection) {
      return view.delete(selection);
    },
    servedJson(from, to) {
      return view.active ? view.all(from, to) : dataset.pageJson(from, to, toInclusive, 0, dataset.count(from, to, toInclusive));
    },
    revokeAllTokens() {
      token.revokeAll();
    },
    setClientSecret(secret) {
      if (typeof secret !== 'string' || secret === '') throw new InvalidArgumentError('the client secret must not be empty');
      token.clientSecret = secret;
    },
    setAuthDown(down) {
      if (authServer === undefined || authPort === undefined) {
        return Promise.reject(new InvalidArgumentError('setAuthDown needs startSimulator({ separateAuth: true }): E0 shares the port of E6 and E7'));
      }
      authChange = authChange.then(async () => {
        if (closed) return;
        if (down) await shutDown(authServer);
        else if (!authServer.listening) await listen(authServer, authPort);
      });
      return authChange;
    },
    close() {
      closing ??= new Promise<void>((resolve) => {
        closed = true;
        respond.clearStalls();
        const done = [shutDown(server), ...(authServer !== undefined ? [authChange.catch(() => undefined).then(() => shutDown(authServer))] : [])];
        void Promise.all(done).then(() => resolve());
      });
      return closing;
    },
  };
}
