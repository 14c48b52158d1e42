-- Up Migration
-- Short windows (issue 39): E6's totalRecords claimed more records than it served, identically on
-- every read. The records served are stored (never held back because the count disagrees), and the
-- window's ledger row says so: what E6 claimed and what it served (its count, less the boundary sets
-- left to the slice before, as total_records). Both null for a window E6 served whole.
alter table sync_windows
  add column short_claimed bigint,
  add column short_served  bigint;

-- Down Migration
alter table sync_windows
  drop column short_claimed,
  drop column short_served;
