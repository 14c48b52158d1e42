-- Up Migration
-- `records` becomes a table partitioned by range of window_start: whole partitions can then be
-- dropped by RETENTION, and a query on a time range reads only the partitions it covers. A window
-- is stored in one partition (all its rows share window_start), even one crossing a bound.
--
-- The existing table is converted in place, in this one transaction: the rows move, ids kept,
-- into monthly partitions covering their window_start range (named records_YYYYMMDD_YYYYMMDD
-- after the range, UTC), and the identity continues after the largest id. The sync creates the
-- partitions its runs need ahead of loading them (src/sync/partitions.ts); there is no DEFAULT
-- partition, so a row outside every partition is refused rather than kept where a later
-- partition's creation would have to scan it. records_quarantine stays as it is.

alter table records rename to records_unpartitioned;
alter table records_unpartitioned rename constraint records_pkey to records_unpartitioned_pkey;
alter index records_event_time_idx rename to records_unpartitioned_event_time_idx;
alter index records_window_start_idx rename to records_unpartitioned_window_start_idx;

-- A partitioned table's primary key must include the partition key.
create table records (
  id           bigint generated always as identity,
  payload      jsonb       not null,
  -- The record's own event time, read from the field named by RECORD_TIME_FIELD; null when absent.
  event_time   timestamptz,
  -- The window the record was loaded for (the partition key); re-loading a window replaces
  -- exactly these rows.
  window_start timestamptz not null,
  window_end   timestamptz not null,
  loaded_at    timestamptz not null default now(),
  run_id       bigint      not null,
  primary key (id, window_start)
) partition by range (window_start);
create index records_event_time_idx on records (event_time);
create index records_window_start_idx on records (window_start);

-- Monthly partitions (UTC) from the month of the oldest window_start to that of the newest.
do $$
declare
  first_month timestamp;
  last_month  timestamp;
  lo          timestamp;
begin
  select date_trunc('month', min(window_start) at time zone 'UTC'), date_trunc('month', max(window_start) at time zone 'UTC')
    into first_month, last_month
    from records_unpartitioned;
  if first_month is null then
    return;
  end if;
  lo := first_month;
  while lo <= last_month loop
    execute format(
      'create table %I partition of records for values from (%L) to (%L)',
      'records_' || to_char(lo, 'YYYYMMDD') || '_' || to_char(lo + interval '1 month', 'YYYYMMDD'),
      to_char(lo, 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
      to_char(lo + interval '1 month', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
    );
    lo := lo + interval '1 month';
  end loop;
end
$$;

insert into records (id, payload, event_time, window_start, window_end, loaded_at, run_id)
  overriding system value
  select id, payload, event_time, window_start, window_end, loaded_at, run_id from records_unpartitioned;

select setval(pg_get_serial_sequence('records', 'id'), coalesce(max(id), 0) + 1, false) from records;

drop table records_unpartitioned;

-- A window whose partition RETENTION dropped: its records are gone on purpose, and a run's
-- planning and lookback skip it; an explicit `sync --from` reloads it (and clears the mark).
alter table sync_windows add column expired_at timestamptz;
