-- Up Migration
-- A smaller footprint on disk (issue 27, BENCHMARKS.md "15. Bytes per record"). Measured on the ETL
-- benchmark's data set (1,000,000 records, 25 one-day windows), per record:
--
-- * the primary key index on (id, window_start), 31.5 bytes: nothing looks a record up by id (a
--   window's records are replaced and counted by (source, window_start), RETENTION drops whole
--   partitions, the dashboards read records by event_time). `id` stays, an identity column
--   (generated always, so still unique without an index): records_typed shows it and the Recent
--   records panel orders ties of event_time by it.
-- * window_end and loaded_at, 16 bytes: both are the window's, and sync_windows holds them once per
--   window. A window's records are stored in the transaction that writes its ledger row (keyed by
--   source and window_start), with the same window_end and the same now() as loaded_at; the
--   records a re-load keeps (SYNC_SHRINK=keep) are stored again in that transaction too.
--   records_typed and the Recent records panel take both from sync_windows.
-- * 3.4 bytes of alignment padding: the fixed-width columns now come first and the variable-length
--   ones (source, payload) last, so no 8-byte column waits for the end of a payload.
--
-- The table is rebuilt in this one transaction, as 20261125000000000_partitions did: the rows move,
-- ids kept, into partitions of the same names and bounds, and the identity continues after the
-- largest id. Privileges granted on records are granted again on the new table. records_typed
-- (created by the application) depends on records: when it exists it is replaced by a view of the
-- base columns alone, and derived_settings forgets its definition, so that the next sync creates
-- it again with the catalogue's columns.

do $$
declare
  typed_view boolean := to_regclass('records_typed') is not null;
  part record;
  idx record;
  acl record;
begin
  if typed_view then
    drop view records_typed;
    delete from derived_settings where name = 'typed_view';
  end if;

  alter table records rename to records_previous;
  alter index records_event_time_idx rename to records_previous_event_time_idx;
  alter index records_source_window_start_idx rename to records_previous_source_window_start_idx;
  alter table records_previous drop constraint records_pkey;

  create table records (
    id           bigint      generated always as identity,
    -- The record's own event time, read from the field named by RECORD_TIME_FIELD; null when absent.
    event_time   timestamptz,
    -- The window the record was loaded for (the partition key; its end and load time are in
    -- sync_windows); re-loading a window replaces exactly these rows.
    window_start timestamptz not null,
    run_id       bigint      not null,
    source       text        not null,
    payload      jsonb       not null
  ) partition by range (window_start);
  create index records_event_time_idx on records (event_time);
  create index records_source_window_start_idx on records (source, window_start);

  -- The partitions again, under their names and bounds (src/sync/partitions.ts names them); the
  -- old ones' indexes are renamed first so that the new ones take the usual names.
  for part in
    select c.oid, c.relname, pg_get_expr(c.relpartbound, c.oid) as bound
      from pg_inherits i join pg_class c on c.oid = i.inhrelid
     where i.inhparent = 'records_previous'::regclass
     order by c.relname
  loop
    for idx in select i.indexrelid::regclass::text as name, i.indexrelid as oid from pg_index i where i.indrelid = part.oid loop
      execute format('alter index %s rename to %I', idx.name, 'records_previous_index_' || idx.oid);
    end loop;
    execute format('alter table %I rename to %I', part.relname, 'records_previous_' || part.oid);
    execute format('create table %I partition of records %s', part.relname, part.bound);
  end loop;

  insert into records (id, event_time, window_start, run_id, source, payload)
    overriding system value
    select id, event_time, window_start, run_id, source, payload from records_previous;
  perform setval(pg_get_serial_sequence('records', 'id'), coalesce(max(id), 0) + 1, false) from records;

  for acl in
    select a.privilege_type, a.grantee
      from pg_class c cross join lateral aclexplode(c.relacl) a
     where c.oid = 'records_previous'::regclass and a.grantee <> c.relowner
  loop
    execute format('grant %s on records to %s', acl.privilege_type, case when acl.grantee = 0 then 'public' else quote_ident(pg_get_userbyid(acl.grantee)) end);
  end loop;

  drop table records_previous;

  if typed_view then
    create view records_typed as
      select r.id, r.source, r.event_time, r.window_start, w.window_end, r.run_id, w.loaded_at
        from records r left join sync_windows w on w.source = r.source and w.window_start = r.window_start;
  end if;
end
$$;

-- Down Migration
-- The previous shape, window_end and loaded_at taken from sync_windows (a record whose window has no
-- ledger row gets its window_start as end and now() as load time), the primary key again, and
-- records_typed, when it exists, of the base columns until the next sync recreates it.
do $$
declare
  typed_view boolean := to_regclass('records_typed') is not null;
begin
  if typed_view then
    drop view records_typed;
    delete from derived_settings where name = 'typed_view';
  end if;
  alter table records add column window_end timestamptz;
  alter table records add column loaded_at timestamptz not null default now();
  update records r
     set window_end = coalesce(w.window_end, r.window_start), loaded_at = coalesce(w.loaded_at, now())
    from sync_windows w
   where w.source = r.source and w.window_start = r.window_start;
  update records set window_end = window_start where window_end is null;
  alter table records alter column window_end set not null;
  alter table records add primary key (id, window_start);
  if typed_view then
    create view records_typed as select id, source, event_time, window_start, window_end, run_id, loaded_at from records;
  end if;
end
$$;
