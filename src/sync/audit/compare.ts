/**
 * The audit's comparison: what is stored for ledger windows against what E6 holds for them now,
 * at a cost in E6 requests that grows with the windows that differ, not with the history.
 *
 * E6's count of a range is one request with `pageSize` 1: its `totalRecords` (API reference, E6).
 * The reference does not say whether `toDate` is inclusive, so no count of a single range is taken
 * as a window's: a window [s, e) owns what E6 returns for [s, e] but what it returns for the
 * instant [s, s] (the earlier part owns a record at a cut, as the sync stores it), unless no ledger
 * window ends at s (then nothing else holds them, and the window keeps them). Under an exclusive
 * toDate [s, s] returns nothing and [s, e] is [s, e); under an inclusive one the difference is
 * (s, e]: exact under both. Within a run of contiguous windows from S0, every boundary t is asked
 * once, as F(t) = count([S0, t]) − count([S0, S0]) (without the second term when S0 follows no
 * ledger window), and a window holds F(e) − F(s). The history is first compared in ⌈log2 n⌉ segments, at most 16 ({@link segmentsFor}),
 * then a segment that differs is halved down to windows, one count per halving.
 *
 * What E6's count is compared with depends on SYNC_SHRINK ({@link CompareOptions.against}): under
 * `replace` the rows stored for the window, which mirror E6; under `keep` E6's count when the window
 * was last loaded (the ledger's), since the window keeps what E6 deleted since by design.
 *
 * Counts alone cannot see a window that lost as many records as it gained, nor a segment (or a
 * half of one) whose windows' differences cancel out: the audit finds records missing or extra,
 * not records changed.
 */
import type { E6Pages } from '../store/ports.js';
import type { StoredWindow, Window } from '../windows.js';

/** A window whose stored count differs from E6's now. */
export interface DriftedWindow extends Window {
  /** Records and quarantined records stored for it. */
  stored: number;
  /** What E6 holds for it now (see the module comment); undefined for a parked window whose counts agree (not asked alone). */
  upstream: number | undefined;
}

/** What a comparison found. */
export interface Comparison {
  /** Windows compared. */
  windows: number;
  /** Windows whose counts differ, in time order. */
  drifted: DriftedWindow[];
  /** E6 requests made (one per count; the client's retries not counted). */
  requests: number;
}

/** How E6 is asked. */
export interface CompareOptions {
  signal?: AbortSignal;
  /**
   * What E6's count is compared with: `stored`, the rows stored for each window (SYNC_SHRINK=replace:
   * the window mirrors E6), or `seen`, E6's count when the window was last loaded (SYNC_SHRINK=keep:
   * the window keeps what E6 deleted since, so only a change of E6's count is drift). Default `stored`.
   */
  against?: 'stored' | 'seen';
}

/**
 * Compares `windows` (ledger windows in time order, disjoint, with what is stored for each) with
 * what E6 holds for them now (see the module comment for the counts and their cost).
 *
 * @throws what E6Pages.fetchPage throws after its retries (UpstreamError, TokenError, AbortedError on `signal`).
 */
export async function compareWithE6(e6: E6Pages, windows: readonly StoredWindow[], options: CompareOptions = {}): Promise<Comparison> {
  const result: Comparison = { windows: windows.length, drifted: [], requests: 0 };
  const count = async (start: number, end: number): Promise<number> => {
    result.requests++;
    const page = await e6.fetchPage({ startDate: new Date(start), toDate: new Date(end), pageNumber: 1, pageSize: 1 }, options);
    return page.totalRecords;
  };
  for (const run of contiguousRuns(windows)) {
    // The runs share the segments by their length, each at least one.
    const segments = Math.max(1, Math.round((segmentsFor(windows.length) * run.length) / windows.length));
    await compareRun(run, segments, count, result.drifted, options.against ?? 'stored');
  }
  return result;
}

/**
 * How many segments n windows are first compared in: ⌈log2 n⌉, at most 16. Then a deletion
 * upstream and an arrival in another segment do not cancel out; no drift costs at most 17 requests
 * (14 or 15 for a year of hourly windows); and k windows that differ cost at most
 * 1 + segments + k·⌈log2 (n / segments)⌉ ≤ 1 + 2·k·⌈log2 n⌉.
 */
export function segmentsFor(n: number): number {
  return Math.max(1, Math.min(16, Math.ceil(Math.log2(n))));
}

/** Indices cutting `n` windows into at most `segments` near-equal segments: 0, …, n. */
function segmentCuts(n: number, segments: number): number[] {
  const cuts = [0];
  for (let i = 1; i <= segments; i++) {
    const cut = Math.round((i * n) / segments);
    if (cut > cuts[cuts.length - 1]!) cuts.push(cut);
  }
  return cuts;
}

/** Splits windows in time order into runs of windows each starting where the one before ends. */
export function contiguousRuns<W extends Window>(windows: readonly W[]): W[][] {
  const runs: W[][] = [];
  for (const w of windows) {
    const last = runs[runs.length - 1];
    if (last !== undefined && last[last.length - 1]!.end === w.start) last.push(w);
    else runs.push([w]);
  }
  return runs;
}

/** Bisects one contiguous run: a range whose counts agree is accepted whole, one that differs is halved down to windows. */
async function compareRun(
  run: readonly StoredWindow[],
  segments: number,
  count: (start: number, end: number) => Promise<number>,
  drifted: DriftedWindow[],
  against: 'stored' | 'seen',
): Promise<void> {
  const origin = run[0]!.start;
  // stored[i]: what is stored for run[0..i), so a range's stored count is a difference of two.
  const stored = [0];
  for (const w of run) stored.push(stored[stored.length - 1]! + w[against]);
  // The records at the origin's instant are the window's before it when there is one (see the module comment).
  const atOrigin = run[0]!.followsLedger ? await count(origin, origin) : 0;
  /** F at the start of run[i] (run.length: at the run's end), asked of E6 once. */
  const owned = async (i: number): Promise<number> => (await count(origin, i === run.length ? run[run.length - 1]!.end : run[i]!.start)) - atOrigin;
  // Ranges [lo, hi) of windows with F known at both ends, first the run's segments; depth first,
  // so the windows come out in time order.
  const pending: { lo: number; hi: number; fLo: number; fHi: number }[] = [];
  const cuts = segmentCuts(run.length, segments);
  let fLo = 0;
  for (let c = 1; c < cuts.length; c++) {
    const fHi = await owned(cuts[c]!);
    pending.unshift({ lo: cuts[c - 1]!, hi: cuts[c]!, fLo, fHi });
    fLo = fHi;
  }
  const found: DriftedWindow[] = [];
  while (pending.length > 0) {
    const { lo, hi, fLo, fHi } = pending.pop()!;
    if (fHi - fLo === stored[hi]! - stored[lo]!) continue;
    if (hi - lo === 1) {
      found.push({ start: run[lo]!.start, end: run[lo]!.end, stored: run[lo]!.stored, upstream: fHi - fLo });
      continue;
    }
    const mid = (lo + hi) >> 1;
    const fMid = await owned(mid);
    pending.push({ lo: mid, hi, fLo: fMid, fHi }, { lo, hi: mid, fLo, fHi: fMid });
  }
  drifted.push(...found);
}
