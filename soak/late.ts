/**
 * gamma's late records and deletions, beyond SYNC_LOOKBACK: only the audit (`AUDIT_SCHEDULE`,
 * `verify --repair` inside serve) can find them.
 *
 * Every `everyMs` while the source is caught up, one to three records are inserted into the
 * simulator ({@link Simulator.insertRecords}, as `POST /admin/records` does) at random instants
 * between the oldest day partition RETENTION keeps (at most `maxAgeMs` back) and the watermark
 * minus SYNC_LOOKBACK minus a window, so no sync run's lookback re-reads them. A few times a
 * record is deleted upstream from a committed window as far back ({@link Simulator.deleteRecords}),
 * with two late records in the same window (an arrival and a deletion in one audit segment would
 * cancel out, a limit docs/etl.md states); under SYNC_SHRINK=keep its window keeps it, and the end
 * check expects it still stored. Until
 * `stopAt` (one audit period and a margin before the end, so every record injected had an audit to
 * find it). Every sample, the records not yet seen are looked for in `records`: the delay from
 * insertion to being stored is the audit's reaction time.
 */
import type pg from 'pg';
import type { AnalyticsRecord, Simulator } from '@analytics-exporter/simulator';
import { canonicalJson } from '../test/helpers/canonical.js';
import type { KeptRecord } from './verify.js';

/** One injected late record and when it was found stored. */
export interface LateRecord {
  ms: number;
  json: string;
  insertedAt: number;
  foundAt: number | undefined;
}

/** What the injector did, for the report. */
export interface LateTally {
  batches: number;
  skipped: number;
  deletions: number;
  /** Oldest instant a record was placed at, as milliseconds before its insertion. */
  maxAgeMs: number;
  errors: string[];
}

/** The injector's settings, in milliseconds (instants since the epoch where named so). */
export interface LateOptions {
  sim: Simulator;
  admin: pg.Client;
  schema: string;
  source: string;
  everyMs: number;
  /** Delete one record at every `deleteEvery`th batch. */
  deleteEvery: number;
  /** Records go no further back than this before now, nor before `oldestMs` (the start of the oldest partition RETENTION keeps). */
  maxAgeMs: number;
  oldestMs: number;
  /** Records in the sparse part only are deleted: [oldestMs, sparseEndMs). */
  sparseEndMs: number;
  lookbackMs: number;
  windowMs: number;
  settleMs: number;
  /** No batch after this (performance-free wall clock, Date.now()). */
  stopAt: number;
}

/** Injects and tracks gamma's late records; see the module comment. */
export class LateInjector {
  readonly records: LateRecord[] = [];
  readonly kept: KeptRecord[] = [];
  readonly tally: LateTally = { batches: 0, skipped: 0, deletions: 0, maxAgeMs: 0, errors: [] };
  readonly #o: LateOptions;
  #timer: NodeJS.Timeout | undefined;
  #busy = false;
  #salt = 0;

  constructor(options: LateOptions) {
    this.#o = options;
  }

  start(): void {
    this.#timer = setInterval(() => void this.#tick(), this.#o.everyMs);
  }

  async stop(): Promise<void> {
    clearInterval(this.#timer);
    while (this.#busy) await new Promise((r) => setTimeout(r, 50));
  }

  /** A random instant on a whole second in [from, to), never on a window boundary; undefined when the span is empty. */
  #instant(from: number, to: number): number | undefined {
    const { windowMs } = this.#o;
    for (let i = 0; i < 20; i++) {
      const ms = Math.floor((from + Math.random() * (to - from)) / 1000) * 1000;
      if (ms >= from && ms < to && ms % windowMs !== 0) return ms;
    }
    return undefined;
  }

  async #tick(): Promise<void> {
    if (this.#busy || Date.now() > this.#o.stopAt) return;
    this.#busy = true;
    const o = this.#o;
    try {
      const { rows } = await o.admin.query<{ watermark: Date | null }>(
        `select watermark from ${o.admin.escapeIdentifier(o.schema)}.sync_state where source = $1`,
        [o.source],
      );
      const watermark = rows[0]?.watermark?.getTime();
      const now = Date.now();
      // Caught up: the watermark within a lookback of the clock (not in the first run's backfill).
      if (watermark === undefined || now - o.settleMs - watermark > o.lookbackMs) {
        this.tally.skipped++;
        return;
      }
      const from = Math.max(o.oldestMs, now - o.maxAgeMs);
      const to = watermark - o.lookbackMs - 2 * o.windowMs;
      const made: AnalyticsRecord[] = [];
      const make = (ms: number) => made.push(...o.sim.dataset.plausibleRecords(1, new Date(ms), new Date(ms), true, 7_000_000 + this.#salt++));
      if ((this.tally.batches + 1) % o.deleteEvery === 0) {
        // A deletion, and two arrivals in its window: the audit compares counts, and a deletion
        // and an arrival in one of its segments cancel out (docs/etl.md, The audit), so a deletion
        // never goes without more arrivals beside it.
        const start = this.#deleteOne(from, Math.min(to, o.sparseEndMs));
        for (let i = 0; start !== undefined && i < 2; i++) {
          const ms = this.#instant(start, start + o.windowMs);
          if (ms !== undefined) make(ms);
        }
      }
      for (let i = 1 + (this.tally.batches % 3); i > 0; i--) {
        const ms = this.#instant(from, to);
        if (ms !== undefined) make(ms);
      }
      o.sim.insertRecords(made);
      const insertedAt = Date.now();
      for (const record of made) {
        const ms = Date.parse(record.timestamp);
        this.tally.maxAgeMs = Math.max(this.tally.maxAgeMs, insertedAt - ms);
        this.records.push({ ms, json: canonicalJson(record), insertedAt, foundAt: undefined });
      }
      this.tally.batches++;
    } catch (err) {
      if (this.tally.errors.length < 10) this.tally.errors.push(err instanceof Error ? err.message : String(err));
    } finally {
      this.#busy = false;
    }
  }

  /** Deletes one record of a committed window in [from, to), away from its boundaries and from late records not found yet; returns the window's start, undefined when none was deleted. */
  #deleteOne(from: number, to: number): number | undefined {
    const { windowMs, sim } = this.#o;
    for (let attempt = 0; attempt < 20; attempt++) {
      const ms = this.#instant(from, to);
      if (ms === undefined) return undefined;
      const start = Math.floor(ms / windowMs) * windowMs;
      if (this.records.some((r) => r.foundAt === undefined && r.ms > start && r.ms < start + windowMs)) continue;
      const deleted = sim.deleteRecords({ from: new Date(start + 1000), to: new Date(start + windowMs - 1000), count: 1 });
      if (deleted.length === 0) continue;
      for (const record of deleted) this.kept.push({ ms: Date.parse(record.timestamp), json: canonicalJson(record) });
      this.tally.deletions += deleted.length;
      return start;
    }
    return undefined;
  }

  /** Looks for the records not found yet in `records`; stamps those found with now. */
  async poll(): Promise<void> {
    const pending = this.records.filter((r) => r.foundAt === undefined);
    if (pending.length === 0) return;
    const o = this.#o;
    const { rows } = await o.admin.query<{ payload: unknown }>(
      `select payload from ${o.admin.escapeIdentifier(o.schema)}.records where source = $1 and payload = any($2::jsonb[])`,
      [o.source, pending.map((r) => r.json)],
    );
    const found = new Set(rows.map((r) => canonicalJson(r.payload)));
    const now = Date.now();
    for (const r of pending) if (found.has(r.json)) r.foundAt = now;
  }
}
