/** `record_fields_new_total{source}`: fields and JSON types a source's field catalogue gained. */
import { Counter, type Registry } from 'prom-client';

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
