/**
 * Schema changes of a source's records, judged against its field catalogue (record_fields) as it
 * stood before a window: the top-level fields, and the JSON types of a field, that the window
 * brings for the first time (reported), and under FIELD_CONTRACT=freeze the records that bring
 * such a change (quarantined). The terms are dlt's `schema_contract`: `evolve` takes every change;
 * `freeze` takes none, a record that would change the schema being quarantined (dlt's own
 * `freeze` fails the load instead; its `discard_row` drops the record, which here is kept aside).
 * Pure functions over plain maps: src/sync/run/field-contract.ts applies them in a run.
 */
import { jsonType, type FieldChange, type KnownFields, type WindowFields } from './catalogue.js';

export type { FieldChange, KnownFields } from './catalogue.js';

/** Breaches listed by name in one quarantine reason; the rest are counted. */
const REASON_MAX_BREACHES = 3;
/** Longest field name quoted in a reason or a path, in characters (a longer one is cut with an ellipsis). */
const NAME_MAX_CHARS = 80;
const PLAIN_KEY = /^[A-Za-z_$][\w$]*$/;

/**
 * The fields and types of `fields` (a window's, after its refused records are taken out) that
 * `known` does not hold: what the catalogue gains at the window's commit. Sorted by field name,
 * then type, so logs and tests read in a stable order.
 */
export function fieldChanges(known: KnownFields, fields: WindowFields): FieldChange[] {
  const changes: FieldChange[] = [];
  for (const [path, stats] of fields) {
    const types = known.get(path);
    for (const type of stats.types) if (types === undefined || !types.has(type)) changes.push({ path, type, newField: types === undefined });
  }
  return changes.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : a.type < b.type ? -1 : a.type > b.type ? 1 : 0));
}

/** Adds `fields`' names and types to `known` (after the window holding them committed). */
export function learnFields(known: KnownFields, fields: WindowFields): void {
  for (const [path, stats] of fields) {
    const types = known.get(path);
    if (types === undefined) known.set(path, new Set(stats.types));
    else for (const type of stats.types) types.add(type);
  }
}

/**
 * Whether a value of JSON type `type` in a field whose known types are `types` (undefined: a field
 * the catalogue does not hold) changes the schema under `freeze`. As in dlt, `null` never does (a
 * null value makes no column and no new column type), and a date-time string in a field that holds
 * strings is a string (its records_typed column stays text); any other type not seen does.
 */
export function breaksFreeze(types: ReadonlySet<string> | undefined, type: string): boolean {
  if (type === 'null') return false;
  if (types === undefined) return true;
  return !types.has(type) && !(type === 'date-time' && types.has('string'));
}

/**
 * Whether some record counted into `fields` (a page's, see catalogueRecords) may break `freeze`
 * against `known`: the cheap test on a page's totals that spares most pages the record-by-record
 * {@link recordBreaches}. False means no record of the page does.
 */
export function mayBreakFreeze(known: KnownFields, fields: WindowFields): boolean {
  for (const [path, stats] of fields) {
    const types = known.get(path);
    for (const type of stats.types) if (breaksFreeze(types, type)) return true;
  }
  return false;
}

/**
 * The changes one parsed record (an element of E6 `data`) brings that `freeze` refuses against
 * `known`: each top-level field the catalogue does not hold, or whose value's type it does not hold
 * for it ({@link breaksFreeze}). Empty for a record that is no object (the catalogue reads none).
 */
export function recordBreaches(known: KnownFields, record: unknown): FieldChange[] {
  if (typeof record !== 'object' || record === null || Array.isArray(record)) return [];
  const breaches: FieldChange[] = [];
  for (const key of Object.keys(record)) {
    const types = known.get(key);
    const type = jsonType((record as Record<string, unknown>)[key], types);
    if (breaksFreeze(types, type)) breaches.push({ path: key, type, newField: types === undefined });
  }
  return breaches;
}

/** A field name cut to {@link NAME_MAX_CHARS} (between code points), for messages. */
function shortName(name: string): string {
  if (name.length <= NAME_MAX_CHARS) return name;
  return `${name.slice(0, NAME_MAX_CHARS - 1).replace(/[\ud800-\udbff]$/, '')}…`;
}

/** The JSONPath-like location of a top-level field (`$.amount`, `$["order id"]`), as records_quarantine.json_path holds it. */
export function fieldJsonPath(name: string): string {
  const short = shortName(name);
  return PLAIN_KEY.test(short) ? `$.${short}` : `$[${JSON.stringify(short)}]`;
}

/** One change in words: `new field "amount" (number)` or `new type string of field "amount"`. */
export function describeChange(change: FieldChange): string {
  const name = JSON.stringify(shortName(change.path));
  return change.newField ? `new field ${name} (${change.type})` : `new type ${change.type} of field ${name}`;
}

/**
 * records_quarantine.reason of a record the contract refused: `contract: ` and the changes it
 * brings (at most {@link REASON_MAX_BREACHES} named, the rest counted), naming the setting.
 *
 * @param breaches at least one, as {@link recordBreaches} gives them.
 */
export function contractReason(breaches: readonly FieldChange[]): string {
  const named = breaches.slice(0, REASON_MAX_BREACHES).map(describeChange).join(', ');
  const more = breaches.length > REASON_MAX_BREACHES ? ` and ${breaches.length - REASON_MAX_BREACHES} more` : '';
  return `contract: ${named}${more}, not in the field catalogue record_fields before the window (FIELD_CONTRACT=freeze)`;
}

/** The prefix of every records_quarantine.reason the contract wrote (SQL finds those rows with `like 'contract:%'`). */
export const CONTRACT_REASON_PREFIX = 'contract:';
