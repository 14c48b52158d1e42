/**
 * `analytics_exporter_record_fields_new_total{source}` (issue 26 item 5): its own module, so the
 * sync metrics (sync.ts) only register it and count the sync's `fieldsChanged` events into it.
 */
import { Counter, type Registry } from 'prom-client';

/** The counter of fields and JSON types a source's field catalogue gained, on `registry`; `prefix` is the exporter's. */
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
