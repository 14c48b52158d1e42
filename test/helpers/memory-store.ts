/**
 * An in-memory SyncStore (src/sync/store/ports.ts) for the run's unit tests: the ledger, the watermark,
 * the runs, the records and the quarantine of one source, with session advisory locks, window
 * transactions that commit or roll back whole, and faults a test switches on (a record the store
 * refuses, the session lost). What PostgreSQL itself does (SQL, COPY, partitions, the derived
 * tables' rows) is the integration tests' to prove; here the derived tables' counts are only kept
 * as handed over.
 */
import type { RollupCounts, WindowFields } from '../../src/sync/derived/index.js';
import type { FieldChange, KnownFields } from '../../src/sync/derived/fields/schema-changes.js';
import type { PageRows, QuarantineRow } from '../../src/sync/rows/page-rows.js';
import { dataRefusal } from '../../src/db/refusal.js';
import type {
  DroppedPartition,
  FieldPlaces,
  Ledger,
  LockOptions,
  Locked,
  ParkedWindow,
  Partition,
  RunEnding,
  SchemaMaintenance,
  StoreSession,
  StoredWindow,
  SyncStore,
  WindowCounts,
  WindowStored,
  WindowWriter,
} from '../../src/sync/store/ports.js';
import type { TextBag } from '../../src/sync/membership/record-keys.js';
import { subtractWindows, type Window } from '../../src/sync/windows.js';

export interface StoredRecord {
  /** The payload as parsed from the text the store was given. */
  payload: unknown;
  eventTime: number | null;
  window: Window;
  runId: number;
}

export interface LedgerRow extends Window, WindowCounts {
  runId: number;
  expired: boolean;
  /** Set on a parked window : why, and when (ms). */
  parked?: { reason: string; at: number };
  /** Set on a window `state reset` marked for re-load (PgLedger.markForReload). */
  reloadRequested?: boolean;
}

export interface RunRow {
  id: number;
  range: Window;
  status: 'running' | 'abandoned' | RunEnding['status'];
  ending?: RunEnding;
}

/** What a session lost its connection as: pg's message when the server ends a connection. */
export class ConnectionLost extends Error {
  constructor() {
    super('Connection terminated unexpectedly');
  }
}

interface LockState {
  exclusive: number | undefined;
  shared: Set<number>;
}

const overlaps = (w: Window, range: Window): boolean => w.start < range.end && w.end > range.start;
const inside = (w: Window, range: Window): boolean => w.start >= range.start && w.start < range.end;

/** One source's data, shared by every session of the store. */
export class MemoryStore implements SyncStore {
  records: StoredRecord[] = [];
  quarantine: (QuarantineRow & { window: Window; runId: number })[] = [];
  ledger: LedgerRow[] = [];
  runs: RunRow[] = [];
  watermark: number | undefined;
  /** The last full audit's verified-through (ms), as recordVerified stored it; null when it recorded none. */
  verifiedThrough: number | null | undefined;
  /** What each committed window handed the derived tables. */
  derived: { window: Window; rollup: RollupCounts; fields: WindowFields; changes: readonly FieldChange[] }[] = [];
  /** Partitions "created": the window starts each run asked for. */
  partitionStarts: number[] = [];
  /** Windows committed, in order. */
  commits: Window[] = [];

  /**
   * Faults: the error the database would refuse a payload with (pg's shape: `code` the SQLSTATE,
   * `message`), or undefined to store it. A data refusal (src/db/refusal.ts) quarantines the
   * record with its SQLSTATE and message, as the PostgreSQL store does; any other fails the window.
   */
  refuse: ((payload: unknown) => { code: string; message: string; constraint?: string } | undefined) | undefined;
  /**
   * Loses the connection of the session loading a window when this returns true for it (called at
   * the start of each window's transaction): the window fails, every later call of the session
   * throws {@link ConnectionLost}, and its locks are gone, as when PostgreSQL ends a connection.
   */
  loseSessionAt: ((window: Window) => boolean) | undefined;
  /** Awaited before each page a window's transaction writes: a slow database, as the test decides. */
  beforeWrite: ((window: Window) => Promise<void>) | undefined;

  readonly locks = new Map<string, LockState>();
  #sessions = 0;

  async session<T>(fn: (session: StoreSession) => Promise<T>): Promise<T> {
    const session = new MemorySession(this, ++this.#sessions);
    try {
      return await fn(session);
    } finally {
      session.end();
    }
  }

  /** The lock `name`, created free. */
  lockState(name: string): LockState {
    let state = this.locks.get(name);
    if (state === undefined) this.locks.set(name, (state = { exclusive: undefined, shared: new Set() }));
    return state;
  }

  /** Records of windows inside `window`. */
  recordsOf(window: Window): StoredRecord[] {
    return this.records.filter((r) => inside(r.window, window));
  }
}

class MemorySession implements StoreSession {
  #alive = true;
  readonly #held = new Set<string>();

  readonly ledger: Ledger;
  readonly maintenance: SchemaMaintenance;

  constructor(
    private readonly store: MemoryStore,
    readonly id: number,
  ) {
    this.ledger = new MemoryLedger(store, () => this.#check());
    this.maintenance = new MemoryMaintenance(store, () => this.#check());
  }

  /** Ends the session: its locks go with it. */
  end(): void {
    for (const name of this.#held) {
      const state = this.store.lockState(name);
      if (state.exclusive === this.id) state.exclusive = undefined;
      state.shared.delete(this.id);
    }
    this.#held.clear();
  }

  #lose(): never {
    this.#alive = false;
    this.end();
    throw new ConnectionLost();
  }

  #check(): void {
    if (!this.#alive) throw new ConnectionLost();
  }

  #tryLock(name: string, shared: boolean): boolean {
    const state = this.store.lockState(name);
    const others = [...state.shared].some((id) => id !== this.id);
    if (state.exclusive !== undefined && state.exclusive !== this.id) return false;
    if (!shared && others) return false;
    if (shared) state.shared.add(this.id);
    else state.exclusive = this.id;
    this.#held.add(name);
    return true;
  }

  async lock<T>(name: string, options: LockOptions, fn: () => Promise<T>): Promise<Locked<T>> {
    this.#check();
    const shared = options.shared === true;
    while (!this.#tryLock(name, shared)) {
      if (!options.wait) return { acquired: false };
      if (options.signal?.aborted) throw new Error(`stopped while waiting for the lock ${name}`);
      await new Promise((resolve) => setTimeout(resolve, 250));
      this.#check();
    }
    try {
      return { acquired: true, value: await fn() };
    } finally {
      // An unlock on a lost connection does nothing (the server released it): never throws.
      if (this.#alive) {
        const state = this.store.lockState(name);
        if (shared) state.shared.delete(this.id);
        else state.exclusive = undefined;
        this.#held.delete(name);
      }
    }
  }

  async inWindow<T>(of: { window: Window; runId: number }, fn: (writer: WindowWriter) => Promise<T>): Promise<T> {
    this.#check();
    if (this.store.loseSessionAt?.(of.window)) this.#lose();
    const writer = new MemoryWindowWriter(this.store, of);
    const value = await fn(writer);
    this.#check();
    writer.commit();
    return value;
  }
}

/** The ledger of a {@link MemoryStore}, through one session. */
class MemoryLedger implements Ledger {
  constructor(
    private readonly store: MemoryStore,
    private readonly check: () => void,
  ) {}

  async abandonStaleRuns(): Promise<number> {
    this.check();
    const stale = this.store.runs.filter((r) => r.status === 'running');
    for (const run of stale) run.status = 'abandoned';
    return stale.length;
  }
  async readWatermark(): Promise<number | undefined> {
    this.check();
    return this.store.watermark;
  }
  async committedWindows(range: Window): Promise<Window[]> {
    this.check();
    return this.#windows((w) => !w.parked && overlaps(w, range));
  }
  async parkedWindows(range?: Window): Promise<ParkedWindow[]> {
    this.check();
    return this.store.ledger
      .filter((w) => w.parked && (range === undefined || overlaps(w, range)))
      .sort((a, b) => a.start - b.start)
      .map((w) => ({
        start: w.start,
        end: w.end,
        reason: w.parked!.reason,
        parkedAt: w.parked!.at,
        recordCount: w.recordCount,
        runId: w.runId,
        expired: w.expired,
      }));
  }
  async parkWindow(of: { window: Window; runId: number }, reason: string): Promise<number | undefined> {
    this.check();
    const { window, runId } = of;
    const parked = { reason, at: Date.now() };
    const held = this.store.ledger.filter((w) => inside(w, window));
    for (const w of held) Object.assign(w, { parked, runId, reloadRequested: false });
    for (const gap of subtractWindows([window], held)) {
      this.store.ledger.push({ ...gap, recordCount: 0, totalRecords: 0, pages: 0, runId, expired: false, parked });
    }
    const now = this.store.watermark;
    if (now === undefined || window.start <= now) this.store.watermark = Math.max(now ?? window.end, window.end);
    return this.store.watermark;
  }
  async expiredWindows(range: Window): Promise<Window[]> {
    this.check();
    return this.#windows((w) => w.expired && overlaps(w, range));
  }
  async reloadWindows(): Promise<Window[]> {
    this.check();
    return this.#windows((w) => w.reloadRequested === true && !w.expired);
  }
  async recordVerified(through: number | undefined): Promise<void> {
    this.check();
    this.store.verifiedThrough = through ?? null;
  }
  async auditWindows(range: Window): Promise<StoredWindow[]> {
    this.check();
    const stored = new Map<number, number>();
    for (const row of [...this.store.records, ...this.store.quarantine]) stored.set(row.window.start, (stored.get(row.window.start) ?? 0) + 1);
    return this.store.ledger
      .filter((w) => !w.expired && overlaps(w, range))
      .sort((a, b) => a.start - b.start)
      .map((w) => ({
        start: w.start,
        end: w.end,
        stored: stored.get(w.start) ?? 0,
        seen: w.totalRecords,
        followsLedger: this.store.ledger.some((p) => p.end === w.start),
        parked: w.parked !== undefined,
      }));
  }
  async ledgerCounts(range: Window): Promise<(Window & { totalRecords: number })[]> {
    this.check();
    const committed = this.store.ledger.filter((w) => !w.parked);
    const within = committed.filter((w) => overlaps(w, range));
    const before = committed.filter((w) => w.end <= range.start).sort((a, b) => b.end - a.end)[0];
    return [...within, ...(before ? [before] : [])].map((w) => ({ start: w.start, end: w.end, totalRecords: w.totalRecords }));
  }
  async heldAtEnd(end: number, boundarySet: TextBag): Promise<TextBag> {
    this.check();
    const window = this.store.ledger.find((w) => w.end === end);
    if (window === undefined) return new Map();
    if (window.parked !== undefined || window.expired) return new Map(boundarySet);
    // Stored payloads compare as parsed (jsonb equality, up to key order: the tests' records keep theirs), quarantined ones as text.
    const stored = new Map<string, number>();
    const add = (key: string) => stored.set(key, (stored.get(key) ?? 0) + 1);
    for (const r of this.store.records) if (r.window.start === window.start) add(JSON.stringify(r.payload));
    for (const q of this.store.quarantine) if (q.window.start === window.start) add(q.text);
    const held: TextBag = new Map();
    for (const [text, count] of boundarySet) {
      let key = text;
      try {
        key = JSON.stringify(JSON.parse(text));
      } catch {
        // not JSON: only a quarantined text can match it
      }
      const n = Math.min(count, (stored.get(key) ?? 0) + (key === text ? 0 : (stored.get(text) ?? 0)));
      if (n > 0) held.set(text, n);
    }
    return held;
  }
  #windows(where: (w: LedgerRow) => boolean): Window[] {
    return this.store.ledger
      .filter(where)
      .sort((a, b) => a.start - b.start)
      .map((w) => ({ start: w.start, end: w.end }));
  }
  async startRun(range: Window): Promise<number> {
    this.check();
    const id = this.store.runs.length + 1;
    this.store.runs.push({ id, range, status: 'running' });
    return id;
  }
  async finishRun(runId: number, ending: RunEnding): Promise<void> {
    this.check();
    const run = this.store.runs.find((r) => r.id === runId)!;
    run.status = ending.status;
    run.ending = ending;
  }
}

/** The schema maintenance of a {@link MemoryStore}: partitions asked for and the catalogue as committed; no derived SQL to run. */
class MemoryMaintenance implements SchemaMaintenance {
  constructor(
    private readonly store: MemoryStore,
    private readonly check: () => void,
  ) {}

  async isRollupCurrent(): Promise<boolean> {
    this.check();
    return true;
  }
  async ensureRollup(): Promise<boolean> {
    this.check();
    return false;
  }
  async ensureTypedViewCurrent(): Promise<void> {
    this.check();
  }
  async pruneRollup(): Promise<number> {
    this.check();
    return 0;
  }
  async catalogueTypes(): Promise<KnownFields> {
    this.check();
    // The catalogue as record_fields keeps it: every name and type a committed window brought.
    const known: KnownFields = new Map();
    for (const { fields } of this.store.derived) {
      for (const [path, stats] of fields) {
        const types = known.get(path) ?? new Set<string>();
        for (const type of stats.types) types.add(type);
        known.set(path, types);
      }
    }
    return known;
  }
  async fieldPlaces(): Promise<FieldPlaces> {
    // No view here: its limit is the integration tests' to prove.
    return { column: (await this.catalogueTypes()).size, leftOut: 0, none: 0 };
  }
  async ensurePartitions(starts: readonly number[]): Promise<Partition[]> {
    this.check();
    this.store.partitionStarts.push(...starts);
    return [];
  }
  async dropExpiredPartitions(): Promise<DroppedPartition[]> {
    this.check();
    return [];
  }
}

/** The rows of `before` whose key has more copies there than in `now`: the copies beyond `now`'s count. */
function beyond<R>(before: readonly R[], now: readonly R[], keyOf: (row: R) => string): R[] {
  const left = new Map<string, number>();
  for (const row of now) left.set(keyOf(row), (left.get(keyOf(row)) ?? 0) + 1);
  return before.filter((row) => {
    const n = left.get(keyOf(row)) ?? 0;
    left.set(keyOf(row), n - 1);
    return n <= 0;
  });
}

/** One window's transaction: staged, applied at commit, dropped on a throw. */
class MemoryWindowWriter implements WindowWriter {
  readonly #records: StoredRecord[] = [];
  readonly #quarantine: (QuarantineRow & { window: Window; runId: number })[] = [];
  readonly #refused: QuarantineRow[] = [];
  #keep = false;
  #ledger: LedgerRow | undefined;
  #derived: { rollup: RollupCounts; fields: WindowFields; changes: readonly FieldChange[] } | undefined;
  #watermark: number | undefined;

  constructor(
    private readonly store: MemoryStore,
    private readonly of: { window: Window; runId: number },
  ) {}

  async clear(keep = false): Promise<number> {
    this.#keep = keep;
    return this.store.recordsOf(this.of.window).length;
  }

  async write(rows: PageRows, quarantine: readonly QuarantineRow[], onStored: (records: number) => void): Promise<void> {
    await this.store.beforeWrite?.(this.of.window);
    const data = 'text' in rows ? (JSON.parse(rows.text) as { data: unknown[] }).data : rows.records;
    this.#quarantine.push(...quarantine.map((q) => ({ ...q, ...this.of })));
    rows.keep.forEach((position, k) => {
      const payload = data[position];
      const eventTime = rows.eventTimes[k] ?? null;
      const error = this.store.refuse?.(payload);
      if (error === undefined) return void this.#records.push({ payload, eventTime, ...this.of });
      const refusal = dataRefusal(error);
      if (refusal === undefined) throw Object.assign(new Error(error.message), error);
      const refused = { text: JSON.stringify(payload), eventTime, ...refusal };
      this.#refused.push(refused);
      this.#quarantine.push({ ...refused, ...this.of });
    });
    onStored(rows.keep.length);
  }

  async abort(): Promise<Error | undefined> {
    return undefined;
  }

  async end(owned: readonly string[] = []): Promise<WindowStored> {
    const stored = { records: this.#records.length, refused: [...this.#refused] };
    if (!this.#keep) return { ...stored, kept: { records: 0, quarantined: 0 } };
    // The multiset union by payload text: each stored copy beyond this read's copies of the same
    // text (records, those a constraint or trigger refused, and those left out as the window's
    // start's boundary set) is kept, in the quarantine when the store refuses it now.
    const keyOf = (r: StoredRecord) => JSON.stringify(r.payload);
    const refusedByRule = this.#refused.filter((q) => /^(23|P0)/.test(q.sqlstate!)).map((q) => ({ payload: JSON.parse(q.text) as unknown }) as StoredRecord);
    const ownedRecords = owned.flatMap((text) => {
      try {
        return [{ payload: JSON.parse(text) as unknown } as StoredRecord];
      } catch {
        return [];
      }
    });
    const records: StoredRecord[] = [];
    const back: MemoryStore['quarantine'] = [];
    for (const r of beyond(this.store.recordsOf(this.of.window), [...this.#records, ...refusedByRule, ...ownedRecords], keyOf)) {
      const error = this.store.refuse?.(r.payload);
      const refusal = error === undefined ? undefined : dataRefusal(error);
      if (error !== undefined && refusal === undefined) throw Object.assign(new Error(error.message), error);
      if (refusal === undefined) records.push({ ...r, window: this.of.window });
      else back.push({ text: JSON.stringify(r.payload), eventTime: r.eventTime, ...refusal, window: this.of.window, runId: r.runId });
    }
    // A record the contract quarantined that this read stored is returned too (the PostgreSQL store compares it as jsonb).
    const asJson = (text: string) => `json:${JSON.stringify(JSON.parse(text))}`;
    const loadedNow = this.#records.map((r) => ({ text: JSON.stringify(r.payload), reason: 'contract:' }) as QuarantineRow);
    const quarantined = beyond<QuarantineRow>(
      this.store.quarantine.filter((q) => inside(q.window, this.of.window)),
      [...this.#quarantine, ...loadedNow, ...owned.map((text) => ({ text }) as QuarantineRow)],
      (q) => (q.reason?.startsWith('contract:') ? asJson(q.text) : q.text),
    ).map((q) => ({ ...(q as MemoryStore['quarantine'][number]), window: this.of.window }));
    this.#records.push(...records);
    this.#quarantine.push(...back, ...quarantined);
    return { ...stored, kept: { records: records.length, quarantined: quarantined.length + back.length } };
  }

  async addDerived(rollup: RollupCounts, fields: WindowFields, changes: readonly FieldChange[] = []): Promise<void> {
    this.#derived = { rollup, fields, changes };
  }

  async record(counts: WindowCounts): Promise<number | undefined> {
    const { window, runId } = this.of;
    this.#ledger = { ...window, ...counts, runId, expired: false };
    const now = this.store.watermark;
    this.#watermark = now === undefined || window.start <= now ? Math.max(now ?? window.end, window.end) : now;
    return this.#watermark;
  }

  commit(): void {
    const { store, of } = this;
    const gone = (w: Window) => inside(w, of.window);
    store.records = [...store.records.filter((r) => !gone(r.window)), ...this.#records];
    store.quarantine = [...store.quarantine.filter((q) => !gone(q.window)), ...this.#quarantine];
    store.ledger = store.ledger.filter((w) => !gone(w));
    if (this.#ledger) store.ledger.push(this.#ledger);
    if (this.#derived) store.derived.push({ window: of.window, ...this.#derived });
    store.watermark = this.#watermark ?? store.watermark;
    store.commits.push(of.window);
  }
}
