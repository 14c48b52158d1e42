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
-- ids kept, into partitions of the same names and bounds. The identity continues where the old
-- one's sequence was (its last value, or the largest id if above it), not after the largest id
-- stored: ids whose rows were deleted (a window re-read empty, a partition RETENTION dropped) are
-- never given again, so a consumer that keeps records by id or reads them past a last-seen id (a
-- warehouse, a subscription publishing inserts only) never sees one id name two records. The
-- records table and each partition keep their owner and exactly their privileges: every grant
-- (WITH GRANT OPTION kept, by its grantor when the migrating role may act as it, else by the
-- owner), column grants on the columns kept (those on window_end and loaded_at go with the
-- columns), and what default privileges would have added to the new tables but the old ones did
-- not hold is revoked. records_typed
-- (created by the application) depends on records: when it exists it is replaced by a view of the
-- base columns alone, which keeps its owner and privileges the same way (on the columns it keeps),
-- and derived_settings forgets its definition, so that the next sync creates it again with the
-- catalogue's columns (src/sync/derived/typed-view.ts keeps them then too).
--
-- Logical replication: each publication that named records or a partition (pg_publication_rel)
-- names the new relation again, with its column list (but window_end and loaded_at) and its row
-- filter; a publication FOR ALL TABLES or FOR TABLES IN SCHEMA takes the new relations by itself.
-- The old relations' replica identity was their primary key (or FULL, as docs/deploy.md asks):
-- the new ones, without a primary key, get REPLICA IDENTITY FULL when the old one had it, or when a
-- publication that publishes updates or deletes covers them (else the sync's deletes would fail);
-- such a publication with a column list (which FULL would not fit) fails the migration.
-- A publication the migrating role may not alter (not its owner) fails the migration, naming it,
-- rather than lose records from it.

-- A relation's grants but its owner's own, one row per privilege: table-wide (col null) and on
-- each column (pg_attribute.attacl). A temporary function, dropped again below.
create function pg_temp.footprint_acl(rel oid)
  returns table (col name, grantor oid, grantee oid, privilege_type text, is_grantable boolean)
  language sql stable
as $$
  select null::name, a.grantor, a.grantee, a.privilege_type, a.is_grantable
    from pg_class c cross join lateral aclexplode(c.relacl) a
   where c.oid = rel and a.grantee <> c.relowner
  union all
  select t.attname, a.grantor, a.grantee, a.privilege_type, a.is_grantable
    from pg_class c join pg_attribute t on t.attrelid = c.oid cross join lateral aclexplode(t.attacl) a
   where c.oid = rel and t.attnum > 0 and not t.attisdropped and a.grantee <> c.relowner
$$;

do $$
declare
  typed_view boolean := to_regclass('records_typed') is not null;
  -- The view's old relation, kept until its owner and grants have moved over.
  old_view oid := to_regclass('records_typed');
  part record;
  pub record;
  -- What follows `add table <relation>` for one publication: column list and row filter.
  clause text;
  idx record;
  acl record;
  -- (old relation, new relation): records and each partition, whose owner and grants move over.
  olds oid[] := array['records'::regclass::oid];
  news oid[];
  -- The old identity's sequence: where the new one continues.
  old_seq text := pg_get_serial_sequence('records', 'id');
  seq_last bigint;
  seq_called boolean;
  next_id bigint;
  -- The role the migration runs as, restored after granting as another grantor.
  own_role text := current_setting('role');
  -- The grants of the relation being copied already given (col, grantor, grantee, privilege).
  attempted text[];
  i int;
begin
  execute format('select last_value, is_called from %s', old_seq) into seq_last, seq_called;

  if typed_view then
    alter view records_typed rename to records_typed_previous;
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
  news := array['records'::regclass::oid];

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
    olds := olds || part.oid;
    news := news || to_regclass(quote_ident(part.relname))::oid;
  end loop;

  insert into records (id, event_time, window_start, run_id, source, payload)
    overriding system value
    select id, event_time, window_start, run_id, source, payload from records_previous;
  -- The next id the old identity would have given, or after the largest id when one was stored
  -- above it (inserted overriding the identity).
  select greatest(case when seq_called then seq_last + 1 else seq_last end, coalesce(max(id), 0) + 1) into next_id from records;
  perform setval(pg_get_serial_sequence('records', 'id'), next_id, false);

  if typed_view then
    create view records_typed as
      select r.id, r.source, r.event_time, r.window_start, w.window_end, r.run_id, w.loaded_at
        from records r left join sync_windows w on w.source = r.source and w.window_start = r.window_start;
    olds := olds || old_view;
    news := news || 'records_typed'::regclass::oid;
  end if;

  for i in 1 .. array_length(olds, 1) loop
    -- The owner (the migrating role may be another member of the owner's role, or a superuser).
    if (select relowner from pg_class where oid = news[i]) <> (select relowner from pg_class where oid = olds[i]) then
      execute format('alter table %s owner to %I', news[i]::regclass, (select pg_get_userbyid(relowner) from pg_class where oid = olds[i]));
    end if;
    -- What default privileges gave the new relation that the old one did not hold.
    for acl in
      select n.col, n.grantee, n.privilege_type
        from pg_temp.footprint_acl(news[i]) n
       where not exists (select from pg_temp.footprint_acl(olds[i]) o
                          where (o.col, o.grantor, o.grantee, o.privilege_type, o.is_grantable) is not distinct from (n.col, n.grantor, n.grantee, n.privilege_type, n.is_grantable))
    loop
      execute format('revoke %s%s on %s from %s cascade', acl.privilege_type, coalesce(' (' || quote_ident(acl.col) || ')', ''), news[i]::regclass,
        case when acl.grantee = 0 then 'public' else quote_ident(pg_get_userbyid(acl.grantee)) end);
    end loop;
    -- The old grants on what the new relation has (its columns but window_end and loaded_at), each
    -- given once: by its grantor once that grantor holds the grant option on the new relation (the
    -- owner's grants first, then those they allow), and what is left (a grantor the migrating role
    -- may not act as) by the owner.
    attempted := array[]::text[];
    loop
      select o.*, concat_ws(' ', o.col, o.grantor, o.grantee, o.privilege_type) as key,
             o.grantor <> c.relowner and pg_has_role(o.grantor, 'member')
               and exists (select from pg_temp.footprint_acl(news[i]) n
                            where n.grantee = o.grantor and n.privilege_type = o.privilege_type and n.is_grantable and (n.col is null or n.col = o.col)) as as_grantor
        into acl
        from pg_temp.footprint_acl(olds[i]) o join pg_class c on c.oid = news[i]
       where concat_ws(' ', o.col, o.grantor, o.grantee, o.privilege_type) <> all (attempted)
         and (o.col is null or exists (select from pg_attribute t where t.attrelid = news[i] and t.attname = o.col and t.attnum > 0 and not t.attisdropped))
       -- Those a grantor can give now first; the owner's own next; the rest by the owner, last.
       order by as_grantor desc, (o.grantor = c.relowner) desc, o.col nulls first, o.grantee, o.privilege_type
       limit 1;
      exit when not found;
      attempted := attempted || acl.key;
      if acl.as_grantor then
        perform set_config('role', pg_get_userbyid(acl.grantor), true);
      end if;
      execute format('grant %s%s on %s to %s%s', acl.privilege_type, coalesce(' (' || quote_ident(acl.col) || ')', ''), news[i]::regclass,
        case when acl.grantee = 0 then 'public' else quote_ident(pg_get_userbyid(acl.grantee)) end,
        case when acl.is_grantable then ' with grant option' else '' end);
      perform set_config('role', own_role, true);
    end loop;

    -- The publications naming the old relation name the new one (the column list without the
    -- columns gone; null when none is left, which fails below rather than publish every column).
    for pub in
      select p.pubname, pr.oid from pg_publication_rel pr join pg_publication p on p.oid = pr.prpubid where pr.prrelid = olds[i] order by p.pubname
    loop
      clause := '';
      -- Column lists and row filters exist from PostgreSQL 15 (the columns too: read them only then).
      if current_setting('server_version_num')::int >= 150000 then
        execute $sql$
          select case when pr.prattrs is null then ''
                      else ' (' || (select string_agg(quote_ident(a.attname), ', ' order by a.attnum)
                                      from pg_attribute a join pg_attribute n on n.attrelid = $2 and n.attname = a.attname and n.attnum > 0 and not n.attisdropped
                                     where a.attrelid = pr.prrelid and a.attnum = any (pr.prattrs::int2[])) || ')' end
                 || coalesce(' where (' || pg_get_expr(pr.prqual, pr.prrelid) || ')', '')
            from pg_publication_rel pr where pr.oid = $1$sql$
          into clause using pub.oid, news[i];
      end if;
      begin
        if clause is null then
          raise exception 'its column list names only columns this migration removes (window_end, loaded_at)';
        end if;
        execute format('alter publication %I add table %s%s', pub.pubname, news[i]::regclass, clause);
      exception when others then
        raise exception 'publication % cannot be given % again: %', pub.pubname, news[i]::regclass, sqlerrm
          using hint = 'run the migration as the publication''s owner (or a superuser), or change the publication (alter publication … drop table) and add the table again after it';
      end;
    end loop;
  end loop;
  drop function pg_temp.footprint_acl(oid);

  -- Replica identity: FULL as before, or instead of the primary key when a publication that
  -- publishes updates or deletes covers the relation (by name, through a parent, its schema, all tables).
  for i in 1 .. array_length(olds, 1) loop
    if (select relkind from pg_class where oid = news[i]) in ('r', 'p')
       and ((select relreplident from pg_class where oid = olds[i]) = 'f'
            or ((select relreplident from pg_class where oid = olds[i]) in ('d', 'i')
                and exists (select from pg_publication p join pg_publication_tables t on t.pubname = p.pubname
                              join pg_namespace n on n.nspname = t.schemaname join pg_class c on c.relnamespace = n.oid and c.relname = t.tablename
                             where (p.pubupdate or p.pubdelete) and c.oid in (select relid from pg_partition_ancestors(news[i])))))
    then
      execute format('alter table %s replica identity full', news[i]::regclass);
      -- A column list must then hold every column for updates and deletes to pass: a publication
      -- publishing them with a shorter one would fail every re-load of a window, so fail here.
      clause := null;
      if current_setting('server_version_num')::int >= 150000 then
        execute $sql$
          select string_agg(p.pubname, ', ' order by p.pubname)
            from pg_publication p join pg_publication_rel pr on pr.prpubid = p.oid
           where (p.pubupdate or p.pubdelete) and pr.prrelid in (select relid from pg_partition_ancestors($1))
             and cardinality(pr.prattrs::int2[]) < (select count(*) from pg_attribute where attrelid = $1 and attnum > 0 and not attisdropped)$sql$
          into clause using news[i];
      end if;
      if clause is not null then
        raise exception 'publication % publishes updates or deletes of % with a column list: without a primary key its replica identity is FULL, which a column list must hold entirely', clause, news[i]::regclass
          using hint = 'publish inserts only (alter publication … set (publish = ''insert, truncate'')) or drop the column list, then migrate again';
      end if;
    end if;
  end loop;

  if typed_view then
    drop view records_typed_previous;
  end if;
  drop table records_previous;
end
$$;

-- Down Migration
-- The previous shape, window_end and loaded_at taken from sync_windows (a record whose window has no
-- ledger row gets its window_start as end and now() as load time), and the primary key again. The
-- table is altered in place, so it keeps its owner, grants and publications. records_typed stays as
-- it is (it reads both columns from sync_windows, which the previous release also fills), with its
-- owner and grants; derived_settings forgets its definition, so that the previous release's next
-- sync creates it again as that release defines it.
do $$
begin
  delete from derived_settings where name = 'typed_view';
  alter table records add column window_end timestamptz;
  alter table records add column loaded_at timestamptz not null default now();
  update records r
     set window_end = coalesce(w.window_end, r.window_start), loaded_at = coalesce(w.loaded_at, now())
    from sync_windows w
   where w.source = r.source and w.window_start = r.window_start;
  update records set window_end = window_start where window_end is null;
  alter table records alter column window_end set not null;
  alter table records add primary key (id, window_start);
end
$$;
