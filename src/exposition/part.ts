/**
 * A serialised part of an exposition that remembers where each family lies in it, so that
 * several sources' parts can be merged into one exposition (one `# HELP`/`# TYPE` per family) from
 * their bytes, without keeping the sources' parsed samples (E7: 100,000 samples take about 60 MB
 * as objects, against 10 MB of text per format).
 */
import { reservedNamesOf } from './merge.js';
import { parseExposition } from './parse.js';
import { Lines, openMetricsClaims, openMetricsHeader, writeOpenMetricsFamily, writeTextFamily, type OpenMetricsForm } from './serialize.js';
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
  /** In the part's OpenMetrics; `body` is meaningful for a single block only (form `typed` or `unknown`). */
  openMetrics: Extent;
  /** How the OpenMetrics serializer wrote it in this part. */
  om: OpenMetricsForm;
}

/** A list of families serialised in both formats, as {@link serializeTextBuffer} and {@link serializeOpenMetricsBuffer} (without `# EOF`) write it, with each family's place. */
export interface IndexedPart {
  /** Prometheus text 0.0.4. */
  text: Buffer;
  /** OpenMetrics 1.0.0 without `# EOF`. */
  openMetrics: Buffer;
  samples: number;
  families: readonly IndexedFamily[];
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

  /** Writes the next family (normalized, in the list's order). Never throws. */
  add(family: MetricFamily): void {
    const text = this.#text;
    const om = this.#openMetrics;
    const textStart = text.bytes;
    writeTextFamily(text, family);
    const omStart = om.bytes;
    om.bodyAt = omStart;
    const form = writeOpenMetricsFamily(om, family, this.#claim);
    this.#families.push({
      name: family.name,
      type: family.type,
      help: family.help,
      sampleNames: [...new Set(family.samples.map((sample) => sample.name))],
      samples: family.samples.length,
      text: [textStart, text.bodyAt, text.bytes],
      openMetrics: [omStart, om.bodyAt, om.bytes],
      om: form,
    });
    this.#samples += family.samples.length;
  }

  /** The part; the writer is spent. */
  finish(): IndexedPart {
    return { text: this.#text.toBuffer(), openMetrics: this.#openMetrics.toBuffer(), samples: this.#samples, families: this.#families };
  }
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
  text: Buffer;
  openMetrics: Buffer;
  samples: number;
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
  const openMetrics: Buffer[] = [];
  let samples = 0;
  const claim = openMetricsClaims(new Map([...byName].map(([name, members]) => [name, members[0]!.family.type])));
  for (const members of byName.values()) {
    const first = members[0]!.family;
    text.push(members[0]!.part.text.subarray(first.text[0], first.text[1]));
    for (const { part, family } of members) {
      text.push(part.text.subarray(family.text[1], family.text[2]));
      samples += family.samples;
    }
    const om = openMetricsOf(members, claim);
    if (om !== undefined) openMetrics.push(...om);
  }
  return { text: Buffer.concat(text), openMetrics: Buffer.concat(openMetrics), samples, dropped };
}

/** Every member's OpenMetrics samples, one after the other. */
function bodies(members: readonly Member[]): Buffer[] {
  return members.map(({ part, family }) => part.openMetrics.subarray(family.openMetrics[1], family.openMetrics[2]));
}

/** A merged family's OpenMetrics, decided as writeOpenMetricsFamily decides it for the merged family (same claims, same order). */
function openMetricsOf(members: readonly Member[], claim: (names: string[]) => boolean): Buffer[] | undefined {
  const { name, type, help, om } = members[0]!.family;
  // Skipping depends on the name only, so it is the same in every part.
  if (om.form === 'skipped') return undefined;
  switch (type) {
    case 'gauge':
    case 'untyped':
      return [Buffer.from(openMetricsHeader(name, type === 'gauge' ? 'gauge' : 'unknown', help)), ...bodies(members)];
    case 'counter': {
      // A counter's sample lines are the same whether it is typed or not; only its metadata differs.
      const base = name.endsWith('_total') && name.length > '_total'.length ? name.slice(0, -'_total'.length) : undefined;
      const typed = base !== undefined && members.every(({ family }) => family.om.valid) && claim([base, `${base}_created`]);
      return [Buffer.from(typed ? openMetricsHeader(base, 'counter', help) : openMetricsHeader(name, 'unknown', help)), ...bodies(members)];
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
        return [only.part.openMetrics.subarray(only.family.openMetrics[0], only.family.openMetrics[2])];
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
