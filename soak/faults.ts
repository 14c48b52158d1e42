/**
 * The faults a soak injects while `serve` runs, and the tally of what was injected.
 *
 * Standing faults live on the in-process simulator for the whole soak: 429 every Nth request,
 * a seeded share of 503s, truncated JSON every Nth E6 response, tokens revoked long before
 * their `expires_in`. On top, a driver ticks every few seconds and, on its own schedules:
 * queues one one-shot fault (a reset mid-body, a body slower than UPSTREAM_TIMEOUT, a wrong
 * envelope or content type, inconsistent pages, a 500, a 401) whenever none is pending; re-arms
 * the "records arrive while paging" fault; inserts late records just behind the watermark (the
 * next run's lookback re-reads them); and terminates serve's database connections.
 */
import type pg from 'pg';
import { NO_FAULTS, type FaultSettings, type QueuedFault, type Simulator } from '@analytics-exporter/simulator';

/** The standing faults of a soak (see the module comment); `stallMs` exceeds the soak's UPSTREAM_TIMEOUT. */
export const SOAK_FAULTS: Partial<FaultSettings> = {
  rateLimitEvery: 17,
  retryAfterSeconds: 1,
  errorRate: 0.04,
  errorStatus: 503,
  revokeTokensAfterSeconds: 90,
  malformedEvery: 29,
  latencyMs: 2,
  stallMs: 7_000,
};

/** One-shot faults queued in turn, one at a time. */
const QUEUED_ROTATION: readonly QueuedFault[] = [
  'reset-mid-body',
  'slow-body',
  'bad-envelope',
  'wrong-content-type',
  'inconsistent-total-pages',
  'malformed-json',
  'empty-page',
  { status: 500 },
  'oversized-page',
  { status: 401 },
  { status: 429, retryAfter: '2' },
  { status: 502 },
];

/** Schedules of the driver, in milliseconds. */
export interface FaultSchedule {
  /** Tick of the driver. */
  tickMs: number;
  /** A one-shot fault is queued at most this often (and only when none is pending). */
  queueEveryMs: number;
  /** The arrivals fault is re-armed this often. */
  arrivalsEveryMs: number;
  /** Late records are inserted behind the watermark this often. */
  lateEveryMs: number;
  /** serve's database connections are terminated this often; 0 = never. */
  dbKillEveryMs: number;
  /** Late records are placed in [watermark − lateSpanMs, watermark). Must be below SYNC_LOOKBACK. */
  lateSpanMs: number;
  /** serve's SYNC_SETTLE and SYNC_LOOKBACK: late records are inserted only while the next run's lookback is sure to re-read them (see the driver's #insertLate). */
  settleMs: number;
  lookbackMs: number;
}

/** What the driver injected, for the report. */
export interface FaultTally {
  /** One-shot faults queued, by kind (e.g. `slow-body`, `status 500`). */
  queued: Record<string, number>;
  /** Times the arrivals fault was armed, and records it may insert per arming. */
  arrivalsArmed: number;
  arrivalsPerArming: number;
  /** Late records inserted behind the watermark, in batches. */
  lateRecords: number;
  lateBatches: number;
  /** Times late records were due but the watermark lagged the clock too far (a backfill), so none were inserted. */
  lateSkipped: number;
  /** pg_terminate_backend rounds, and connections terminated by them. */
  dbKillRounds: number;
  dbConnectionsKilled: number;
}

function faultName(fault: QueuedFault): string {
  return typeof fault === 'string' ? fault : `status ${fault.status}`;
}

/**
 * Drives the soak's faults against `sim` (one source's upstream) and the database `dbName`
 * (through `admin`, a connection of the harness, never counted as serve's).
 */
export class FaultDriver {
  readonly tally: FaultTally = {
    queued: {},
    arrivalsArmed: 0,
    arrivalsPerArming: 7,
    lateRecords: 0,
    lateBatches: 0,
    lateSkipped: 0,
    dbKillRounds: 0,
    dbConnectionsKilled: 0,
  };
  readonly #sim: Simulator;
  readonly #admin: pg.Client;
  readonly #dbName: string;
  readonly #schedule: FaultSchedule;
  readonly #schema: string;
  readonly #source: string;
  #timer: NodeJS.Timeout | undefined;
  #ticking = false;
  #next = { queue: 0, arrivals: 0, late: 0, dbKill: 0 };
  #rotation = 0;
  #errors: string[] = [];

  /**
   * @param options.source the source (CONFIG_FILE name) `sim` stands for: late records go behind its watermark.
   * @param options.schedule.dbKillEveryMs 0 for every driver but one when several drive one serve (the kills hit all its connections).
   */
  constructor(options: { sim: Simulator; admin: pg.Client; dbName: string; schema: string; source: string; schedule: FaultSchedule }) {
    this.#sim = options.sim;
    this.#source = options.source;
    this.#admin = options.admin;
    this.#dbName = options.dbName;
    this.#schema = options.schema;
    this.#schedule = options.schedule;
  }

  /** Errors of the driver itself (not of serve), for the report; a driver error never stops the soak. */
  get errors(): readonly string[] {
    return this.#errors;
  }

  /** Sets the standing faults and starts ticking. The first one-shot fault, arrival and kill come one period in. */
  start(): void {
    Object.assign(this.#sim.faults, SOAK_FAULTS);
    const now = Date.now();
    const s = this.#schedule;
    this.#next = {
      queue: now + s.queueEveryMs,
      arrivals: now + s.arrivalsEveryMs,
      late: now + s.lateEveryMs,
      dbKill: s.dbKillEveryMs > 0 ? now + s.dbKillEveryMs : Infinity,
    };
    this.#timer = setInterval(() => void this.#tick(), s.tickMs);
  }

  /** Stops ticking and turns every standing fault off. Queued faults may still be pending (see {@link drainQueuedFaults}). */
  async stop(): Promise<void> {
    clearInterval(this.#timer);
    while (this.#ticking) await new Promise((resolve) => setTimeout(resolve, 50));
    Object.assign(this.#sim.faults, NO_FAULTS);
  }

  async #tick(): Promise<void> {
    if (this.#ticking) return;
    this.#ticking = true;
    const now = Date.now();
    const s = this.#schedule;
    try {
      if (now >= this.#next.queue && this.#sim.pendingFaults() === 0) {
        const fault = QUEUED_ROTATION[this.#rotation++ % QUEUED_ROTATION.length]!;
        this.#sim.queueFault(fault);
        const name = faultName(fault);
        this.tally.queued[name] = (this.tally.queued[name] ?? 0) + 1;
        this.#next.queue = now + s.queueEveryMs;
      }
      if (now >= this.#next.arrivals) {
        // A new object restarts the simulator's request count for it.
        this.#sim.faults.arrivals = { afterRequests: 3, count: this.tally.arrivalsPerArming };
        this.tally.arrivalsArmed++;
        this.#next.arrivals = now + s.arrivalsEveryMs;
      }
      if (now >= this.#next.late) {
        this.#next.late = now + s.lateEveryMs;
        await this.#insertLate();
      }
      if (now >= this.#next.dbKill) {
        this.#next.dbKill = now + s.dbKillEveryMs;
        await this.#killConnections();
      }
    } catch (err) {
      if (this.#errors.length < 20) this.#errors.push(err instanceof Error ? err.message : String(err));
    } finally {
      this.#ticking = false;
    }
  }

  /**
   * Late records: timestamps just behind the watermark, so only the next run's lookback finds them.
   *
   * Only while the source is caught up: a run in flight may still move the watermark up to (now −
   * SYNC_SETTLE), and the next run re-reads from there minus SYNC_LOOKBACK, so records at or after
   * watermark − lateSpanMs are sure to be re-read only when now − SYNC_SETTLE − watermark ≤
   * SYNC_LOOKBACK − lateSpanMs. During a backfill the watermark jumps by hours in one run: a record
   * placed behind it then is older than any lookback, which is no fault of the sync's.
   */
  async #insertLate(): Promise<void> {
    const { rows } = await this.#admin
      .query<{ watermark: Date | null }>(`select watermark from ${this.#admin.escapeIdentifier(this.#schema)}.sync_state where source = $1`, [this.#source])
      .catch(() => ({ rows: [] }));
    const watermark = rows[0]?.watermark;
    if (!watermark) return;
    const s = this.#schedule;
    if (Date.now() - s.settleMs - watermark.getTime() > s.lookbackMs - s.lateSpanMs) {
      this.tally.lateSkipped++;
      return;
    }
    const count = 5 + (this.tally.lateBatches % 11);
    const to = new Date(watermark.getTime() - 1_000);
    const from = new Date(watermark.getTime() - this.#schedule.lateSpanMs);
    const records = this.#sim.dataset.plausibleRecords(count, from, to, true, 1_000_000 + this.tally.lateBatches);
    this.#sim.insertRecords(records);
    this.tally.lateBatches++;
    this.tally.lateRecords += count;
  }

  /** pg_terminate_backend on every connection serve has to the soak's database, whatever its state. */
  async #killConnections(): Promise<void> {
    const { rows } = await this.#admin.query<{ killed: string }>(
      `select count(*) filter (where pg_terminate_backend(pid)) as killed
         from pg_stat_activity
        where datname = $1 and application_name = 'analytics-exporter' and pid <> pg_backend_pid()`,
      [this.#dbName],
    );
    this.tally.dbKillRounds++;
    this.tally.dbConnectionsKilled += Number(rows[0]?.killed ?? 0);
  }
}

/**
 * Uses up one-shot faults still queued on `sim` by sending E6 requests of its own (a fault that
 * only E6 takes would otherwise hit the final sync, which must run without faults).
 *
 * @returns how many requests it took; throws when faults are still pending after 50.
 */
export async function drainQueuedFaults(sim: Simulator, credentials: { clientId: string; clientSecret: string; scope: string }): Promise<number> {
  let requests = 0;
  while (sim.pendingFaults() > 0) {
    if (requests >= 50) throw new Error(`${sim.pendingFaults()} queued faults still pending after ${requests} draining requests`);
    const tokenResponse = await fetch(`${sim.url}/connect/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        grant_type: 'client_credentials',
        client_id: credentials.clientId,
        client_secret: credentials.clientSecret,
        scope: credentials.scope,
      }),
    });
    const { access_token: token } = (await tokenResponse.json()) as { access_token: string };
    const start = sim.dataset.start.toISOString().replace(/\.000Z$/, 'Z');
    const response = await fetch(`${sim.url}/analytics?startDate=${start}&pageSize=1`, { headers: { authorization: `Bearer ${token}` } }).catch(
      () => undefined,
    );
    await response?.arrayBuffer().catch(() => undefined);
    requests++;
  }
  return requests;
}
