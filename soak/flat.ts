/**
 * What "flat" means for a soak, numerically, and the verdicts on a series of samples.
 *
 * The first 20 % of a soak is warm-up (the backfill at startup, V8 sizing its heap, the pool
 * opening its connections) and is judged by nothing but the maxima. Two rules:
 *
 * - **Level**: the median (or the floor, or the lowest sample: {@link FlatRule.level}) of an end band of samples against
 *   that of a baseline band, as a ratio (RSS: at most +10 %) or as an absolute slack (descriptors,
 *   handles, connections). Both ignore the spikes of one sync run in flight at sampling time. By default the bands
 *   are the last 20 % and the 20 %–40 % of the series; a caller whose process changed its work
 *   in between (a source added, a schedule made faster) passes {@link LevelBands} that lie within
 *   one configuration, since a process that does more holds more, and that is no leak (the
 *   30-minute soak of 2026-11-27 stepped A's RSS from 127 to 145 MiB at the SIGHUP that added a
 *   fourth source, its heap used from 30 to 34 MiB, and neither grew after).
 * - **Peak**, for a resource with a hard bound (the pools' connections): the high samples of the
 *   second half against the maximum over the first half plus a slack. "High" is the second half's
 *   99th percentile (nearest rank), not its maximum: one sample that caught several runs in
 *   flight at once is a coincidence of schedules. Descriptors and handles show their peaks
 *   ({@link FlatRule.showPeak}) without judging them: their peaks are how many runs a sample
 *   happens to catch in flight, and moved by up to 6 between two bands of one configuration
 *   while the floor held still (four 30-minute soaks of 2026-11-27: floors of 34 descriptors and
 *   9 handles at both ends of every series; A's peaks 51 then 57 in one run, B's 48 then 54 in
 *   another), while a leaked descriptor stays open and raises the floor the level rule judges.
 */
import { median as medianOfSome } from '../bench/lib/stats.js';

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
  /** Without {@link peakSlack}: show the halves' maxima in the reason, unjudged. */
  showPeak?: boolean;
  /**
   * What the level rule reads of a band: its median (the default), or its floor, the 10th
   * percentile (nearest rank). Memory takes the floor: between two collections a Node process's
   * RSS and heap swing by a quarter within a minute (115–153 MiB in one minute of a soak), while
   * what a leak holds is never given back, so it raises the floor the swings return to. The same
   * for descriptors and handles: at rest a replica holds 34, a run in flight 40-58 for seconds,
   * and how many samples of a band catch a run is a coincidence of schedules (the soak of
   * 2026-11-27 19:06 saw B's median go 34 -> 37 with its floor at 34 throughout); a leaked
   * descriptor stays open, so it raises the floor. Leaks while runs are in flight: the peak rule.
   *
   * `lowest`, the band's minimum, for RSS: V8 and malloc give memory back in steps, at a major
   * collection, sometimes minutes after a burst of work. After the hostile minutes of the soak
   * of 2026-11-28 00:27, A's RSS stayed at 151–157 MiB for 3 minutes of its 3.5-minute end band
   * (heap used 29–47 MiB, as before them) and then fell to 115 MiB, under its baseline: the band's
   * 10th percentile read 129 MiB (+10.4 %, failed). A leak is resident in every sample, the
   * lowest included, so the minimum rises with it and with nothing else. In the 12 RSS series of
   * six 30-minute soaks (2026-11-27/28) the minimum moved by −4.4 % to +2.4 % between the bands,
   * the 10th percentile by −8.3 % to +11.2 %.
   */
  level?: 'median' | 'floor' | 'lowest';
}

/** The share {@link FlatRule.level} `floor` reads. */
export const FLOOR_SHARE = 0.1;

/** The two bands the level rule compares, when not the default 20–40 % and last 20 % of the series. */
export interface LevelBands {
  baseline: readonly number[];
  end: readonly number[];
  /** Where the bands lie, for the reason, e.g. "21.0–24.0 min vs 26.5–30.0 min". */
  label: string;
}

/** Fewer samples than this in a band given by {@link LevelBands} and the level cannot be judged: the verdict fails. */
export const MIN_BAND_SAMPLES = 5;

/** Figures of one series and the verdict of its rule. */
export interface FlatVerdict {
  rule: FlatRule;
  first: number;
  mid: number;
  last: number;
  max: number;
  /** Median (or floor, by {@link FlatRule.level}) of the baseline band (the 20 %–40 % band unless {@link LevelBands} were given). */
  baseline: number;
  /** Median (or floor) of the end band (the last 20 % unless {@link LevelBands} were given). */
  end: number;
  firstHalfMax: number;
  secondHalfMax: number;
  /** 99th percentile (nearest rank) of the second half: what the peak rule judges. */
  secondHalfHigh: number;
  pass: boolean;
  /** Why it passed or failed, with the numbers, e.g. "end median 81.2 ≤ 1.10 × 79.0". */
  reason: string;
}

/** Flatness is judged in soaks at least this long, in seconds; a shorter run shows its figures, unjudged. */
export const MIN_FLAT_SECONDS = 20 * 60;

/** Fewer samples than this and the bands are too thin to judge: the verdict fails. */
export const MIN_SAMPLES = 10;

/** Median of a list (bench's median), NaN for an empty one: a band with no samples judges nothing. */
export function median(values: readonly number[]): number {
  return values.length === 0 ? Number.NaN : medianOfSome(values);
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

/** What each {@link FlatRule.level} reads of a band, and its name in the reason (the lowest sample is the 0 quantile). */
const LEVELS: Record<NonNullable<FlatRule['level']>, { of: (xs: readonly number[]) => number; name: string }> = {
  median: { of: (xs) => median(xs), name: 'median' },
  floor: { of: (xs) => quantile(xs, FLOOR_SHARE), name: `floor (p${FLOOR_SHARE * 100})` },
  lowest: { of: (xs) => quantile(xs, 0), name: 'lowest' },
};

/**
 * Judges one series of samples (in time order, equally spaced) by `rule`.
 *
 * @param format renders a value in the reason, e.g. bytes as MiB.
 * @param bands the level rule's bands, when not the default shares of `values`.
 * @returns the figures and the verdict; a series shorter than {@link MIN_SAMPLES}, or a band of
 *   `bands` shorter than {@link MIN_BAND_SAMPLES}, fails.
 */
export function judgeFlat(values: readonly number[], rule: FlatRule, format: (value: number) => string = String, bands?: LevelBands): FlatVerdict {
  const n = values.length;
  const level = LEVELS[rule.level ?? 'median'];
  const figures = {
    first: values[0] ?? Number.NaN,
    mid: values[n >> 1] ?? Number.NaN,
    last: values[n - 1] ?? Number.NaN,
    max: n === 0 ? Number.NaN : Math.max(...values),
    baseline: level.of(bands?.baseline ?? band(values, 0.2, 0.4)),
    end: level.of(bands?.end ?? band(values, 0.8, 1)),
    firstHalfMax: n === 0 ? Number.NaN : Math.max(...values.slice(0, Math.ceil(n / 2))),
    secondHalfMax: n === 0 ? Number.NaN : Math.max(...values.slice(Math.ceil(n / 2))),
    secondHalfHigh: quantile(values.slice(Math.ceil(n / 2)), 0.99),
  };
  if (n < MIN_SAMPLES) return { rule, ...figures, pass: false, reason: `${n} samples; at least ${MIN_SAMPLES} are needed to judge` };
  if (bands && Math.min(bands.baseline.length, bands.end.length) < MIN_BAND_SAMPLES) {
    const counts = `${bands.baseline.length} and ${bands.end.length} samples in the level's bands (${bands.label})`;
    return { rule, ...figures, pass: false, reason: `${counts}; at least ${MIN_BAND_SAMPLES} each are needed to judge` };
  }
  const reasons: string[] = [];
  if (bands) reasons.push(`level ${bands.label}`);
  let pass = true;
  if (rule.maxGrowthRatio !== undefined) {
    const limit = figures.baseline * (1 + rule.maxGrowthRatio);
    const ok = figures.end <= limit;
    pass &&= ok;
    const growth = figures.baseline > 0 ? ((figures.end / figures.baseline - 1) * 100).toFixed(1) : 'n/a';
    reasons.push(
      `end ${level.name} ${format(figures.end)} ${ok ? '≤' : '>'} ${format(figures.baseline)} + ${(rule.maxGrowthRatio * 100).toFixed(0)} % (${growth} %)`,
    );
  }
  if (rule.levelSlack !== undefined) {
    const ok = figures.end <= figures.baseline + rule.levelSlack;
    pass &&= ok;
    reasons.push(`end ${level.name} ${format(figures.end)} ${ok ? '≤' : '>'} baseline ${format(figures.baseline)} + ${rule.levelSlack}`);
  }
  if (rule.peakSlack !== undefined) {
    const ok = figures.secondHalfHigh <= figures.firstHalfMax + rule.peakSlack;
    pass &&= ok;
    reasons.push(
      `2nd-half p99 ${format(figures.secondHalfHigh)} ${ok ? '≤' : '>'} 1st-half max ${format(figures.firstHalfMax)} + ${rule.peakSlack} (2nd-half max ${format(figures.secondHalfMax)})`,
    );
  } else if (rule.showPeak) {
    reasons.push(`peaks shown, not judged: 1st-half max ${format(figures.firstHalfMax)}, 2nd-half max ${format(figures.secondHalfMax)}`);
  }
  return { rule, ...figures, pass, reason: reasons.join('; ') };
}
