-- Up Migration
-- Several sources (an upstream environment and API client each) load into the same tables: every
-- per-source table gets `source text not null`, the source's name (`default` for the one source
-- the environment describes). Rows already there were loaded by that source: they become
-- `default`. Keys and indexes used to look rows up per source lead with `source`.
--
-- Each column is added with the default 'default' (a constant default fills existing rows without
-- rewriting the table) and the default is then dropped: every insert names its source, so a row
-- can never land in the wrong source unnoticed. One block per table; a new per-source table is one
-- more block of the same shape.
--
-- Partitions of `records` stay by time and are shared by every source.

-- records (partitioned: the column and the index reach every partition).
alter table records add column source text not null default 'default';
alter table records alter column source drop default;
drop index records_window_start_idx;
create index records_source_window_start_idx on records (source, window_start);

-- records_quarantine
alter table records_quarantine add column source text not null default 'default';
alter table records_quarantine alter column source drop default;
drop index records_quarantine_window_start_idx;
create index records_quarantine_source_window_start_idx on records_quarantine (source, window_start);

-- sync_windows: committed windows never overlap within a source; sources' windows are independent.
alter table sync_windows add column source text not null default 'default';
alter table sync_windows alter column source drop default;
alter table sync_windows drop constraint sync_windows_pkey;
alter table sync_windows add primary key (source, window_start);
drop index sync_windows_end_idx;
create index sync_windows_source_end_idx on sync_windows (source, window_end);

-- sync_runs
alter table sync_runs add column source text not null default 'default';
alter table sync_runs alter column source drop default;
create index sync_runs_source_started_at_idx on sync_runs (source, started_at);

-- sync_state: one row per source (created by the source's first run) instead of the singleton.
alter table sync_state add column source text not null default 'default';
alter table sync_state alter column source drop default;
alter table sync_state drop constraint sync_state_pkey;
alter table sync_state drop column singleton;
alter table sync_state add primary key (source);
-- The first migration's row of a database that never committed a window: no source has run, and a
-- `default` row would show a source that may not be configured at all (dashboards list sync_state's sources).
delete from sync_state where watermark is null;

-- record_fields: the catalogue per source. records_typed keeps one column per field name for all
-- sources (the application names it once and gives every source's row of the field the same one),
-- so view_column is no longer unique by itself.
alter table record_fields add column source text not null default 'default';
alter table record_fields alter column source drop default;
alter table record_fields drop constraint record_fields_pkey;
alter table record_fields drop constraint record_fields_view_column_key;
alter table record_fields add primary key (source, path);

-- records_hourly: created and rebuilt by the application for ROLLUP_DIMENSIONS (src/sync/derived.ts),
-- so it may not exist yet. When it does, it is converted in place rather than rebuilt from records:
-- RETENTION drops records and keeps their buckets, which a rebuild would lose. Its unique key gets
-- `source` first, and derived_settings records the new shape (3) so the application does not
-- rebuild it.
do $$
declare
  key_name text;
  key_def  text;
begin
  if to_regclass('records_hourly') is null then
    return;
  end if;
  alter table records_hourly add column source text not null default 'default';
  alter table records_hourly alter column source drop default;
  select i.indexrelid::regclass::text, pg_get_indexdef(i.indexrelid)
    into key_name, key_def
    from pg_index i
   where i.indrelid = 'records_hourly'::regclass and i.indisunique;
  if key_name is not null then
    execute format('drop index %s', key_name);
    execute regexp_replace(key_def, 'USING btree \(', 'USING btree (source, ');
  end if;
  update derived_settings
     set value = jsonb_set(value, '{shape}', '3'), updated_at = now()
   where name = 'rollup_dimensions' and value ->> 'shape' = '2';
end
$$;
