/**
 * `record_fields_new_total{source}`: fields and JSON types a source's field catalogue gained;
 * `record_fields{source,typed_view}`: the catalogue's fields by their place in records_typed.
 */
import { Counter, Gauge, type Registry } from 'prom-client';
import type { FieldPlaces } from '../sync/store/ports.js';

/** `typed_view` label values. */
const PLACES: readonly { label: string; key: keyof FieldPlaces }[] = [
  { label: 'column', key: 'column' },
  { label: 'left_out', key: 'leftOut' },
  { label: 'none', key: 'none' },
];

export function recordFieldsNewCounter(registry: Registry, prefix: string): Counter<'source'> {
  return new Counter({
    name: `${prefix}record_fields_new_total`,
    help:
      "Top-level record fields, and JSON types of a field, seen for the first time in the source's records after its first run " +
      '(each once, when the field catalogue record_fields gains it; listed in record_field_changes). FIELD_CONTRACT=freeze quarantines ' +
      'the records bringing one instead (sync_records_quarantined_total), so it is counted only once they are loaded.',
    labelNames: ['source'] as const,
    registers: [registry],
  });
}

export function recordFieldsGauge(registry: Registry, prefix: string): Gauge<'source' | 'typed_view'> {
  return new Gauge({
    name: `${prefix}record_fields`,
    help:
      "Top-level record fields in the source's field catalogue record_fields at the end of its last run, by typed_view: column (a column of records_typed), " +
      'left_out (a scalar field records_typed has no column of: beyond TYPED_VIEW_MAX_FIELDS, the fields most records carry, or the view not recreated; in record_fields and payload), ' +
      'none (seen only as objects or arrays).',
    labelNames: ['source', 'typed_view'] as const,
    registers: [registry],
  });
}

/** Each `typed_view` series of `source`. */
export function setRecordFields(gauge: Gauge<'source' | 'typed_view'>, source: string, places: FieldPlaces): void {
  for (const { label, key } of PLACES) gauge.set({ source, typed_view: label }, places[key]);
}
