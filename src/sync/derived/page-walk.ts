/**
 * One walk over a page's kept records, while it waits for the writer, yielding what every derived
 * table needs: the catalogue's fields, records_hourly's groups, records_hourly_distinct's values.
 * Each record walks a trie of (key, type) steps to its shape (records of a page mostly share one);
 * shapes are counted, and know where each rollup path's key sits. Design:
 * docs/design/derived-tables.md.
 */
import type { RollupConfig, RollupDimension } from '../../config.js';
import type { RollupCounts } from './rollup/counts.js';
import { exampleOf, isSecretField, TYPE_NAMES, typeCode, type WindowFields } from './fields/field-types.js';
import { groupKey, NOT_EXACT, scalarText, textAt, type DistinctGroup, type RollupGroup } from './rollup/groups.js';
import { HOUR_MS } from './sql.js';

/** Empty lists for a table not kept. */
export interface WalkRollup {
  /** Undefined when ROLLUP_DIMENSIONS is off (no rollup counted). */
  dimensions: readonly RollupDimension[] | undefined;
  distinctBy: readonly RollupDimension[];
  distinct: readonly RollupDimension[];
}

export interface PageObservations {
  /** Empty when the catalogue was not asked for. */
  fields: WindowFields;
  /** Undefined with ROLLUP_DIMENSIONS=off. */
  rollup: RollupCounts | undefined;
}

/** Children a trie node scans before it indexes them in a map. */
const SCANNED_CHILDREN = 16;

interface Shape {
  keys: string[];
  types: number[];
  /** The shape's first record's values. */
  values: unknown[];
  /** Per rollup path, its top-level key's position among `keys`, or -1. */
  picks: Int32Array;
  records: number;
  first: number;
  last: number;
  untimed: boolean;
}

interface ShapeNode {
  key: string;
  type: number;
  children: ShapeNode[];
  /** By type and key, past {@link SCANNED_CHILDREN}. */
  index: Map<string, ShapeNode> | undefined;
  /** Of records whose keys end here. */
  shape: Shape | undefined;
}

function node(key: string, type: number): ShapeNode {
  return { key, type, children: [], index: undefined, shape: undefined };
}

function child(parent: ShapeNode, key: string, type: number): ShapeNode {
  const children = parent.children;
  if (parent.index === undefined) {
    for (let c = 0; c < children.length; c++) {
      const kid = children[c]!;
      if (kid.key === key && kid.type === type) return kid;
    }
    const kid = node(key, type);
    if (children.length < SCANNED_CHILDREN) {
      children.push(kid);
      return kid;
    }
    parent.index = new Map(children.map((k) => [TYPE_NAMES[k.type]! + '\u0000' + k.key, k]));
    parent.index.set(TYPE_NAMES[type]! + '\u0000' + key, kid);
    return kid;
  }
  const name = TYPE_NAMES[type]! + '\u0000' + key;
  let kid = parent.index.get(name);
  if (kid === undefined) parent.index.set(name, (kid = node(key, type)));
  return kid;
}

/** In the shapes' order of appearance, so a field's example is the first non-null value seen. */
function addShapes(shapes: readonly Shape[], into: WindowFields): void {
  for (const s of shapes) {
    for (let i = 0; i < s.keys.length; i++) {
      const key = s.keys[i]!;
      const type = TYPE_NAMES[s.types[i]!]!;
      const value = s.values[i];
      const stats = into.get(key);
      if (stats === undefined) {
        into.set(key, {
          types: new Set([type]),
          records: s.records,
          first: s.first,
          last: s.last,
          untimed: s.untimed,
          example: value === null || isSecretField(key) ? null : exampleOf(value),
        });
        continue;
      }
      stats.types.add(type);
      stats.records += s.records;
      if (s.first < stats.first) stats.first = s.first;
      if (s.last > stats.last) stats.last = s.last;
      if (s.untimed) stats.untimed = true;
      if (stats.example === null && value !== null && !isSecretField(key)) stats.example = exampleOf(value);
    }
  }
}

/** {@link textAt} from the value at the path's first key (undefined: no such key). */
function textFrom(value: unknown, rest: readonly string[] | undefined): string | null | typeof NOT_EXACT {
  return rest !== undefined ? textAt(value, rest) : scalarText(value);
}

/** Group maps nested by value (null a key of its own). */
type Tree = Map<string | null, unknown>;

function descend(tree: Tree, values: readonly (string | null)[], from: number, to: number): Tree {
  let map = tree;
  for (let i = from; i < to; i++) {
    const v = values[i]!;
    let next = map.get(v) as Tree | undefined;
    if (next === undefined) map.set(v, (next = new Map()));
    map = next;
  }
  return map;
}

export function pageWalkFor(rollup: RollupConfig): PageWalk {
  const distinct = rollup.enabled ? rollup.distinct : [];
  return new PageWalk({ dimensions: rollup.enabled ? rollup.dimensions : undefined, distinctBy: distinct.length > 0 ? rollup.distinctBy : [], distinct });
}

/** One per run: {@link observe} keeps nothing of a page but scratch arrays. */
export class PageWalk {
  readonly rolls: boolean;
  /** Top-level key of each rollup path: dimensions, ROLLUP_DISTINCT_BY, ROLLUP_DISTINCT. */
  private readonly heads: string[];
  /** Below the top-level key; undefined for a top-level field. */
  private readonly rests: (string[] | undefined)[];
  private readonly paths: string[][];
  private readonly dims: number;
  private readonly by: number;
  private readonly fieldCount: number;
  /** Scratch per record: each rollup path's text, then the walk's keys, types and values. */
  private readonly texts: (string | null)[];
  private readonly keys: string[] = [];
  private readonly types: number[] = [];
  private readonly values: unknown[] = [];

  /** @param rollup undefined for the catalogue alone. */
  constructor(rollup?: WalkRollup) {
    const dimensions = rollup?.dimensions;
    const by = dimensions === undefined ? [] : (rollup?.distinctBy ?? []);
    const distinct = dimensions === undefined ? [] : (rollup?.distinct ?? []);
    this.rolls = dimensions !== undefined;
    this.paths = [...(dimensions ?? []), ...(distinct.length > 0 ? by : []), ...distinct].map((d) => d.path);
    this.heads = this.paths.map((p) => p[0] ?? '');
    this.rests = this.paths.map((p) => (p.length > 1 ? p.slice(1) : undefined));
    this.dims = dimensions?.length ?? 0;
    this.by = distinct.length > 0 ? by.length : 0;
    this.fieldCount = distinct.length;
    this.texts = new Array<string | null>(this.paths.length).fill(null);
  }

  /**
   * @param keep positions of the records stored, ascending; `eventTimes` per kept record, ms or null.
   * @returns rollup groups `exact` false (and none) when a value's `#>>` text is not one the parsed record gives exactly.
   */
  observe(
    records: readonly unknown[],
    keep: readonly number[],
    eventTimes: readonly (number | null)[],
    catalogue: boolean,
    into: WindowFields = new Map(),
  ): PageObservations {
    const rollup: RollupCounts | undefined = this.rolls ? { exact: true, hourly: new Map(), distinct: new Map() } : undefined;
    const root = node('', 0);
    const shapes: Shape[] = [];
    const texts = this.texts;
    let counting = rollup !== undefined;
    // Records of a page mostly share an hour.
    const hourTrees = new Map<number | null, { hourly: Tree; distinct: Tree }>();
    let lastHour: number | null | undefined;
    let trees: { hourly: Tree; distinct: Tree } | undefined;
    for (let k = 0; k < keep.length; k++) {
      const record = records[keep[k]!];
      const ms = eventTimes[k] ?? null;
      let shape: Shape | undefined;
      if (catalogue && typeof record === 'object' && record !== null && !Array.isArray(record)) {
        shape = this.#shapeOf(root, record as Record<string, unknown>, shapes);
        shape.records++;
        if (ms === null) shape.untimed = true;
        else {
          if (ms < shape.first) shape.first = ms;
          if (ms > shape.last) shape.last = ms;
        }
      }
      if (!counting) continue;
      if (!this.#readTexts(record, shape)) {
        counting = false;
        if (!catalogue) break;
        continue;
      }
      // The stored event_time keeps whole milliseconds (toward zero), and date_trunc floors it.
      const hour = ms === null ? null : Math.floor(Math.trunc(ms) / HOUR_MS) * HOUR_MS;
      if (hour !== lastHour || trees === undefined) {
        trees = hourTrees.get(hour);
        if (trees === undefined) hourTrees.set(hour, (trees = { hourly: new Map(), distinct: new Map() }));
        lastHour = hour;
      }
      this.#countHourly(rollup!, trees.hourly, hour);
      if (this.fieldCount > 0) this.#countDistinct(rollup!, trees.distinct, hour);
    }
    texts.fill(null);
    this.values.fill(undefined);
    if (catalogue) addShapes(shapes, into);
    if (rollup !== undefined && !counting) return { fields: into, rollup: { exact: false, hourly: new Map(), distinct: new Map() } };
    return { fields: into, rollup };
  }

  /** The walk's values stay in the scratch arrays. */
  #shapeOf(root: ShapeNode, record: Record<string, unknown>, shapes: Shape[]): Shape {
    const keys = this.keys;
    const types = this.types;
    const values = this.values;
    let at = root;
    let n = 0;
    // for…in over a parsed record: its own keys in Object.keys order, without an array per record.
    for (const key in record) {
      const value = record[key];
      const type = typeCode(value);
      at = child(at, key, type);
      keys[n] = key;
      types[n] = type;
      values[n] = value;
      n++;
    }
    if (at.shape !== undefined) return at.shape;
    const shapeKeys = keys.slice(0, n);
    const picks = new Int32Array(this.heads.length);
    for (let p = 0; p < picks.length; p++) picks[p] = shapeKeys.indexOf(this.heads[p]!);
    const shape: Shape = {
      keys: shapeKeys,
      types: types.slice(0, n),
      values: values.slice(0, n),
      picks,
      records: 0,
      first: Infinity,
      last: -Infinity,
      untimed: false,
    };
    shapes.push(shape);
    at.shape = shape;
    return shape;
  }

  /** From the walk's values when the shape is known. @returns false when one is not exact. */
  #readTexts(record: unknown, shape: Shape | undefined): boolean {
    const texts = this.texts;
    for (let p = 0; p < texts.length; p++) {
      let v: string | null | typeof NOT_EXACT;
      if (shape !== undefined) {
        const at = shape.picks[p]!;
        v = textFrom(at < 0 ? undefined : this.values[at], this.rests[p]);
      } else {
        v = textAt(record, this.paths[p]!);
      }
      if (v === NOT_EXACT) return false;
      texts[p] = v;
    }
    return true;
  }

  #countHourly(rollup: RollupCounts, tree: Tree, hour: number | null): void {
    const texts = this.texts;
    const n = this.dims;
    const parent = descend(tree, texts, 0, n - 1);
    const last = n === 0 ? '' : texts[n - 1]!;
    const group = parent.get(last) as RollupGroup | undefined;
    if (group !== undefined) {
      group.records++;
      return;
    }
    const values = texts.slice(0, n);
    const created: RollupGroup = { hour, values, records: 1 };
    rollup.hourly.set(groupKey(hour, values), created);
    parent.set(last, created);
  }

  #countDistinct(rollup: RollupCounts, tree: Tree, hour: number | null): void {
    const texts = this.texts;
    const from = this.dims;
    const by = this.by;
    let leaf: (DistinctGroup | undefined)[] | undefined;
    for (let j = 0; j < this.fieldCount; j++) {
      const v = texts[from + by + j]!;
      if (v === null) continue;
      if (leaf === undefined) {
        const parent = by === 0 ? tree : descend(tree, texts, from, from + by - 1);
        const last = by === 0 ? '' : texts[from + by - 1]!;
        leaf = parent.get(last) as (DistinctGroup | undefined)[] | undefined;
        if (leaf === undefined) parent.set(last, (leaf = new Array<DistinctGroup | undefined>(this.fieldCount)));
      }
      const group = leaf[j];
      if (group !== undefined) {
        group.seen.add(v);
        continue;
      }
      const values = [...texts.slice(from, from + by), String(j)];
      const created: DistinctGroup = { hour, values, seen: new Set([v]) };
      rollup.distinct.set(groupKey(hour, values), created);
      leaf[j] = created;
    }
  }
}
