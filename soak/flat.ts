/**
 * What "flat" means for a soak, numerically, and the verdicts on a series of samples.
 *
 * The first 20 % of a soak is warm-up (the backfill at startup, V8 sizing its heap, the pool
 * opening its connections) and is judged by nothing but the maxima. Two rules:
 *
 * - **Level**: the median of the last 20 % of samples against the median of the 20 %–40 % band,
 *   as a ratio (RSS: at most +10 %) or as an absolute slack (descriptors, handles, connections).
 *   Medians ignore the spikes of one sync run in flight at sampling time.
 * - **Peak**: the high samples of the second half against the maximum over the first half plus a
 *   slack: a leak of a few descriptors per run pushes new peaks, again and again; a flat process
 *   does not. "High" is the second half's 99th percentile (nearest rank), not its maximum: one
 *   sample that caught several sources' runs in flight at once (each with its upstream sockets and
 *   database connections) is a coincidence of schedules, not a leak (the 30-minute soak of
 *   2026-11-27 saw one such sample, 56 descriptors, among 180 of at most 45); a leak repeats, and
 *   moves the level too. The maximum is still reported.
 */

/** How one resource may move between the baseline band and the end. */
export interface FlatRule {
  /** Readable name, e.g. "RSS". */
  name: string;
  /** Level rule: end median ≤ baseline median × (1 + ratio), when set. */
  maxGrowthRatio?: number;
  /** Level rule: end median ≤ baseline median + slack, when set. */
  levelSlack?: number;
  /** Peak rule: 99th percentile of the second half ≤ max of the first half + slack, when set. */
  peakSlack?: number;
}

/** Figures of one series and the verdict of its rule. */
export interface FlatVerdict {
  rule: FlatRule;
  first: number;
  mid: number;
  last: number;
  max: number;
  /** Median of the 20 %–40 % band. */
  baseline: number;
  /** Median of the last 20 %. */
  end: number;
  firstHalfMax: number;
  secondHalfMax: number;
  /** 99th percentile (nearest rank) of the second half: what the peak rule judges. */
  secondHalfHigh: number;
  pass: boolean;
  /** Why it passed or failed, with the numbers, e.g. "end median 81.2 ≤ 1.10 × 79.0". */
  reason: string;
}

/** Fewer samples than this and the bands are too thin to judge: the verdict fails. */
export const MIN_SAMPLES = 10;

/** Median of a non-empty list (mean of the middle two for an even length). */
export function median(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** Samples of `values` whose position lies in [fromShare, toShare) of the series (shares 0..1); never empty for a non-empty series. */
export function band(values: readonly number[], fromShare: number, toShare: number): number[] {
  const n = values.length;
  const from = Math.min(n - 1, Math.floor(n * fromShare));
  const to = Math.max(from + 1, Math.floor(n * toShare));
  return values.slice(from, to);
}

/** The `share` quantile of a non-empty list by nearest rank (0.99: the value 99 % of the list is at or below). */
export function quantile(values: readonly number[], share: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(share * sorted.length) - 1))]!;
}

/**
 * Judges one series of samples (in time order, equally spaced) by `rule`.
 *
 * @param format renders a value in the reason, e.g. bytes as MiB.
 * @returns the figures and the verdict; a series shorter than {@link MIN_SAMPLES} fails.
 */
export function judgeFlat(values: readonly number[], rule: FlatRule, format: (value: number) => string = String): FlatVerdict {
  const n = values.length;
  const figures = {
    first: values[0] ?? Number.NaN,
    mid: values[n >> 1] ?? Number.NaN,
    last: values[n - 1] ?? Number.NaN,
    max: n === 0 ? Number.NaN : Math.max(...values),
    baseline: median(band(values, 0.2, 0.4)),
    end: median(band(values, 0.8, 1)),
    firstHalfMax: n === 0 ? Number.NaN : Math.max(...values.slice(0, Math.ceil(n / 2))),
    secondHalfMax: n === 0 ? Number.NaN : Math.max(...values.slice(Math.ceil(n / 2))),
    secondHalfHigh: quantile(values.slice(Math.ceil(n / 2)), 0.99),
  };
  if (n < MIN_SAMPLES) return { rule, ...figures, pass: false, reason: `${n} samples; at least ${MIN_SAMPLES} are needed to judge` };
  const reasons: string[] = [];
  let pass = true;
  if (rule.maxGrowthRatio !== undefined) {
    const limit = figures.baseline * (1 + rule.maxGrowthRatio);
    const ok = figures.end <= limit;
    pass &&= ok;
    const growth = figures.baseline > 0 ? ((figures.end / figures.baseline - 1) * 100).toFixed(1) : 'n/a';
    reasons.push(`end median ${format(figures.end)} ${ok ? '≤' : '>'} ${format(figures.baseline)} + ${(rule.maxGrowthRatio * 100).toFixed(0)} % (${growth} %)`);
  }
  if (rule.levelSlack !== undefined) {
    const ok = figures.end <= figures.baseline + rule.levelSlack;
    pass &&= ok;
    reasons.push(`end median ${format(figures.end)} ${ok ? '≤' : '>'} baseline ${format(figures.baseline)} + ${rule.levelSlack}`);
  }
  if (rule.peakSlack !== undefined) {
    const ok = figures.secondHalfHigh <= figures.firstHalfMax + rule.peakSlack;
    pass &&= ok;
    reasons.push(
      `2nd-half p99 ${format(figures.secondHalfHigh)} ${ok ? '≤' : '>'} 1st-half max ${format(figures.firstHalfMax)} + ${rule.peakSlack} (2nd-half max ${format(figures.secondHalfMax)})`,
    );
  }
  return { rule, ...figures, pass, reason: reasons.join('; ') };
}
