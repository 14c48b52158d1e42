-- Up Migration
-- PostgreSQL's share of a load (issue 40, item 3; docs/design/storage.md): run_id goes from records.
-- Every record of a window is stored in the transaction that writes the window's ledger row
-- (sync_windows, keyed by source and window_start), by the run that row names, and the records a
-- re-load keeps (SYNC_SHRINK=keep) are stored again by that run too, as window_end and loaded_at
-- went in 20261129000000000_footprint. records_typed and the Recent records panel take it from
-- sync_windows. records_quarantine keeps its own. The indexes stay as they are: BRIN on
-- (source, window_start) was measured and costs a sync more than the B-tree (docs/design/storage.md).
--
-- In place, in this one transaction: ALTER TABLE keeps the owner, every grant (those on run_id go
-- with the column), the partitions and the publications. records_typed (created by the
-- application) reads r.run_id: it is replaced (CREATE OR REPLACE, so its owner and grants stay) by
-- the same definition reading w.run_id, the window's ledger row it already joins, and
-- derived_settings' copy of the definition says so too (the next sync then finds it current). A
-- publication whose column list names run_id names the relation again without it (its row filter
-- kept); one whose row filter reads run_id, or another object depending on the column (a view of
-- one's own), fails the migration naming it, rather than lose it.
do $$
declare
  def text;
  pub record;
  deps text;
begin
  if to_regclass('records_typed') is not null then
    def := pg_get_viewdef('records_typed'::regclass);
    if def ~ '\mr\.run_id\M' then
      execute 'create or replace view records_typed as ' || regexp_replace(def, '\mr\.run_id\M', 'w.run_id', 'g');
    end if;
    update derived_settings set value = to_jsonb(replace(value #>> '{}', 'r.run_id', 'w.run_id')) where name = 'typed_view';
  end if;

  -- Column lists exist from PostgreSQL 15.
  if current_setting('server_version_num')::int >= 150000 then
    for pub in execute $sql$
      select p.pubname, pr.prrelid::regclass as rel,
             (select string_agg(quote_ident(a.attname), ', ' order by a.attnum) from pg_attribute a
               where a.attrelid = pr.prrelid and a.attnum = any (pr.prattrs::int2[]) and a.attname <> 'run_id') as cols,
             coalesce(' where (' || pg_get_expr(pr.prqual, pr.prrelid) || ')', '') as filter
        from pg_publication_rel pr join pg_publication p on p.oid = pr.prpubid
       where pr.prattrs is not null
         and pr.prrelid in (select 'records'::regclass union all select inhrelid from pg_inherits where inhparent = 'records'::regclass)
         and exists (select from pg_attribute a where a.attrelid = pr.prrelid and a.attname = 'run_id' and a.attnum = any (pr.prattrs::int2[]))
       order by 1, 2$sql$
    loop
      begin
        if pub.cols is null then
          raise exception 'its column list names only run_id';
        end if;
        execute format('alter publication %I drop table %s', pub.pubname, pub.rel);
        execute format('alter publication %I add table %s (%s)%s', pub.pubname, pub.rel, pub.cols, pub.filter);
      exception when others then
        raise exception 'publication % cannot name % without run_id: %', pub.pubname, pub.rel, sqlerrm
          using hint = 'run the migration as the publication''s owner (or a superuser), or change the publication (alter publication … drop table) and add the table again after it';
      end;
    end loop;
  end if;

  -- What else reads run_id (a view of one's own): named, rather than the bare "other objects depend on it".
  select string_agg(distinct pg_describe_object(d.classid, d.objid, d.objsubid), ', ') into deps
    from pg_depend d join pg_attribute a on a.attrelid = d.refobjid and a.attnum = d.refobjsubid
   where d.refclassid = 'pg_class'::regclass and a.attname = 'run_id' and d.deptype = 'n'
     and d.refobjid in (select 'records'::regclass union all select inhrelid from pg_inherits where inhparent = 'records'::regclass);
  if deps is not null then
    raise exception 'records.run_id cannot be dropped: % depends on it', deps
      using hint = 'read run_id from sync_windows (by source and window_start) there, or drop it and create it again after the migration';
  end if;
end
$$;

alter table records drop column run_id;

-- Down Migration
-- The previous shape: run_id again, each record's from its window's ledger row (0 for a record
-- whose window has none). In place, so the owner, the
-- grants and the publications stay (column lists as they are now: a list that named run_id does
-- not name it again). records_typed reads w.run_id, which the previous release also fills, and
-- keeps its owner and grants; derived_settings forgets its definition, so that the previous
-- release's next sync creates it again as that release defines it.
alter table records add column run_id bigint not null default 0;
update records r set run_id = w.run_id from sync_windows w where w.source = r.source and w.window_start = r.window_start;
alter table records alter column run_id drop default;
delete from derived_settings where name = 'typed_view';
