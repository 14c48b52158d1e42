-- Up Migration
-- What the `state` commands read and write besides the ledger and the watermark.
--
-- sync_windows.reload_requested_at: `state reset` marked the window for re-load. The next resumed
-- run of the source (`sync` without --from, a scheduled tick) loads it again wherever it lies,
-- besides the windows it plans from the watermark; that load replaces its row (the mark goes with
-- it), and parking it again clears the mark. Its records stay until then.
alter table sync_windows add column reload_requested_at timestamptz;
create index sync_windows_reload_idx on sync_windows (source, window_start) where reload_requested_at is not null;

-- sync_state.verified_through, verified_at: the last audit's (`verify`, AUDIT_SCHEDULE) end of the
-- latest audited window with no difference left in it or before it (null when none), and when that
-- audit ended. The gauge analytics_exporter_sync_verified_through_timestamp_seconds shows the same.
alter table sync_state add column verified_through timestamptz;
alter table sync_state add column verified_at timestamptz;

-- Down Migration
alter table sync_state drop column verified_at;
alter table sync_state drop column verified_through;
drop index sync_windows_reload_idx;
alter table sync_windows drop column reload_requested_at;
