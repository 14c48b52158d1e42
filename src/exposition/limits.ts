/**
 * The limits an exposition is read under, as Prometheus's scrape configuration sets them for a
 * target (`sample_limit`, `label_limit`, `label_value_length_limit`), checked on the bytes as they
 * arrive: E7's body (`GET /analytics/prometheus`, "E7 notes") is checked chunk by chunk while it is
 * received, before any string, sample or label is made of it, so a body over a limit is abandoned
 * at the first line that breaks it.
 *
 * What is counted, on the text format 0.0.4 (and OpenMetrics, whose sample lines have the same
 * label sets):
 * - samples: every line that is neither blank nor a comment (`#`), a line the parser will drop as
 *   invalid included: its cost has been paid by then;
 * - labels: the label pairs of one sample line, as the upstream wrote them (the metric name is
 *   not one; Prometheus's label_limit also counts `__name__` and the target's labels, so a
 *   Prometheus over this exporter needs room for `source`, `job` and `instance` besides);
 * - label value length: bytes of one value once its escapes (`\\`, `\"`, `\n`) are undone, which is
 *   its UTF-8 length as Prometheus measures it (Go's `len`), for a body in valid UTF-8.
 */
import type { UpstreamLimitName } from '../errors.js';

/** Limits on one exposition; 0 turns a limit off, as in Prometheus. */
export interface ExpositionLimits {
  /** sample_limit: sample lines per exposition. */
  sampleLimit: number;
  /** label_limit: label pairs per sample line. */
  labelLimit: number;
  /** label_value_length_limit: bytes per label value, unescaped. */
  labelValueLengthLimit: number;
}

/** The first line that broke a limit. */
export interface LimitBreach {
  limit: UpstreamLimitName;
  /** The limit's configured value. */
  value: number;
  /** 1-based line of the body where it broke. */
  line: number;
}

const LF = 0x0a;
const CR = 0x0d;
const SPACE = 0x20;
const TAB = 0x09;
const HASH = 0x23;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const LBRACE = 0x7b;
const RBRACE = 0x7d;
const BOM = [0xef, 0xbb, 0xbf] as const;

/** Where the scanner stands in its line. */
const LINE_START = 0;
/** A comment, or the rest of a sample line after its label set: skipped to the line's end. */
const SKIP = 1;
const NAME = 2;
const AFTER_NAME = 3;
const LABELS = 4;
const VALUE = 5;
const ESCAPE = 6;

/**
 * Checks an exposition's bytes against {@link ExpositionLimits}, fed in chunks as they are
 * received (a line, a label value or a UTF-8 character may span chunks). Linear in the bytes and
 * allocation-free: every byte is looked at once.
 */
export class ExpositionLimitScanner {
  readonly #limits: ExpositionLimits;
  #state = LINE_START;
  #samples = 0;
  #labels = 0;
  #valueBytes = 0;
  #line = 1;
  /** Bytes of a leading byte order mark matched so far; -1 once the body's first bytes are past. */
  #bom = 0;
  #breach: LimitBreach | undefined;

  constructor(limits: ExpositionLimits) {
    this.#limits = limits;
  }

  /** Sample lines seen so far. */
  get samples(): number {
    return this.#samples;
  }

  /**
   * Reads the next chunk of the body. Never throws.
   *
   * @returns the first breach, once one is found (then and on every later call); undefined while
   *   the body is within its limits.
   */
  write(chunk: Uint8Array): LimitBreach | undefined {
    if (this.#breach !== undefined) return this.#breach;
    const { sampleLimit, labelLimit, labelValueLengthLimit } = this.#limits;
    let state = this.#state;
    let i = 0;
    // The parser skips a leading byte order mark: so does the count (it is not a sample line).
    while (this.#bom >= 0 && i < chunk.length) {
      if (chunk[i] === BOM[this.#bom]) {
        i++;
        if (++this.#bom === BOM.length) this.#bom = -1;
      } else {
        // A broken mark starts a line that is not a sample the parser can read: count it, skip it.
        if (this.#bom > 0) {
          state = SKIP;
          if (++this.#samples > sampleLimit && sampleLimit > 0) return this.#break('sample_limit', sampleLimit);
        }
        this.#bom = -1;
      }
    }
    for (; i < chunk.length; i++) {
      const c = chunk[i]!;
      if (c === LF) {
        // A raw newline ends the line whatever it was in (the text format has none in values).
        state = LINE_START;
        this.#line++;
        continue;
      }
      switch (state) {
        case LINE_START:
          if (c === SPACE || c === TAB || c === CR) continue;
          if (c === HASH) {
            state = SKIP;
            continue;
          }
          if (++this.#samples > sampleLimit && sampleLimit > 0) return this.#break('sample_limit', sampleLimit);
          state = c === LBRACE ? LABELS : NAME;
          this.#labels = 0;
          continue;
        case NAME:
          if (c === LBRACE) state = LABELS;
          else if (c === SPACE || c === TAB) state = AFTER_NAME;
          continue;
        case AFTER_NAME:
          if (c === LBRACE) state = LABELS;
          else if (c !== SPACE && c !== TAB) state = SKIP;
          continue;
        case LABELS:
          // Every quoted string of the label set is a value (one per pair): counting them needs no names.
          if (c === QUOTE) {
            if (++this.#labels > labelLimit && labelLimit > 0) return this.#break('label_limit', labelLimit);
            this.#valueBytes = 0;
            state = VALUE;
          } else if (c === RBRACE) {
            state = SKIP;
          }
          continue;
        case VALUE:
          if (c === QUOTE) {
            state = LABELS;
            continue;
          }
          // An escape is two bytes of text for one of the value: count it at its backslash.
          if (c === BACKSLASH) state = ESCAPE;
          if (++this.#valueBytes > labelValueLengthLimit && labelValueLengthLimit > 0) {
            return this.#break('label_value_length_limit', labelValueLengthLimit);
          }
          continue;
        case ESCAPE:
          state = VALUE;
          continue;
        default:
          continue;
      }
    }
    this.#state = state;
    return undefined;
  }

  #break(limit: UpstreamLimitName, value: number): LimitBreach {
    this.#breach = { limit, value, line: this.#line };
    return this.#breach;
  }
}

/**
 * Checks a whole exposition against `limits` (see {@link ExpositionLimitScanner}). Never throws.
 *
 * @param body the exposition as text (measured in UTF-8) or bytes.
 * @returns the first breach, or undefined when it is within every limit.
 */
export function checkExpositionLimits(body: string | Uint8Array, limits: ExpositionLimits): LimitBreach | undefined {
  return new ExpositionLimitScanner(limits).write(typeof body === 'string' ? Buffer.from(body) : body);
}

/** The unit each limit counts in, for messages: `200000 samples`. */
export function describeLimit(breach: Pick<LimitBreach, 'limit' | 'value'>): string {
  const unit = breach.limit === 'sample_limit' ? 'samples' : breach.limit === 'label_limit' ? 'labels per sample' : 'bytes per label value';
  return `${breach.limit} of ${breach.value} ${unit}`;
}
