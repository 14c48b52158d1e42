/**
 * E7's counts: events per (event type, customer) in a range of a dataset, from prefix counts of
 * the base records every {@link CHECKPOINT_RECORDS} records, so a range costs at most two
 * partial blocks of scanning whatever its length.
 */
import { EVENT_TYPES, type AnalyticsRecord, type Customer, type EventCount } from './records.js';

/** Base records between two E7 prefix-count checkpoints (raised for very many customers, to bound memory). */
export const CHECKPOINT_RECORDS = 4096;
/** Upper bound on checkpoint counter cells (4 bytes each). */
const MAX_CHECKPOINT_CELLS = 8_000_000;

/**
 * Counts of the base records: cell `e * customers + c` holds the events of type `e` for customer `c`.
 * The prefix counts are built on the first call, by one scan of every base record.
 */
export class BaseEventCounts {
  readonly #records: number;
  readonly #customers: number;
  /** Cell of base record `i`; a copy's is its original's. */
  readonly #cellOf: (i: number) => number;
  /** Cell of base record `i` when `i` is an original, -1 for a copy (which repeats the cell before). */
  readonly #originalCellOf: (i: number) => number;
  #checkpoints: { every: number; cells: Uint32Array } | undefined;

  constructor(records: number, customers: number, cellOf: (i: number) => number, originalCellOf: (i: number) => number) {
    this.#records = records;
    this.#customers = customers;
    this.#cellOf = cellOf;
    this.#originalCellOf = originalCellOf;
  }

  /** Prefix counts: cells[k * C + e * customers + c] = events of type e for customer c among base records [0, k × every). */
  #ensureCheckpoints(): { every: number; cells: Uint32Array } {
    if (this.#checkpoints !== undefined) return this.#checkpoints;
    const cellsPerCheckpoint = EVENT_TYPES.length * this.#customers;
    const n = this.#records;
    const every = Math.max(CHECKPOINT_RECORDS, Math.ceil((n * cellsPerCheckpoint) / MAX_CHECKPOINT_CELLS));
    const checkpoints = Math.floor(n / every) + 1;
    const cells = new Uint32Array(checkpoints * cellsPerCheckpoint);
    const running = new Uint32Array(cellsPerCheckpoint);
    let next = 0;
    let cell = 0;
    for (let i = 0; i < n; i++) {
      if (i === next * every) {
        cells.set(running, next * cellsPerCheckpoint);
        next++;
      }
      // A copy repeats its predecessor's cell, so only originals are hashed.
      const own = this.#originalCellOf(i);
      if (own >= 0) cell = own;
      running[cell]!++;
    }
    if (next < checkpoints) cells.set(running, next * cellsPerCheckpoint);
    this.#checkpoints = { every, cells };
    return this.#checkpoints;
  }

  #scanInto(counts: Float64Array, a: number, b: number): void {
    for (let i = a; i < b; i++) counts[this.#cellOf(i)]!++;
  }

  /** Counts of base records [a, b), one cell per (event type, customer). */
  countRange(a: number, b: number): Float64Array {
    const counts = new Float64Array(EVENT_TYPES.length * this.#customers);
    if (b <= a) return counts;
    const { every, cells } = this.#ensureCheckpoints();
    const ka = Math.ceil(a / every);
    const kb = Math.floor(b / every);
    if (ka >= kb) {
      this.#scanInto(counts, a, b);
    } else {
      const width = counts.length;
      for (let x = 0; x < width; x++) counts[x] = cells[kb * width + x]! - cells[ka * width + x]!;
      this.#scanInto(counts, a, ka * every);
      this.#scanInto(counts, kb * every, b);
    }
    return counts;
  }
}

/** An inserted record as counted: its event type's index and its customer. */
export interface CountedRecord {
  eventIndex: number;
  /** `customerId NUL customerName`. */
  customerKey: string;
  record: AnalyticsRecord;
}

/**
 * The rows of one E7 response: every event type × every generated customer, zeros included,
 * with the inserted records added; customers that occur only in inserted records are listed
 * where their count is not zero. Order: event type as in {@link EVENT_TYPES}, then generated
 * customers in id order, then the others by id and name.
 *
 * @param counts the base records' cells ({@link BaseEventCounts.countRange}); added to in place.
 */
export function eventCountRows(
  counts: Float64Array,
  inserted: Iterable<CountedRecord>,
  customers: readonly Customer[],
  customerIndexByKey: ReadonlyMap<string, number>,
): EventCount[] {
  const C = customers.length;
  const extra = new Map<string, { eventIndex: number; id: string; name: string; count: number }>();
  for (const entry of inserted) {
    const known = customerIndexByKey.get(entry.customerKey);
    if (known !== undefined) {
      counts[entry.eventIndex * C + known]!++;
    } else {
      const key = `${entry.eventIndex}\u0000${entry.customerKey}`;
      const row = extra.get(key) ?? { eventIndex: entry.eventIndex, id: entry.record.customerId, name: entry.record.customerName, count: 0 };
      row.count++;
      extra.set(key, row);
    }
  }
  const out: EventCount[] = [];
  const others = [...extra.values()].sort((x, y) => x.id.localeCompare(y.id) || x.name.localeCompare(y.name));
  EVENT_TYPES.forEach((eventType, e) => {
    for (const customer of customers) {
      out.push({ eventType, customerId: customer.id, customerName: customer.name, count: counts[e * C + customer.index]! });
    }
    for (const row of others) {
      if (row.eventIndex === e) out.push({ eventType, customerId: row.id, customerName: row.name, count: row.count });
    }
  });
  return out;
}
