/**
 * The schema's upkeep in PostgreSQL ({@link SchemaMaintenance}): derived tables built for the
 * settings, the field catalogue read back, partitions. Each method is a transaction of its own.
 */
import type { PartitionInterval } from '../../../config.js';
import { withTransaction, type PoolClient } from '../../../db/pool.js';
import type { Logger } from '../../../log.js';
import type { Derived, FieldPlaces, FieldRow } from '../../derived/index.js';
import type { KnownFields } from '../../derived/fields/schema-changes.js';
import type { DroppedPartition, Partition, SchemaMaintenance } from '../ports.js';
import { dropExpiredPartitions, ensurePartitions } from './partitions.js';
import type { Tables } from './tables.js';

export class PgMaintenance implements SchemaMaintenance {
  constructor(
    private readonly db: PoolClient,
    private readonly t: Tables,
    private readonly derived: Derived,
    /** `explain`: a lock_timeout named by the session's lock watcher. */
    private readonly o: { source: string | undefined; partitionInterval: PartitionInterval; log: Logger; explain?: (err: unknown) => unknown },
  ) {}

  isRollupCurrent(): Promise<boolean> {
    return this.derived.isRollupCurrent(this.db);
  }

  ensureRollup(): Promise<boolean> {
    return withTransaction(this.db, () => this.derived.ensureRollup(this.db, this.o.log));
  }

  ensureTypedViewCurrent(): Promise<void> {
    return withTransaction(this.db, () => this.derived.ensureTypedViewCurrent(this.db, this.o.log));
  }

  pruneRollup(before: number): Promise<number> {
    // records_daily_distinct's days are recomputed under locks held until the commit.
    return withTransaction(this.db, () => this.derived.pruneRollup(this.db, before));
  }

  fieldPlaces(): Promise<FieldPlaces> {
    if (this.o.source === undefined) throw new Error('fieldPlaces needs a source');
    return this.derived.fieldPlaces(this.db, this.o.source);
  }

  catalogueTypes(): Promise<KnownFields> {
    if (this.o.source === undefined) throw new Error('catalogueTypes needs a source');
    return this.derived.readFieldTypes(this.db, this.o.source);
  }

  ensurePartitions(starts: readonly number[]): Promise<Partition[]> {
    return ensurePartitions(this.db, this.t, starts, this.o.partitionInterval).catch((err: unknown) => {
      throw this.o.explain?.(err) ?? err;
    });
  }

  dropExpiredPartitions(cutoff: number, runIds: readonly number[]): Promise<DroppedPartition[]> {
    return dropExpiredPartitions(this.db, this.t, cutoff, runIds);
  }

  /** `rollup rebuild`; the caller holds the schema's lock exclusively. @returns rows per table; undefined for one not kept. */
  rebuildRollup(): Promise<{ hourly: number | undefined; distinct: number | undefined }> {
    return withTransaction(this.db, async () => {
      await this.derived.rebuildRollup(this.db);
      return { hourly: await this.#count(this.t.hourly), distinct: await this.#count(this.t.hourlyDistinct) };
    });
  }

  /** By field name then source; `column` null for a field records_typed has no column of. */
  listFields(sources?: readonly string[]): Promise<FieldRow[]> {
    return this.derived.listFields(this.db, sources);
  }

  async #count(table: string): Promise<number | undefined> {
    const { rows: exists } = await this.db.query<{ exists: boolean }>('select to_regclass($1) is not null as exists', [table]);
    if (!exists[0]!.exists) return undefined;
    const { rows } = await this.db.query<{ n: string }>(`select count(*) as n from ${table}`);
    return Number(rows[0]!.n);
  }
}
