/**
 * FIELD_CONTRACT in a run (the rules: src/sync/derived/fields/schema-changes.ts). The run reads its source's
 * field catalogue (record_fields: names and types) once, when it starts under the source's lock,
 * and keeps it in memory; each window is judged against it as it stood before the window, and the
 * window's fields are added to it once the window has committed.
 *
 * Why here, and why that is exact. The catalogue of a source changes only in the transaction of
 * one of its windows (catalogue.ts `addWindow`; clearing a window only lowers counts, never takes a
 * name or a type away), and only a run holding the source's lock (`sync:<schema>:<source>`,
 * exclusive, whatever process runs it) loads its windows: nobody else changes it while the run
 * holds the lock. Within a run the windows are written one after the other, in order, on the run's
 * one session (run.ts); SYNC_CONCURRENCY only lets the reader fetch and prepare pages of later
 * windows ahead (reader.ts, prepare.ts), before the windows ahead of them have committed. So the
 * check cannot run where pages are prepared (it would not know what an earlier window of the same
 * run adds); it runs where the writer takes each page of the window it is writing
 * (load-window.ts), against the catalogue as of the window's start. Its cost there: under `freeze`,
 * one pass over a page's field totals (tens of names), and only a page that shows a change is read
 * record by record (parsed again from its text); under `evolve`, one pass over the window's field
 * totals at its end. A window rolled back (a failure, a parked window) adds nothing.
 *
 * This relies on a run's windows committing one by one, in order, on its session (derived/daily.ts
 * still speaks of windows of one source committing concurrently; its per-day locks are right
 * either way). Were windows of one run ever committed in parallel, the catalogue would have to be
 * read in each window's transaction instead (one indexed query of the source's rows).
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

/** A page as the contract leaves it, and the records it refused. */
export interface FrozenPage {
  page: PreparedPage;
  /** Records moved to the quarantine (0: `page` is the page given). */
  refused: number;
  /** The changes those records bring, each once. */
  breaches: FieldChange[];
}

/** One run's contract: the source's catalogue as the run knows it, and what it told already. */
export class FieldContract {
  /** Changes refused under `freeze` already warned about in this run (`path\ttype`). */
  readonly #warned = new Set<string>();

  /**
   * @param mode the source's FIELD_CONTRACT.
   * @param known the source's catalogue when the run started.
   */
  private constructor(
    readonly mode: FieldContractMode,
    private readonly known: KnownFields,
    /** The source's first run: its catalogue was empty, so everything it sees is the baseline (not reported, not refused). */
    readonly baseline: boolean,
  ) {}

  /**
   * The run's contract, from the source's catalogue as it is now (the caller holds the source's
   * lock); undefined when `settings.catalogue` (FIELD_CATALOGUE) is off: no catalogue to compare
   * with (loading the configuration refuses `freeze` then).
   *
   * @param settings.mode the source's FIELD_CONTRACT.
   *
   * @throws the database's error.
   */
  static async open(session: StoreSession, settings: { catalogue: boolean; mode: FieldContractMode }): Promise<FieldContract | undefined> {
    if (!settings.catalogue) return undefined;
    const known = await session.maintenance.catalogueTypes();
    return new FieldContract(settings.mode, known, known.size === 0);
  }

  /**
   * Under `freeze` (but in the baseline run), `page` without its records that bring a field or a
   * type the catalogue did not hold before the window: each goes to the quarantine with its exact
   * text, `json_path` its first new field and `reason` the changes ({@link contractReason}), and
   * the page's field totals and rollup counts are made again from the records it keeps.
   *
   * @param countRollup the run's rollup counting (PageWalk.observe without the catalogue).
   */
  freeze(
    page: PreparedPage,
    countRollup: (records: readonly unknown[], keep: readonly number[], times: readonly (number | null)[]) => PreparedPage['rollup'],
  ): FrozenPage {
    const unchanged = { page, refused: 0, breaches: [] };
    if (this.mode !== 'freeze' || this.baseline || !mayBreakFreeze(this.known, page.fields)) return unchanged;
    const { rows } = page;
    // Rare (a change arrived): the page is parsed again rather than every page's records being kept.
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

  /** Of `breaches` (refused in a window), those not warned about yet in this run; they count as warned from now on. */
  firstBreaches(breaches: readonly FieldChange[]): FieldChange[] {
    const first = breaches.filter((b) => !this.#warned.has(`${b.path}\t${b.type}`));
    for (const b of first) this.#warned.add(`${b.path}\t${b.type}`);
    return first;
  }

  /** What the catalogue gains with a window's `fields` (empty in the baseline run: nothing is reported then). */
  changes(fields: WindowFields): FieldChange[] {
    return this.baseline ? [] : fieldChanges(this.known, fields);
  }

  /** The window holding `fields` committed: they are in the catalogue from now on. */
  committed(fields: WindowFields): void {
    learnFields(this.known, fields);
  }
}
