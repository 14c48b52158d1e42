-- Up Migration
-- Schema changes made visible (FIELD_CONTRACT, src/sync/contract.ts). record_fields.first_seen is
-- the event time of the earliest record holding a field, which says nothing of when the catalogue
-- first saw it (a backfill of old windows finds old fields late): this table records when each
-- field, and each JSON type of a field, entered a source's catalogue after the source's first run
-- (that run's fields are the baseline, not changes), in the transaction of the window that brought it.
create table record_field_changes (
  source       text        not null,
  -- The field's name (record_fields.path) and the JSON type it gained (record_fields.types' names).
  path         text        not null,
  type         text        not null,
  -- Whether the field itself was new (else a field the catalogue held got a new type).
  new_field    boolean     not null,
  -- The window whose records brought it, and the run that loaded it (sync_runs.id).
  window_start timestamptz not null,
  window_end   timestamptz not null,
  run_id       bigint      not null,
  -- When the window committed (the transaction's time).
  seen_at      timestamptz not null default now(),
  primary key (source, path, type)
);
create index record_field_changes_seen_at_idx on record_field_changes (seen_at);

-- A text → jsonb cast that yields null instead of failing. Under SYNC_SHRINK=keep a window re-read
-- compares the records the contract quarantined before (as text) with the records it stores now
-- (jsonb), and such a text may hold what jsonb refuses (a number numeric cannot hold).
create function records_try_jsonb(value text) returns jsonb
  language plpgsql immutable
as $$
begin
  return value::jsonb;
exception when others then
  return null;
end;
$$;

-- Down Migration
drop function records_try_jsonb(text);
drop table record_field_changes;
