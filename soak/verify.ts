/**
 * The end-of-soak data check, per source: every committed window holds exactly what the source's
 * simulator serves for its range (the window before it keeping the records at its start), the windows tile [start, watermark) without gap or overlap,
 * and no row lies outside a committed window. An expired window (RETENTION dropped its
 * partition) must hold no row; its records are left out of the comparison. Records have no id, so
 * windows are compared as multisets of canonical JSON (identical records counted as often as
 * they occur). Records PostgreSQL refused are looked for in `records_quarantine` (their text exactly
 * as E6 sent it), and records deleted upstream after their window was loaded are expected still
 * stored (SYNC_SHRINK=keep keeps them). A record E6 returns at a cut with both windows belongs to
 * the earlier one, or to the later one when it came to the cut after the earlier one was read
 * (src/sync/membership/boundary.ts: stored once either way); those are counted. A parked window
 * must hold no row (it was never loaded): it is listed with its reason and left out of the
 * comparison, its records with it; a window committed short (E6's count claimed more than it
 * served) is compared like any other and listed with both counts.
 */
import type pg from 'pg';
import type { Simulator } from '@analytics-exporter/simulator';
import { canonicalJson } from '../test/helpers/canonical.js';

/** Outcome of {@link verifyWindows}. */
export interface WindowCheck {
  pass: boolean;
  windows: number;
  /** Windows marked expired, and the simulator's records in them (not stored, on purpose). */
  expiredWindows: number;
  expiredRecords: number;
  /** Rows in the records table, and records the simulator has for the kept windows. */
  storedRecords: number;
  /** Rows in records_quarantine, and records deleted upstream that the windows kept (SYNC_SHRINK=keep). */
  quarantined: number;
  keptDeleted: number;
  /** Records at a cut stored by the later window: they came after the earlier window was loaded (src/sync/membership/boundary.ts). */
  keptByLater: number;
  expectedRecords: number;
  /** The watermark the windows must end at. */
  watermark: Date | undefined;
  /** Parked windows (not expired): reason and the simulator's records in them (not stored, on purpose). */
  parked: { start: Date; end: Date; reason: string; records: number }[];
  /** Windows committed short: E6's count (`short_claimed`) and what it served (`short_served`). */
  short: { start: Date; end: Date; claimed: number; served: number }[];
  /** Up to 10 problems, each naming the window. */
  problems: string[];
}

function sameMultiset(a: string[], b: string[]): boolean {
  if (a.length !== b.length) return false;
  a.sort();
  b.sort();
  return a.every((x, i) => x === b[i]);
}

/** `a` without one copy of each element of `b` (as multisets). */
export function multisetMinus(a: string[], b: string[]): string[] {
  const drop = new Map<string, number>();
  for (const x of b) drop.set(x, (drop.get(x) ?? 0) + 1);
  return a.filter((x) => {
    const n = drop.get(x) ?? 0;
    if (n === 0) return true;
    drop.set(x, n - 1);
    return false;
  });
}

/**
 * What a mismatched window's first missing and extra records are, for the report: each one's
 * timestamp, event type and user, and when it was inserted upstream when it is a late arrival
 * (`arrivals`: insertion time by canonical JSON).
 */
function evidence(missing: readonly string[], extra: readonly string[], arrivals: ReadonlyMap<string, number>): string {
  const show = (text: string): string => {
    const r = JSON.parse(text) as Record<string, unknown>;
    const at = arrivals.get(text);
    return `${String(r.timestamp)} ${String(r.eventType)} ${String(r.userId)}${at === undefined ? '' : ` (inserted upstream at ${new Date(at).toISOString()})`}`;
  };
  const list = (texts: readonly string[]) => (texts.length ? texts.slice(0, 3).map(show).join(', ') : 'none');
  return `missing: ${list(missing)}; not in the dataset: ${list(extra)}`;
}

/** The elements `a` and `b` share, as multisets (each as often as in the one holding fewer). */
export function multisetIntersection(a: string[], b: string[]): string[] {
  return multisetMinus(a, multisetMinus(a, b));
}

/** A record deleted upstream after its window was loaded: its timestamp (never on a window boundary) and its canonical JSON. */
export interface KeptRecord {
  ms: number;
  json: string;
}

/**
 * Compares the rows of `source` in the tables of `schema` (through `client`) with `sim`'s dataset.
 *
 * @param start where the first sync started (SYNC_START_DATE): the first window must begin there.
 * @param kept records deleted upstream that the windows must still hold.
 * @returns the verdict with counts and the first problems; never throws for a mismatch, only for database errors.
 */
export async function verifyWindows(
  client: pg.Client,
  schema: string,
  source: string,
  sim: Simulator,
  start: Date,
  kept: readonly KeptRecord[] = [],
): Promise<WindowCheck> {
  const s = client.escapeIdentifier(schema);
  const problems: string[] = [];
  const note = (problem: string) => void (problems.length < 10 && problems.push(problem));

  const { rows: state } = await client.query<{ watermark: Date | null }>(`select watermark from ${s}.sync_state where source = $1`, [source]);
  const watermark = state[0]?.watermark ?? undefined;
  const { rows: windows } = await client.query<{
    start: Date;
    end: Date;
    recordCount: string;
    expired: boolean;
    runId: string;
    loadedAt: Date;
    status: string;
    reason: string | null;
    claimed: string | null;
    served: string | null;
  }>(
    `select window_start as start, window_end as "end", record_count as "recordCount", expired_at is not null as expired,
            run_id as "runId", loaded_at as "loadedAt", status, reason, short_claimed as claimed, short_served as served
       from ${s}.sync_windows where source = $1 order by window_start`,
    [source],
  );
  const { rows: records } = await client.query<{ windowStartMs: string; payload: unknown }>(
    `select (extract(epoch from window_start) * 1000)::bigint as "windowStartMs", payload from ${s}.records where source = $1`,
    [source],
  );

  const { rows: quarantineRows } = await client.query<{ windowStartMs: string; text: string }>(
    `select (extract(epoch from window_start) * 1000)::bigint as "windowStartMs", payload_text as text from ${s}.records_quarantine where source = $1`,
    [source],
  );
  const quarantine = new Map<number, string[]>();
  for (const row of quarantineRows) {
    const key = Number(row.windowStartMs);
    quarantine.set(key, [...(quarantine.get(key) ?? []), row.text]);
  }
  let keptDeleted = 0;
  const stored = new Map<number, string[]>();
  for (const row of records) {
    const key = Number(row.windowStartMs);
    let list = stored.get(key);
    if (list === undefined) stored.set(key, (list = []));
    list.push(canonicalJson(row.payload));
  }

  if (watermark === undefined) note('no watermark: nothing was committed');
  if (windows.length === 0) note('no committed windows');
  let cursor = start.getTime();
  let expectedRecords = 0;
  let expiredWindows = 0;
  let expiredRecords = 0;
  const parked: WindowCheck['parked'] = [];
  const short: WindowCheck['short'] = [];
  /** Committed windows, compared once every one is read (a cut's record may be the later window's). */
  const compared: { name: string; from: number; to: number; expected: string[]; got: string[]; boundary: string[]; loaded: string }[] = [];
  for (const window of windows) {
    const from = window.start.getTime();
    const to = window.end.getTime();
    const name = `[${window.start.toISOString()}, ${window.end.toISOString()})`;
    if (from !== cursor) note(`${name} does not start where the previous window ends (${new Date(cursor).toISOString()})`);
    cursor = to;
    if (window.expired) {
      expiredWindows++;
      expiredRecords += sim.dataset.count(window.start, window.end, false);
      const left = (stored.get(from)?.length ?? 0) + (quarantine.get(from)?.length ?? 0);
      stored.delete(from);
      quarantine.delete(from);
      if (left > 0) note(`${name} is expired, yet ${left} of its rows are stored`);
      continue;
    }
    if (window.status === 'parked') {
      parked.push({ start: window.start, end: window.end, reason: window.reason ?? '', records: sim.dataset.count(window.start, window.end, false) });
      const left = (stored.get(from)?.length ?? 0) + (quarantine.get(from)?.length ?? 0);
      stored.delete(from);
      quarantine.delete(from);
      if (left > 0) note(`${name} is parked, yet ${left} rows are stored for it`);
      continue;
    }
    if (window.claimed !== null) short.push({ start: window.start, end: window.end, claimed: Number(window.claimed), served: Number(window.served) });
    // What E6 serves for the window (startDate = start, toDate = end), less what it serves at its
    // start when a window before it keeps those (src/sync/membership/boundary.ts: the earlier slice keeps a
    // record E6 returns with both).
    const servedTexts = sim.servedJson(window.start, window.end);
    const expectedTexts = from === start.getTime() ? servedTexts : multisetMinus(servedTexts, sim.servedJson(window.start, window.start));
    // Refused records: in the quarantine, as sent.
    const quarantined = quarantine.get(from) ?? [];
    quarantine.delete(from);
    const notServed = multisetMinus(quarantined, expectedTexts);
    if (notServed.length > 0) note(`${name}: ${notServed.length} quarantined records E6 does not serve for it`);
    const keptHere = kept.filter((k) => k.ms > from && k.ms < to).map((k) => k.json);
    keptDeleted += keptHere.length;
    const expected = [...multisetMinus(expectedTexts, quarantined).map((text) => canonicalJson(JSON.parse(text))), ...keptHere];
    expectedRecords += expected.length;
    const got = stored.get(from) ?? [];
    stored.delete(from);
    // record_count: the rows stored, with or without the quarantined ones.
    if (Number(window.recordCount) !== got.length + quarantined.length && Number(window.recordCount) !== got.length)
      note(`${name}: sync_windows says ${window.recordCount} records, the tables hold ${got.length} + ${quarantined.length} quarantined`);
    const boundary = from === start.getTime() ? [] : sim.servedJson(window.start, window.start).map((text) => canonicalJson(JSON.parse(text)));
    compared.push({ name, from, to, expected, got, boundary, loaded: `loaded by run ${window.runId} at ${window.loadedAt.toISOString()}` });
  }
  // A record at a cut that came after the earlier window was loaded is kept by the later one (src/sync/membership/boundary.ts).
  let keptByLater = 0;
  for (let i = 1; i < compared.length; i++) {
    const earlier = compared[i - 1]!;
    const later = compared[i]!;
    if (earlier.to !== later.from) continue;
    const moved = multisetIntersection(
      multisetIntersection(multisetMinus(earlier.expected, earlier.got), multisetMinus(later.got, later.expected)),
      later.boundary,
    );
    if (moved.length === 0) continue;
    keptByLater += moved.length;
    earlier.expected = multisetMinus(earlier.expected, moved);
    later.expected = [...later.expected, ...moved];
  }
  let arrivals: Map<string, number> | undefined;
  for (const { name, expected, got, loaded } of compared) {
    if (sameMultiset(got, expected)) continue;
    if (arrivals === undefined) {
      arrivals = new Map();
      for (const x of sim.dataset.insertions()) arrivals.set(canonicalJson(JSON.parse(x.json)), x.insertedAtMs);
    }
    const missing = multisetMinus(expected, got);
    const extra = multisetMinus(got, expected);
    note(
      `${name}: ${got.length} stored, ${expected.length} expected (${missing.length} missing, ${extra.length} not in the dataset); ` +
        `${loaded}; ${evidence(missing, extra, arrivals)}`,
    );
  }
  if (watermark !== undefined && cursor !== watermark.getTime())
    note(`the windows end at ${new Date(cursor).toISOString()}, the watermark is ${watermark.toISOString()}`);
  for (const [key, list] of stored) note(`${list.length} rows belong to no committed window (window_start ${new Date(key).toISOString()})`);
  for (const [key, list] of quarantine) note(`${list.length} quarantined rows belong to no committed window (window_start ${new Date(key).toISOString()})`);

  return {
    pass: problems.length === 0,
    windows: windows.length,
    expiredWindows,
    expiredRecords,
    storedRecords: records.length,
    quarantined: quarantineRows.length,
    keptDeleted,
    keptByLater,
    expectedRecords,
    watermark,
    parked,
    short,
    problems,
  };
}
