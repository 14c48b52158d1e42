/**
 * The audit's comparison of ledger windows with E6's counts (`pageSize` 1, reference E6), at a cost
 * that grows with the windows that differ, not with the history: a window [s, e) holds
 * F(e) − F(s), with F(t) = count([S0, t]) − count([S0, S0]) over a contiguous run from S0 (exact
 * whether `toDate` is inclusive or not); ⌈log2 n⌉ segments, then halving. Counts find records
 * missing or extra, not records changed. Design: docs/design/audit.md.
 */
import type { E6Pages } from '../store/ports.js';
import type { StoredWindow, Window } from '../windows.js';

export interface DriftedWindow extends Window {
  /** Records and quarantined records. */
  stored: number;
  /** Undefined for a parked window whose counts agree. */
  upstream: number | undefined;
}

export interface Comparison {
  windows: number;
  /** In time order. */
  drifted: DriftedWindow[];
  /** E6 requests, the client's retries not counted. */
  requests: number;
}

export interface CompareOptions {
  signal?: AbortSignal;
  /** `stored` (default; SYNC_SHRINK=replace) or `seen`, E6's count when last loaded (SYNC_SHRINK=keep). */
  against?: 'stored' | 'seen';
}

/**
 * `windows`: ledger windows in time order, disjoint.
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
    const segments = Math.max(1, Math.round((segmentsFor(windows.length) * run.length) / windows.length));
    await compareRun(run, segments, count, result.drifted, options.against ?? 'stored');
  }
  return result;
}

/** ⌈log2 n⌉, at most 16: no drift costs at most 17 requests, k windows that differ ≤ 1 + 2·k·⌈log2 n⌉. */
export function segmentsFor(n: number): number {
  return Math.max(1, Math.min(16, Math.ceil(Math.log2(n))));
}

/** 0, …, n: at most `segments` near-equal segments. */
function segmentCuts(n: number, segments: number): number[] {
  const cuts = [0];
  for (let i = 1; i <= segments; i++) {
    const cut = Math.round((i * n) / segments);
    if (cut > cuts[cuts.length - 1]!) cuts.push(cut);
  }
  return cuts;
}

export function contiguousRuns<W extends Window>(windows: readonly W[]): W[][] {
  const runs: W[][] = [];
  for (const w of windows) {
    const last = runs[runs.length - 1];
    if (last !== undefined && last[last.length - 1]!.end === w.start) last.push(w);
    else runs.push([w]);
  }
  return runs;
}

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
  const atOrigin = run[0]!.followsLedger ? await count(origin, origin) : 0;
  /** F at the start of run[i] (run.length: at the run's end). */
  const owned = async (i: number): Promise<number> => (await count(origin, i === run.length ? run[run.length - 1]!.end : run[i]!.start)) - atOrigin;
  // Ranges [lo, hi) with F known at both ends; depth first, so windows come out in time order.
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
