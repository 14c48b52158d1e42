-- Up Migration
-- A smaller footprint on disk (issue 27, BENCHMARKS.md "Bytes per record"): `records` loses its
-- primary key index on (id, window_start), about 31.5 bytes a record of the ETL benchmark's data
-- (8 % of everything the schema stores). Nothing looks a record up by id: a window's records are
-- replaced and counted by (source, window_start) (records_source_window_start_idx), RETENTION drops
-- whole partitions, and the dashboards read records by event_time (records_event_time_idx). `id`
-- stays, an identity column (generated always, so still unique without the index): records_typed
-- shows it and the Recent records panel orders ties of event_time by it.
--
-- Dropping the constraint drops the index of every partition with it, and partitions created later
-- get none. No row is rewritten.

alter table records drop constraint records_pkey;

-- Down Migration
alter table records add primary key (id, window_start);
