/**
 * Prometheus's scrape limits (`sample_limit`, `label_limit`, `label_value_length_limit`) on E7's
 * body ("E7 notes"), checked on the bytes chunk by chunk as they arrive, before any string is made,
 * so a body over a limit is abandoned at the first line that breaks it. Samples are non-blank,
 * non-comment lines (invalid ones included); labels are the pairs as written; value length is
 * bytes once unescaped. Design: docs/design/exposition-merge.md ("Limits").
 */
import type { UpstreamLimitName } from '../errors.js';

/** Limits on one exposition; 0 turns a limit off, as in Prometheus. */
export interface ExpositionLimits {
  sampleLimit: number;
  /** Label pairs per sample line. */
  labelLimit: number;
  /** Bytes per label value, unescaped. */
  labelValueLengthLimit: number;
}

/** The first line that broke a limit. */
export interface LimitBreach {
  limit: UpstreamLimitName;
  /** The configured value. */
  value: number;
  /** 1-based. */
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

const LINE_START = 0;
/** A comment, or the rest of a sample line after its label set. */
const SKIP = 1;
const NAME = 2;
const AFTER_NAME = 3;
const LABELS = 4;
const VALUE = 5;
const ESCAPE = 6;

/** Checks an exposition's bytes, fed in chunks (anything may span chunks); allocation-free. */
export class ExpositionLimitScanner {
  readonly #limits: ExpositionLimits;
  #state = LINE_START;
  #samples = 0;
  #labels = 0;
  #valueBytes = 0;
  #line = 1;
  /** Bytes of a leading byte order mark matched; -1 once past. */
  #bom = 0;
  #breach: LimitBreach | undefined;

  constructor(limits: ExpositionLimits) {
    this.#limits = limits;
  }

  get samples(): number {
    return this.#samples;
  }

  /** @returns the first breach (then on every later call too); undefined while within limits. Never throws. */
  write(chunk: Uint8Array): LimitBreach | undefined {
    if (this.#breach !== undefined) return this.#breach;
    const { sampleLimit, labelLimit, labelValueLengthLimit } = this.#limits;
    let state = this.#state;
    let i = 0;
    while (this.#bom >= 0 && i < chunk.length) {
      if (chunk[i] === BOM[this.#bom]) {
        i++;
        if (++this.#bom === BOM.length) this.#bom = -1;
      } else {
        // A broken mark starts a line the parser drops: count it.
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
          // Every quoted string of a label set is a value: counting needs no names.
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

/** The unit each limit counts in, for messages: `200000 samples`. */
export function describeLimit(breach: Pick<LimitBreach, 'limit' | 'value'>): string {
  const unit = breach.limit === 'sample_limit' ? 'samples' : breach.limit === 'label_limit' ? 'labels per sample' : 'bytes per label value';
  return `${breach.limit} of ${breach.value} ${unit}`;
}
