/**
 * FIELD_CONTRACT in a run (the rules: derived/fields/schema-changes.ts). The source's catalogue is
 * read once, under the source's lock, each window judged against it as it stood before the window
 * (where the writer takes each page, not where pages are prepared ahead), and a window's fields
 * added once it committed. Exact only while a run's windows commit one by one, in order, on its
 * session. Design: docs/design/derived-tables.md.
 */
import type { FieldContractMode } from '../../config.js';
import { dataElementSpans, stringifyJson } from '../../upstream/page-text.js';
import { catalogueRecords, type WindowFields } from '../derived/index.js';
import {
  contractReason,
  fieldChanges,
  fieldJsonPath,
  learnFields,
  mayBreakFreeze,
  recordBreaches,
  type FieldChange,
  type KnownFields,
} from '../derived/fields/schema-changes.js';
import type { QuarantineRow } from '../rows/page-rows.js';
import type { StoreSession } from '../store/ports.js';
import type { PreparedPage } from '../read/prepare.js';

export type { FieldChange } from '../derived/fields/schema-changes.js';

export interface FrozenPage {
  page: PreparedPage;
  /** Records moved to the quarantine (0: `page` is the page given). */
  refused: number;
  /** The changes those records bring, each once. */
  breaches: FieldChange[];
}

/** One run's contract: the source's catalogue as the run knows it, and what it warned about. */
export class FieldContract {
  /** `path\ttype`. */
  readonly #warned = new Set<string>();

  private constructor(
    readonly mode: FieldContractMode,
    private readonly known: KnownFields,
    /** The source's first run: what it sees is the baseline, neither reported nor refused. */
    readonly baseline: boolean,
  ) {}

  /** The caller holds the source's lock. @returns undefined with FIELD_CATALOGUE off. @throws the database's error. */
  static async open(session: StoreSession, settings: { catalogue: boolean; mode: FieldContractMode }): Promise<FieldContract | undefined> {
    if (!settings.catalogue) return undefined;
    const known = await session.maintenance.catalogueTypes();
    return new FieldContract(settings.mode, known, known.size === 0);
  }

  /**
   * Under `freeze`, `page` without the records bringing a field or type the catalogue did not hold,
   * those quarantined with their exact text; the page's totals made again from what it keeps.
   */
  freeze(
    page: PreparedPage,
    countRollup: (records: readonly unknown[], keep: readonly number[], times: readonly (number | null)[]) => PreparedPage['rollup'],
  ): FrozenPage {
    const unchanged = { page, refused: 0, breaches: [] };
    if (this.mode !== 'freeze' || this.baseline || !mayBreakFreeze(this.known, page.fields)) return unchanged;
    const { rows } = page;
    // Rare: parsing again beats keeping every page's records.
    const records: readonly unknown[] = 'records' in rows ? rows.records : (JSON.parse(rows.text) as { data: unknown[] }).data;
    const spans = 'text' in rows ? dataElementSpans(rows.text) : undefined;
    const keep: number[] = [];
    const eventTimes: (number | null)[] = [];
    const quarantine: QuarantineRow[] = [...page.quarantine];
    const breaches = new Map<string, FieldChange>();
    for (let k = 0; k < rows.keep.length; k++) {
      const position = rows.keep[k]!;
      const eventTime = rows.eventTimes[k] ?? null;
      const found = recordBreaches(this.known, records[position]);
      if (found.length === 0) {
        keep.push(position);
        eventTimes.push(eventTime);
        continue;
      }
      for (const b of found) breaches.set(`${b.path}\t${b.type}`, b);
      const span = spans?.[position];
      const text = 'text' in rows && span !== undefined ? rows.text.slice(span.start, span.end) : stringifyJson(records[position]);
      quarantine.push({ text, path: fieldJsonPath(found[0]!.path), reason: contractReason(found), eventTime });
    }
    if (keep.length === rows.keep.length) return unchanged;
    const fields: WindowFields = catalogueRecords(records, keep, eventTimes);
    return {
      page: { ...page, rows: { ...rows, keep, eventTimes }, quarantine, fields, rollup: countRollup(records, keep, eventTimes) },
      refused: rows.keep.length - keep.length,
      breaches: [...breaches.values()],
    };
  }

  /** Those not warned about yet in this run; they count as warned from now on. */
  firstBreaches(breaches: readonly FieldChange[]): FieldChange[] {
    const first = breaches.filter((b) => !this.#warned.has(`${b.path}\t${b.type}`));
    for (const b of first) this.#warned.add(`${b.path}\t${b.type}`);
    return first;
  }

  /** What the catalogue gains with a window (none in the baseline run). */
  changes(fields: WindowFields): FieldChange[] {
    return this.baseline ? [] : fieldChanges(this.known, fields);
  }

  committed(fields: WindowFields): void {
    learnFields(this.known, fields);
  }
}
