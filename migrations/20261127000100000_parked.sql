-- Up Migration
-- Parked windows. A window that cannot be loaded for a reason of its own (a response over
-- UPSTREAM_MAX_BODY even at one instant and one record a page, E6 contradicting itself about it
-- after SYNC_WINDOW_ATTEMPTS) is kept in the ledger as `parked` with that reason, instead of failing
-- every run at the same window: the watermark passes it and the source goes on. Its records (none,
-- or what an earlier load stored) stay as they were. A later load of the window (the lookback,
-- `sync --from/--to` over it, the audit) replaces the row with a committed one.
alter table sync_windows
  add column status text not null default 'committed' check (status in ('committed', 'parked')),
  -- Why the window is parked: the error's text, sanitised (no NUL, valid UTF-8, bounded).
  add column reason text,
  -- When it was last parked.
  add column parked_at timestamptz,
  add constraint sync_windows_parked_reason check ((status = 'parked') = (reason is not null));
create index sync_windows_parked_idx on sync_windows (source, window_start) where status = 'parked';
