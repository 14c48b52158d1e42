-- Up Migration
-- Tables derived from records, kept in the same transaction as each window: the hourly rollup
-- (records_hourly, whose dimension columns come from ROLLUP_DIMENSIONS and which the application
-- creates and rebuilds itself, see src/sync/derived.ts), the field catalogue (record_fields) and
-- the typed view over records (records_typed, recreated when the catalogue gains a field or a
-- field's type widens).

-- Settings the derived tables were built with (name → JSON): `rollup_dimensions` (the
-- ROLLUP_DIMENSIONS records_hourly was built for; a different setting rebuilds it) and
-- `typed_view` (the definition records_typed was last created with).
create table derived_settings (
  name       text        primary key,
  value      jsonb       not null,
  updated_at timestamptz not null default now()
);

-- One row per top-level field seen in a stored record's payload.
create table record_fields (
  -- The field's name (a top-level key of the payload).
  path        text        primary key,
  -- Its column in records_typed: the name itself when it is a plain lower-case identifier, else a
  -- sanitised one (eventType → event_type); unique; set in the transaction that first sees the field.
  view_column text        unique,
  -- JSON types seen, sorted: string, date-time (a string holding an ISO 8601 date-time with a
  -- zone), number, boolean, object, array, null.
  types       text[]      not null,
  -- Loaded records holding the field: a re-loaded window's rows are subtracted before its new
  -- rows are added; rows dropped from records by retention stay counted.
  records     bigint      not null,
  -- Earliest and latest event time (RECORD_TIME_FIELD, else the window start) of a record holding it.
  first_seen  timestamptz not null,
  last_seen   timestamptz not null,
  -- One value seen, as JSON text cut to 40 characters; none for names that suggest a secret
  -- (password, token, secret, key, auth, credential…). This is customers' data: grant accordingly.
  example     text,
  updated_at  timestamptz not null default now()
);

-- A text → timestamptz cast that yields null instead of failing (a string shaped like a
-- date-time that is not one, such as 2026-02-30T00:00:00Z), for records_typed.
create function records_try_timestamptz(value text) returns timestamptz
  language plpgsql stable
as $$
begin
  return value::timestamptz;
exception when others then
  return null;
end;
$$;
