-- Up Migration
-- records_quarantine also keeps the records PostgreSQL itself refused for a data reason while a
-- window was loaded (SQLSTATE class 22 data exception, 23 integrity constraint, 54 program limit,
-- P0 raised by PL/pgSQL: src/db/refusal.ts), whatever the reason: a number numeric cannot hold
-- (1e200000), a CHECK constraint added to records, nesting deeper than the server's stack. Such a
-- row has the SQLSTATE and the database's message (sanitised) instead of a JSONPath and a reason,
-- which stay for the records the sync finds unstorable itself before sending them.

alter table records_quarantine add column sqlstate text;
alter table records_quarantine add column message text;
alter table records_quarantine alter column json_path drop not null;
alter table records_quarantine alter column reason drop not null;
alter table records_quarantine add constraint records_quarantine_why_check check (reason is not null or sqlstate is not null);

-- Down Migration
update records_quarantine
   set json_path = coalesce(json_path, '$'),
       reason = coalesce(reason, 'refused by PostgreSQL: ' || sqlstate || ' ' || coalesce(message, ''));
alter table records_quarantine drop constraint records_quarantine_why_check;
alter table records_quarantine alter column reason set not null;
alter table records_quarantine alter column json_path set not null;
alter table records_quarantine drop column message;
alter table records_quarantine drop column sqlstate;
