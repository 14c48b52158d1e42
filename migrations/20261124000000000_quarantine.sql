-- Up Migration
-- Records E6 sent that PostgreSQL jsonb cannot store as they are: a string or key holding U+0000
-- or an unpaired UTF-16 surrogate (an escape such as \ud800), or nesting deeper than 1000 levels.
-- Each is kept here, as sent, instead of in records, so the rest of its window commits; the
-- metric analytics_exporter_sync_records_quarantined_total counts them.

create table records_quarantine (
  id           bigint generated always as identity primary key,
  -- The record's JSON text exactly as E6 sent it, in text (jsonb refuses it): U+0000 stays the six
  -- characters \u0000, and text holds no NUL byte.
  payload_text text        not null,
  -- Where in the record the problem is, JSONPath-like ($.customer.name, $.tags[2]; $ when a
  -- member overridden by a duplicate key holds it), and what it is.
  json_path    text        not null,
  reason       text        not null,
  -- The record's own event time (RECORD_TIME_FIELD); null when absent.
  event_time   timestamptz,
  -- The window the record was loaded for; re-loading a window replaces exactly these rows, as it
  -- replaces the window's records.
  window_start timestamptz not null,
  window_end   timestamptz not null,
  run_id       bigint      not null,
  loaded_at    timestamptz not null default now()
);
create index records_quarantine_window_start_idx on records_quarantine (window_start);
