/**
 * Schema changes of a source's records against its catalogue as it stood before a window: the
 * fields and types a window brings first (reported), and under FIELD_CONTRACT=freeze the records
 * bringing one (quarantined). Pure; run/field-contract.ts applies them. Design:
 * docs/design/derived-tables.md.
 */
import { jsonType, type FieldChange, type KnownFields, type WindowFields } from './catalogue.js';

export type { FieldChange, KnownFields } from './catalogue.js';

/** Named in one quarantine reason; the rest are counted. */
const REASON_MAX_BREACHES = 3;
/** Characters; a longer name is cut with an ellipsis. */
const NAME_MAX_CHARS = 80;
const PLAIN_KEY = /^[A-Za-z_$][\w$]*$/;

/** What the catalogue gains with a window, sorted by field name then type. */
export function fieldChanges(known: KnownFields, fields: WindowFields): FieldChange[] {
  const changes: FieldChange[] = [];
  for (const [path, stats] of fields) {
    const types = known.get(path);
    for (const type of stats.types) if (types === undefined || !types.has(type)) changes.push({ path, type, newField: types === undefined });
  }
  return changes.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : a.type < b.type ? -1 : a.type > b.type ? 1 : 0));
}

export function learnFields(known: KnownFields, fields: WindowFields): void {
  for (const [path, stats] of fields) {
    const types = known.get(path);
    if (types === undefined) known.set(path, new Set(stats.types));
    else for (const type of stats.types) types.add(type);
  }
}

/** As in dlt, `null` never does, and a date-time string in a field holding strings is a string. `types` undefined: a new field. */
export function breaksFreeze(types: ReadonlySet<string> | undefined, type: string): boolean {
  if (type === 'null') return false;
  if (types === undefined) return true;
  return !types.has(type) && !(type === 'date-time' && types.has('string'));
}

/** The cheap test on a page's totals; false means no record of the page breaks `freeze`. */
export function mayBreakFreeze(known: KnownFields, fields: WindowFields): boolean {
  for (const [path, stats] of fields) {
    const types = known.get(path);
    for (const type of stats.types) if (breaksFreeze(types, type)) return true;
  }
  return false;
}

/** What `freeze` refuses of one parsed record; empty for a record that is no object. */
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

function shortName(name: string): string {
  if (name.length <= NAME_MAX_CHARS) return name;
  return `${name.slice(0, NAME_MAX_CHARS - 1).replace(/[\ud800-\udbff]$/, '')}…`;
}

/** `$.amount`, `$["order id"]`: records_quarantine.json_path. */
export function fieldJsonPath(name: string): string {
  const short = shortName(name);
  return PLAIN_KEY.test(short) ? `$.${short}` : `$[${JSON.stringify(short)}]`;
}

/** `new field "amount" (number)` or `new type string of field "amount"`. */
export function describeChange(change: FieldChange): string {
  const name = JSON.stringify(shortName(change.path));
  return change.newField ? `new field ${name} (${change.type})` : `new type ${change.type} of field ${name}`;
}

/** records_quarantine.reason of a record the contract refused. @param breaches at least one. */
export function contractReason(breaches: readonly FieldChange[]): string {
  const named = breaches.slice(0, REASON_MAX_BREACHES).map(describeChange).join(', ');
  const more = breaches.length > REASON_MAX_BREACHES ? ` and ${breaches.length - REASON_MAX_BREACHES} more` : '';
  return `contract: ${named}${more}, not in the field catalogue record_fields before the window (FIELD_CONTRACT=freeze)`;
}

/** SQL finds the contract's rows with `like 'contract:%'`. */
export const CONTRACT_REASON_PREFIX = 'contract:';
