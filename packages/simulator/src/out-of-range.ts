/**
 * Records carrying numbers PostgreSQL's `numeric` cannot hold (`--out-of-range-every`): JSON
 * allows any number, the database does not (`1e200000` overflows, `1e-20000` underflows its
 * scale), so a loader must refuse such a record alone, not its whole window. The reference shows
 * no field of a record; the field and its values are our choice.
 */
import type { Dataset } from './dataset.js';
import type { RecordEntry } from './deletions.js';
import { InvalidArgumentError } from './errors.js';

/** The numbers written, in turn, raw in the JSON text. */
export const DEFAULT_OUT_OF_RANGE_VALUES: readonly string[] = Object.freeze(['1e200000', '-1e200000', '1e-20000']);
/** The field that carries them, added as the record's last field. */
export const OUT_OF_RANGE_FIELD = 'amount';

const JSON_NUMBER = /^-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?$/;

/** Marks every Nth base record with an out-of-range number. */
export class OutOfRange {
  readonly #dataset: Dataset;
  readonly #every: number;
  readonly #values: readonly string[];
  /** Base indexes [b0, b1) of the last instant looked up: a page asks for the same instant many times. */
  #cached = { ms: NaN, b0: 0, b1: 0 };

  /**
   * @param every mark base records `every - 1`, `2 × every - 1`, … (the Nth, 2Nth, … 1-based); ≥ 1.
   * @param values JSON number texts, used in turn.
   * @throws {InvalidArgumentError} for `every` < 1, no values, or a value that is not a JSON number.
   */
  constructor(dataset: Dataset, every: number, values: readonly string[] = DEFAULT_OUT_OF_RANGE_VALUES) {
    if (!Number.isSafeInteger(every) || every < 1) throw new InvalidArgumentError(`outOfRangeEvery must be a whole number ≥ 0; got ${every}`);
    const bad = values.find((v) => !JSON_NUMBER.test(v));
    if (values.length === 0 || bad !== undefined) {
      throw new InvalidArgumentError(`outOfRangeValues must be JSON numbers such as 1e200000; got ${JSON.stringify(bad ?? values)}`);
    }
    this.#dataset = dataset;
    this.#every = every;
    this.#values = [...values];
  }

  /** First base index in [0, baseRecords) whose timestamp is ≥ ms (`strict`: > ms). */
  #baseBound(ms: number, strict: boolean): number {
    let lo = 0;
    let hi = this.#dataset.baseRecords;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      const t = this.#dataset.timestampMs(mid);
      if (strict ? t > ms : t >= ms) hi = mid;
      else lo = mid + 1;
    }
    return lo;
  }

  /** Base index of a record: base records come first at an instant, so tie `k` < their number is base `b0 + k`. */
  #baseIndex(entry: RecordEntry): number | undefined {
    if (this.#cached.ms !== entry.ms) this.#cached = { ms: entry.ms, b0: this.#baseBound(entry.ms, false), b1: this.#baseBound(entry.ms, true) };
    const { b0, b1 } = this.#cached;
    return entry.tie < b1 - b0 ? b0 + entry.tie : undefined;
  }

  /** The JSON text E6 serves for a record: with `"amount": <value>` added when it is marked. Inserted records are never marked. */
  mark(entry: RecordEntry): string {
    const i = this.#baseIndex(entry);
    if (i === undefined || (i + 1) % this.#every !== 0) return entry.json;
    const value = this.#values[((i + 1) / this.#every - 1) % this.#values.length]!;
    return `${entry.json.slice(0, -1)},"${OUT_OF_RANGE_FIELD}":${value}}`;
  }
}
