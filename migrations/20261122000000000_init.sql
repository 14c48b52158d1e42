-- Up Migration
-- Tables of the ETL, created in the schema named by DATABASE_SCHEMA (the runner sets search_path).
--
-- Glossary: a *window* is a time range [window_start, window_end) read from E6 as one unit and
-- committed in one transaction; the *watermark* is the end of the contiguous loaded range.

-- Every analytics record exactly as the API delivered it, one row per record (identical records
-- the API returns twice are two rows: the API gives records no id).
create table records (
  id           bigint generated always as identity primary key,
  payload      jsonb       not null,
  -- The record's own event time, read from the field named by RECORD_TIME_FIELD; null when absent.
  event_time   timestamptz,
  -- The window the record was loaded for; re-loading a window replaces exactly these rows.
  window_start timestamptz not null,
  window_end   timestamptz not null,
  loaded_at    timestamptz not null default now(),
  run_id       bigint      not null
);
create index records_event_time_idx on records (event_time);
create index records_window_start_idx on records (window_start);

-- One row per committed window: what is loaded, so a re-run replaces it exactly.
create table sync_windows (
  window_start   timestamptz primary key,
  window_end     timestamptz not null check (window_end > window_start),
  -- Records stored for the window, and what the API reported for it (they differ only by
  -- records at or after window_end, left to the next window).
  record_count   bigint      not null,
  total_records  bigint      not null,
  pages          integer     not null,
  loaded_at      timestamptz not null default now(),
  run_id         bigint      not null
);
create index sync_windows_end_idx on sync_windows (window_end);

-- One row per run of `sync` (or of the schedule inside `serve`).
create table sync_runs (
  id            bigint generated always as identity primary key,
  started_at    timestamptz not null default now(),
  finished_at   timestamptz,
  status        text        not null default 'running'
                check (status in ('running', 'succeeded', 'failed', 'interrupted', 'abandoned')),
  range_start   timestamptz not null,
  range_end     timestamptz not null,
  windows       integer     not null default 0,
  pages         integer     not null default 0,
  records       bigint      not null default 0,
  error         text
);
create index sync_runs_started_at_idx on sync_runs (started_at);

-- The sync state: a single row holding the watermark.
create table sync_state (
  singleton  boolean     primary key default true check (singleton),
  watermark  timestamptz,
  updated_at timestamptz not null default now()
);
insert into sync_state (singleton, watermark) values (true, null);
