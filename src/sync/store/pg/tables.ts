/** The qualified names of one schema's tables; only store/ builds {@link Tables}. */
import { quoteIdent, type PoolClient } from '../../../db/pool.js';
import type { Window } from '../../windows.js';

/** Inside the caller's transaction, if any. */
export type Queryable = Pick<PoolClient, 'query'>;

export class Tables {
  readonly records: string;
  readonly quarantine: string;
  readonly windows: string;
  readonly runs: string;
  readonly state: string;
  readonly hourly: string;
  readonly hourlyDistinct: string;
  readonly fields: string;
  readonly fieldChanges: string;
  readonly derivedSettings: string;
  readonly typedView: string;
  readonly tryTimestamptz: string;
  readonly tryJsonb: string;

  constructor(readonly schema: string) {
    const q = quoteIdent(schema);
    this.records = `${q}.records`;
    this.quarantine = `${q}.records_quarantine`;
    this.windows = `${q}.sync_windows`;
    this.runs = `${q}.sync_runs`;
    this.state = `${q}.sync_state`;
    this.hourly = `${q}.records_hourly`;
    this.hourlyDistinct = `${q}.records_hourly_distinct`;
    this.fields = `${q}.record_fields`;
    this.fieldChanges = `${q}.record_field_changes`;
    this.derivedSettings = `${q}.derived_settings`;
    this.typedView = `${q}.records_typed`;
    this.tryTimestamptz = `${q}.records_try_timestamptz`;
    this.tryJsonb = `${q}.records_try_jsonb`;
  }
}

/** Where one window's rows go. */
export interface WindowTarget {
  t: Tables;
  source: string;
  window: Window;
  runId: number;
}
