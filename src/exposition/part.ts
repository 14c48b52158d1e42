/**
 * A serialised part of an exposition that remembers where each family lies, so sources' parts merge
 * from their bytes without keeping parsed samples (100,000 E7 samples: 54 MB of heap, against 10 MB
 * of text per format). Design: docs/design/exposition-merge.md ("Serialising once").
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

/** Byte offsets: the family's start, its first sample line, its end. */
type Extent = readonly [start: number, body: number, end: number];

/** What merging needs of one family of an {@link IndexedPart} besides its bytes. */
export interface IndexedFamily {
  name: string;
  type: MetricType;
  help: string | undefined;
  /** Distinct. */
  sampleNames: readonly string[];
  samples: number;
  text: Extent;
  /**
   * `header` + its text sample lines (the same bytes: openMetricsHeaderOfPlain), or an extent in
   * {@link IndexedPart.ownOpenMetrics} whose `body` holds for a single block only.
   */
  openMetrics: { header: string } | { extent: Extent };
  om: OpenMetricsForm;
}

/** Families serialised in both formats, as the two serializers write them, with each family's place. */
export interface IndexedPart {
  readonly text: Buffer;
  /** Without `# EOF`; made on first use (a text scraper never needs it). */
  readonly openMetrics: Buffer;
  readonly samples: number;
  readonly families: readonly IndexedFamily[];
  /** The OpenMetrics of families whose own lines differ from their text ones. */
  readonly ownOpenMetrics: Buffer;
}

/** A family's OpenMetrics in `part`, whole or (`bodyOnly`, single block) without metadata. */
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
 * Serialises a normalized family list one family at a time (only one family's samples need exist),
 * to the same bytes as both serializers give for the whole list (`normalized`, no `# EOF`).
 */
export class PartWriter {
  readonly #text = new Lines(true);
  readonly #openMetrics = new Lines(true);
  readonly #claim: (names: string[]) => boolean;
  readonly #families: IndexedFamily[] = [];
  #samples = 0;

  /** @param types name → type of every family to be added (OpenMetrics' claims need all). */
  constructor(types: ReadonlyMap<string, MetricType>) {
    this.#claim = openMetricsClaims(types);
  }

  /**
   * Writes the next family with `target`'s labels added as {@link addTargetLabels} adds them; may
   * relabel the family in place, so it must be the caller's to change. Never throws.
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

/** A source's labels for every sample of its part, made once. */
export interface TargetLabels {
  readonly pairs: ReadonlyArray<readonly [string, string]>;
  readonly names: ReadonlySet<string>;
  /** Without braces. */
  readonly text: string;
}

/** @param pairs valid, distinct names, not `le` or `quantile`. Never throws. */
export function targetLabels(pairs: ReadonlyArray<readonly [string, string]>): TargetLabels {
  return { pairs, names: new Set(pairs.map(([name]) => name)), text: formatTargetLabels(pairs) };
}

/** Whether writing `target`'s pairs first is enough: no `exported_` rename, OpenMetrics lines = text lines. */
function labelsAsText(family: MetricFamily, target: TargetLabels): boolean {
  if (family.type === 'histogram' || family.type === 'summary' || family.name.startsWith('_')) return false;
  for (const name of target.names) if (name.startsWith('_')) return false;
  for (const sample of family.samples) {
    if (sample.timestampMs !== undefined) return false;
    for (const [name] of sample.labels) if (target.names.has(name) || name.startsWith('_')) return false;
  }
  return true;
}

export interface SourcePart {
  source: string;
  part: IndexedPart;
}

interface Member {
  part: IndexedPart;
  family: IndexedFamily;
}

/**
 * Joins sources' parts into one exposition in both formats (OpenMetrics without `# EOF`), byte for byte what
 * serialising {@link mergeSources} of their families gives, mostly by copying byte ranges. Never throws.
 */
export function mergeParts(parts: readonly SourcePart[]): {
  part: { readonly text: Buffer; readonly openMetrics: Buffer; readonly samples: number };
  dropped: Array<{ source: string; family: string }>;
} {
  const byName = new Map<string, Member[]>();
  /** Reserved name → kept family. */
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

function bodies(members: readonly Member[]): Buffer[] {
  return members.flatMap(({ part, family }) => openMetricsBytes(part, family, true));
}

/** A merged family's OpenMetrics, as writeOpenMetricsFamily would decide it (same claims, same order). */
function mergedOpenMetrics(members: readonly Member[], claim: (names: string[]) => boolean): Buffer[] {
  const { name, type, help, om } = members[0]!.family;
  // Skipping depends on the name only, so it is the same in every part.
  if (om.form === 'skipped') return [];
  switch (type) {
    case 'gauge':
    case 'untyped':
      return [Buffer.from(openMetricsHeader(name, type === 'gauge' ? 'gauge' : 'unknown', help)), ...bodies(members)];
    case 'counter': {
      const counter = openMetricsCounter(
        name,
        members.every(({ family }) => family.om.valid),
        claim,
      );
      return [Buffer.from(openMetricsHeader(counter.name, counter.type, help)), ...bodies(members)];
    }
    case 'histogram':
    case 'summary': {
      // Points never span sources, so the merged family is valid when every part's is.
      if (members.every(({ family }) => family.om.form === 'typed') && claim([`${name}_created`])) {
        return [Buffer.from(openMetricsHeader(name, type, help)), ...bodies(members)];
      }
      const only = members.length === 1 ? members[0]! : undefined;
      if (only !== undefined && only.family.om.form === 'unknownBlocks' && !only.family.om.valid) {
        return openMetricsBytes(only.part, only.family, false);
      }
      // Rare: read the family back from its text; a failed claim took nothing.
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
