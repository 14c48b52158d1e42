/**
 * SYNC_SHRINK=keep in PostgreSQL: a cleared window's records and quarantined records wait in the
 * session's temporary tables (emptied at each commit); at its end each is stored again as many times
 * as it was stored beyond the copies this read stored, quarantined or left out as its start's
 * boundary set. Owns those tables and every statement on them. Design: docs/design/keep-union.md.
 */
import { dataRefusal } from '../../../db/refusal.js';
import { CONTRACT_REASON_PREFIX } from '../../derived/fields/schema-changes.js';
import type { QuarantineRow } from '../../rows/page-rows.js';
import { isolateRefused } from './isolate.js';
import { insertQuarantined } from './records.js';
import type { Queryable, WindowTarget } from './tables.js';

/** `quarantined` includes records refused on their way back (a constraint added since). */
export interface KeptBack {
  records: number;
  quarantined: number;
}

/** One window's keep union, on the connection and in the transaction loading it. */
export class KeepUnion {
  /** @param restoreSql the derived tables' expressions after `back` ($1 start, $2 end, $3 source). */
  constructor(
    private readonly db: Queryable,
    private readonly target: WindowTarget,
    private readonly restoreSql: () => string[],
  ) {}

  async prepare(): Promise<void> {
    await this.db.query(
      `create temp table if not exists sync_kept_records (
         n bigint generated always as identity, payload jsonb not null, event_time timestamptz
       ) on commit delete rows;
       create temp table if not exists sync_kept_quarantine (
         payload_text text not null, json_path text, reason text, sqlstate text, message text, event_time timestamptz, run_id bigint not null
       ) on commit delete rows;
       create temp table if not exists sync_kept_owned (payload_text text not null, payload jsonb) on commit delete rows`,
    );
  }

  /** Saves the records the clearing statement deletes (`gone`). */
  static saveRecordsSql(): string {
    return `saved as (insert into pg_temp.sync_kept_records (payload, event_time) select payload, event_time from gone)`;
  }

  /** @returns the quarantined rows set aside. */
  async setQuarantineAside(): Promise<number> {
    const { t, source, window } = this.target;
    const { rowCount } = await this.db.query(
      `with gone as (delete from ${t.quarantine} where source = $3 and window_start >= $1 and window_start < $2
                     returning payload_text, json_path, reason, sqlstate, message, event_time, run_id)
       insert into pg_temp.sync_kept_quarantine select * from gone`,
      [new Date(window.start), new Date(window.end), source],
    );
    return rowCount ?? 0;
  }

  /**
   * Once this read's rows are in. `owned`: the texts left out as the start's boundary set.
   * @throws the database's error when it is no data refusal.
   */
  async restore(owned: readonly string[]): Promise<KeptBack> {
    if (owned.length > 0) {
      await this.db.query(`insert into pg_temp.sync_kept_owned (payload_text, payload) select x, ${this.target.t.tryJsonb}(x) from unnest($1::text[]) as x`, [
        owned,
      ]);
    }
    const { records, refused } = await this.#restoreRecords();
    await insertQuarantined(this.db, this.target, refused);
    const quarantined = await this.#restoreQuarantine();
    return { records, quarantined: quarantined + refused.length };
  }

  async #restoreRecords(): Promise<{ records: number; refused: QuarantineRow[] }> {
    await this.db.query('savepoint records_kept');
    try {
      return { records: await this.#insertBack(), refused: [] };
    } catch (err) {
      if (dataRefusal(err) === undefined) throw err;
      await this.db.query('rollback to savepoint records_kept');
      return await this.#restoreIsolated(err);
    } finally {
      await this.db.query('release savepoint records_kept').catch(() => undefined);
    }
  }

  async #restoreIsolated(err: unknown): Promise<{ records: number; refused: QuarantineRow[] }> {
    const isolated = await isolateRefused(await this.#beyond(), err, {
      attempt: async (batch) => {
        await this.db.query('savepoint records_batch');
        try {
          await this.#insertBack(batch);
        } catch (e) {
          await this.db.query('rollback to savepoint records_batch');
          throw e;
        }
        await this.db.query('release savepoint records_batch');
      },
    });
    const { rows } = await this.db.query<{ text: string; event_time: Date | null }>(
      'select payload::text as text, event_time from pg_temp.sync_kept_records where n = any($1::bigint[]) order by n',
      [isolated.refused.map((r) => r.row)],
    );
    const refused = rows.map((r, i) => ({ text: r.text, eventTime: r.event_time?.getTime() ?? null, ...isolated.refused[i]!.refusal }));
    return { records: isolated.stored, refused };
  }

  /** @param only numbers of saved records; default: those beyond this read's copies (which a first batch would change). */
  async #insertBack(only?: readonly number[]): Promise<number> {
    const { t, source, window } = this.target;
    const ctes =
      only === undefined
        ? [...this.#beyondSql(), `chosen as (select k.* from kept k left join loaded l on l.text = k.payload::text where k.copy > coalesce(l.n, 0))`]
        : // $2 (the window's end) is named only so that both forms take the same parameters.
          [`chosen as (select k.* from pg_temp.sync_kept_records k where k.n = any($4::bigint[]) and $2::timestamptz > $1)`];
    ctes.push(`back as (
         insert into ${t.records} (source, payload, event_time, window_start)
         select $3, payload, event_time, $1 from chosen order by n
         returning payload
       )`);
    ctes.push(...this.restoreSql());
    const { rows } = await this.db.query<{ kept: string }>(
      `with ${ctes.join(',\n')}
       select count(*) as kept from back`,
      [new Date(window.start), new Date(window.end), source, ...(only === undefined ? [] : [only])],
    );
    return Number(rows[0]!.kept);
  }

  async #beyond(): Promise<number[]> {
    const { source, window } = this.target;
    const { rows } = await this.db.query<{ n: string }>(
      `with ${this.#beyondSql().join(',\n')}
       select k.n from kept k left join loaded l on l.text = k.payload::text where k.copy > coalesce(l.n, 0) order by k.n`,
      [new Date(window.start), new Date(window.end), source],
    );
    return rows.map((r) => Number(r.n));
  }

  /** `kept`: saved records numbered per payload; `loaded`: this read's copies per payload (stored, refused as 23/P0, owned). */
  #beyondSql(): string[] {
    const { t } = this.target;
    return [
      `kept as (select k.*, row_number() over (partition by k.payload::text order by k.n) as copy from pg_temp.sync_kept_records k)`,
      `loaded as (
         select text, count(*) as n from (
           select payload::text as text from ${t.records} where source = $3 and window_start >= $1 and window_start < $2
           union all
           select payload_text::jsonb::text from ${t.quarantine}
            where source = $3 and window_start >= $1 and window_start < $2 and left(sqlstate, 2) in ('23', 'P0')
           union all
           select payload::text from pg_temp.sync_kept_owned where payload is not null
         ) as now group by text
       )`,
    ];
  }

  /** A `contract:` row this read stored in `records` counts as returned. @returns the rows inserted again. */
  async #restoreQuarantine(): Promise<number> {
    const { t, source, window } = this.target;
    // `stored` reads the window's records only when a contract row was kept (a one-time filter).
    const { rows } = await this.db.query<{ kept: string }>(
      `with kept as (
         select k.*, row_number() over (partition by payload_text) as copy from pg_temp.sync_kept_quarantine k
       ), loaded as (
         select payload_text, count(*) as n from (
           select payload_text from ${t.quarantine} where source = $3 and window_start >= $1 and window_start < $2
           union all
           select payload_text from pg_temp.sync_kept_owned
         ) as now group by payload_text
       ), stored as (
         select c.payload_text, count(*) as n
           from (select distinct payload_text, ${t.tryJsonb}(payload_text) as payload from pg_temp.sync_kept_quarantine where reason like $4) c
           join (select payload from ${t.records}
                  where source = $3 and window_start >= $1 and window_start < $2
                    and exists (select 1 from pg_temp.sync_kept_quarantine where reason like $4)) r on r.payload = c.payload
          group by c.payload_text
       ), back as (
         insert into ${t.quarantine} (source, payload_text, json_path, reason, sqlstate, message, event_time, window_start, window_end, run_id)
         select $3, k.payload_text, k.json_path, k.reason, k.sqlstate, k.message, k.event_time, $1, $2, k.run_id
           from kept k left join loaded l using (payload_text) left join stored s using (payload_text)
          where k.copy > coalesce(l.n, 0) + coalesce(s.n, 0)
         returning 1
       )
       select count(*) as kept from back`,
      [new Date(window.start), new Date(window.end), source, `${CONTRACT_REASON_PREFIX}%`],
    );
    return Number(rows[0]!.kept);
  }
}
