/**
 * A serialised part of an exposition that remembers where each family lies in it, so that
 * several sources' parts can be merged into one exposition (one `# HELP`/`# TYPE` per family) from
 * their bytes, without keeping the sources' parsed samples (E7: 100,000 samples, parsed and
 * labelled, hold about 54 MB of heap, against 10 MB of text per format).
 */
import { relabelInPlace, reservedNamesOf } from './merge.js';
import { parseExposition } from './parse.js';
import { Lines } from './lines.js';
import {
  openMetricsClaims,
  openMetricsCounter,
  openMetricsHeader,
  openMetricsHeaderOfPlain,
  writeOpenMetricsFamily,
  type OpenMetricsForm,
} from './openmetrics.js';
import { formatTargetLabels, writeTextFamily } from './text.js';
import type { MetricFamily, MetricType } from './types.js';

/** Where a family starts, where its first sample line starts (after the metadata lines), and where it ends: byte offsets. */
export type Extent = readonly [start: number, body: number, end: number];

/** One family of an {@link IndexedPart}: what merging needs of it besides its bytes. */
export interface IndexedFamily {
  name: string;
  type: MetricType;
  help: string | undefined;
  /** Its samples' distinct names. */
  sampleNames: readonly string[];
  samples: number;
  /** In the part's text. */
  text: Extent;
  /**
   * Its OpenMetrics: `header` followed by its text sample lines, which are the same bytes (see
   * openMetricsHeaderOfPlain: E7's families), or an extent in the part's own OpenMetrics bytes,
   * where `body` is meaningful for a single block only (form `typed` or `unknown`).
   */
  openMetrics: { header: string } | { extent: Extent };
  /** How the OpenMetrics serializer wrote it in this part. */
  om: OpenMetricsForm;
}

/** A list of families serialised in both formats, as {@link serializeTextBuffer} and {@link serializeOpenMetricsBuffer} (without `# EOF`) write it, with each family's place. */
export interface IndexedPart {
  /** Prometheus text 0.0.4. */
  readonly text: Buffer;
  /**
   * OpenMetrics 1.0.0 without `# EOF`, made on first use (a scraper that asks for text never
   * needs it): until then only the families whose OpenMetrics samples differ from their text
   * ones are kept.
   */
  readonly openMetrics: Buffer;
  readonly samples: number;
  readonly families: readonly IndexedFamily[];
  /** The OpenMetrics of the families whose {@link IndexedFamily.openMetrics} is an extent. */
  readonly ownOpenMetrics: Buffer;
}

/** A family's OpenMetrics in `part`: whole, or (`bodyOnly`) without its metadata lines, for a single block. */
function openMetricsBytes(part: IndexedPart, family: IndexedFamily, bodyOnly: boolean): Buffer[] {
  const om = family.openMetrics;
  if ('header' in om) {
    const body = part.text.subarray(family.text[1], family.text[2]);
    return bodyOnly ? [body] : [Buffer.from(om.header), body];
  }
  return [part.ownOpenMetrics.subarray(bodyOnly ? om.extent[1] : om.extent[0], om.extent[2])];
}

class Part implements IndexedPart {
  readonly text: Buffer;
  readonly samples: number;
  readonly families: readonly IndexedFamily[];
  readonly ownOpenMetrics: Buffer;
  #openMetrics: Buffer | undefined;

  constructor(text: Buffer, ownOpenMetrics: Buffer, samples: number, families: readonly IndexedFamily[]) {
    this.text = text;
    this.ownOpenMetrics = ownOpenMetrics;
    this.samples = samples;
    this.families = families;
  }

  get openMetrics(): Buffer {
    return (this.#openMetrics ??= Buffer.concat(this.families.flatMap((family) => openMetricsBytes(this, family, false))));
  }
}

/**
 * Serialises a normalized family list one family at a time, so that a caller can make each
 * family (rename, label) just before it is written and drop it just after: only one family's
 * samples need to exist at once besides the caller's own. The bytes equal
 * `serializeTextBuffer(all, { normalized: true })` and
 * `serializeOpenMetricsBuffer(all, { eof: false, normalized: true })` of the whole list.
 */
export class PartWriter {
  readonly #text = new Lines(true);
  readonly #openMetrics = new Lines(true);
  readonly #claim: (names: string[]) => boolean;
  readonly #families: IndexedFamily[] = [];
  #samples = 0;

  /**
   * @param types every family that will be added, name → type (OpenMetrics decides a family's
   *   type by the names of all of them).
   */
  constructor(types: ReadonlyMap<string, MetricType>) {
    this.#claim = openMetricsClaims(types);
  }

  /**
   * Writes the next family (normalized, in the list's order), with `target`'s labels added to
   * every sample as {@link addTargetLabels} adds them. Where that needs more than writing the
   * same pairs first (a sample has a label of one of those names, or the family's OpenMetrics
   * lines are not its text lines), the family's samples are relabelled in place, so the family
   * must be the caller's to change. Never throws.
   */
  add(family: MetricFamily, target?: TargetLabels): void {
    let targetText: string | undefined;
    if (target !== undefined) {
      if (labelsAsText(family, target)) targetText = target.text;
      else relabelInPlace(family, undefined, target.pairs);
    }
    const text = this.#text;
    const textStart = text.bytes;
    writeTextFamily(text, family, targetText);
    let openMetrics: IndexedFamily['openMetrics'];
    let form: OpenMetricsForm;
    const plain = openMetricsHeaderOfPlain(family, this.#claim);
    if (plain !== undefined) {
      openMetrics = { header: plain.header };
      form = plain.form;
    } else {
      const om = this.#openMetrics;
      const start = om.bytes;
      om.bodyAt = start;
      form = writeOpenMetricsFamily(om, family, this.#claim);
      openMetrics = { extent: [start, om.bodyAt, om.bytes] };
    }
    this.#families.push({
      name: family.name,
      type: family.type,
      help: family.help,
      sampleNames: [...new Set(family.samples.map((sample) => sample.name))],
      samples: family.samples.length,
      text: [textStart, text.bodyAt, text.bytes],
      openMetrics,
      om: form,
    });
    this.#samples += family.samples.length;
  }

  /** The part; the writer is spent. */
  finish(): IndexedPart {
    return new Part(this.#text.toBuffer(), this.#openMetrics.toBuffer(), this.#samples, this.#families);
  }
}

/** Labels to add to every sample of a part (a source's), made once for {@link PartWriter.add}. */
export interface TargetLabels {
  readonly pairs: ReadonlyArray<readonly [string, string]>;
  readonly names: ReadonlySet<string>;
  /** The pairs as the text format writes them, without braces. */
  readonly text: string;
}

/** {@link TargetLabels} of label pairs with valid, distinct names (not `le` or `quantile`). Never throws. */
export function targetLabels(pairs: ReadonlyArray<readonly [string, string]>): TargetLabels {
  return { pairs, names: new Set(pairs.map(([name]) => name)), text: formatTargetLabels(pairs) };
}

/**
 * Whether `target` can be added to `family` by writing its pairs first: no sample renames a label
 * to `exported_<name>`, and the family's OpenMetrics sample lines are its text lines (see
 * openMetricsHeaderOfPlain; a target label name starting with `_` would change which samples
 * OpenMetrics serves).
 */
function labelsAsText(family: MetricFamily, target: TargetLabels): boolean {
  if (family.type === 'histogram' || family.type === 'summary' || family.name.startsWith('_')) return false;
  for (const name of target.names) if (name.startsWith('_')) return false;
  for (const sample of family.samples) {
    if (sample.timestampMs !== undefined) return false;
    for (const [name] of sample.labels) if (target.names.has(name) || name.startsWith('_')) return false;
  }
  return true;
}

/** One source's part, for {@link mergeParts}. */
export interface SourcePart {
  source: string;
  part: IndexedPart;
}

interface Member {
  part: IndexedPart;
  family: IndexedFamily;
}

/**
 * Joins several sources' parts (each labelled apart, e.g. by `source`) into one exposition in
 * both formats, exactly as serialising {@link mergeSources} of the sources' families would:
 * one family per name in order of first appearance, its samples in source order under the first
 * source's help; a later source's family is dropped whole when its type differs from the kept
 * family of that name, or when a name it reserves is reserved by a kept family of another name.
 * The text and, in the usual cases, the OpenMetrics are copied from the parts' bytes; a
 * histogram or summary whose OpenMetrics form in the merged exposition differs from its forms in
 * the parts is read back from its text and written again.
 *
 * @returns the merged bytes (OpenMetrics without `# EOF`), the sample count, and the dropped
 *   families by source, in input order. Never throws.
 */
export function mergeParts(parts: readonly SourcePart[]): {
  part: { readonly text: Buffer; readonly openMetrics: Buffer; readonly samples: number };
  dropped: Array<{ source: string; family: string }>;
} {
  const byName = new Map<string, Member[]>();
  /** Reserved name → the kept family that reserves it. */
  const owner = new Map<string, string>();
  const dropped: Array<{ source: string; family: string }> = [];
  for (const { source, part } of parts) {
    for (const family of part.families) {
      const kept = byName.get(family.name);
      if (kept !== undefined) {
        if (kept[0]!.family.type === family.type) kept.push({ part, family });
        else dropped.push({ source, family: family.name });
        continue;
      }
      const names = reservedNamesOf(family.name, family.type, family.sampleNames);
      if (names.some((name) => (owner.get(name) ?? family.name) !== family.name)) {
        dropped.push({ source, family: family.name });
        continue;
      }
      for (const name of names) owner.set(name, family.name);
      byName.set(family.name, [{ part, family }]);
    }
  }

  const text: Buffer[] = [];
  let samples = 0;
  for (const members of byName.values()) {
    const first = members[0]!.family;
    text.push(members[0]!.part.text.subarray(first.text[0], first.text[1]));
    for (const { part, family } of members) {
      text.push(part.text.subarray(family.text[1], family.text[2]));
      samples += family.samples;
    }
  }
  let openMetrics: Buffer | undefined;
  const merged = {
    text: Buffer.concat(text),
    samples,
    // Made on first use, as a part's own.
    get openMetrics(): Buffer {
      if (openMetrics === undefined) {
        const claim = openMetricsClaims(new Map([...byName].map(([name, members]) => [name, members[0]!.family.type])));
        openMetrics = Buffer.concat([...byName.values()].flatMap((members) => mergedOpenMetrics(members, claim)));
      }
      return openMetrics;
    },
  };
  return { part: merged, dropped };
}

/** Every member's OpenMetrics samples, one after the other. */
function bodies(members: readonly Member[]): Buffer[] {
  return members.flatMap(({ part, family }) => openMetricsBytes(part, family, true));
}

/** A merged family's OpenMetrics, decided as writeOpenMetricsFamily decides it for the merged family (same claims, same order). */
function mergedOpenMetrics(members: readonly Member[], claim: (names: string[]) => boolean): Buffer[] {
  const { name, type, help, om } = members[0]!.family;
  // Skipping depends on the name only, so it is the same in every part.
  if (om.form === 'skipped') return [];
  switch (type) {
    case 'gauge':
    case 'untyped':
      return [Buffer.from(openMetricsHeader(name, type === 'gauge' ? 'gauge' : 'unknown', help)), ...bodies(members)];
    case 'counter': {
      // A counter's sample lines are the same whether it is typed or not; only its metadata differs.
      const counter = openMetricsCounter(
        name,
        members.every(({ family }) => family.om.valid),
        claim,
      );
      return [Buffer.from(openMetricsHeader(counter.name, counter.type, help)), ...bodies(members)];
    }
    case 'histogram':
    case 'summary': {
      // Points never span sources (each source's samples carry their own label), so the merged
      // family is valid when every part's is, and its ordered samples are the parts' in order.
      if (members.every(({ family }) => family.om.form === 'typed') && claim([`${name}_created`])) {
        return [Buffer.from(openMetricsHeader(name, type, help)), ...bodies(members)];
      }
      const only = members.length === 1 ? members[0]! : undefined;
      if (only !== undefined && only.family.om.form === 'unknownBlocks' && !only.family.om.valid) {
        return openMetricsBytes(only.part, only.family, false);
      }
      // Rare (a conflict of names between sources, or points invalid in OpenMetrics): read the
      // family back from its text and let the serializer decide; a failed claim took nothing.
      const first = members[0]!;
      const source = Buffer.concat([
        first.part.text.subarray(first.family.text[0], first.family.text[1]),
        ...members.map(({ part, family }) => part.text.subarray(family.text[1], family.text[2])),
      ]).toString();
      const family = parseExposition(source).families[0]!;
      const out = new Lines();
      writeOpenMetricsFamily(out, family, claim);
      return [out.toBuffer()];
    }
  }
}
