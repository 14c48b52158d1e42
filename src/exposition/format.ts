/**
 * What both formats `/metrics` serves (Prometheus text 0.0.4 and OpenMetrics 1.0.0) write alike:
 * sample values, escaped label values and help, label sets, and the option they share.
 */

/** A value Go's `ParseFloat` reads back exactly: `NaN`, `+Inf`, `-Inf`, `-0`, else the shortest round trip. */
export function formatValue(value: number): string {
  if (value !== value) return 'NaN';
  if (value === Infinity) return '+Inf';
  if (value === -Infinity) return '-Inf';
  if (value === 0 && 1 / value < 0) return '-0';
  return String(value);
}

const LABEL_VALUE_SPECIALS_ALL = /[\\"\n]/g;
const TEXT_HELP_SPECIALS = /[\\\n]/;
const TEXT_HELP_SPECIALS_ALL = /[\\\n]/g;

function escapeChar(c: string): string {
  return c === '\n' ? '\\n' : `\\${c}`;
}

/** Label values in both formats, and HELP in OpenMetrics: `\` → `\\`, `"` → `\"`, LF → `\n`. */
export function escapeQuoted(value: string): string {
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i);
    if (c === 92 || c === 34 || c === 10) return value.replace(LABEL_VALUE_SPECIALS_ALL, escapeChar);
  }
  return value;
}

/** HELP in the text format, which knows only `\\` and `\n` (`\"` is an error for promtool). */
export function escapeTextHelp(help: string): string {
  return TEXT_HELP_SPECIALS.test(help) ? help.replace(TEXT_HELP_SPECIALS_ALL, escapeChar) : help;
}

/** `{a="x",b="y"}`, or nothing for no labels; `first` (already formatted pairs) goes before the labels' own. */
export function formatLabels(labels: ReadonlyArray<readonly [string, string]>, first = ''): string {
  if (labels.length === 0) return first === '' ? '' : `{${first}}`;
  let out = first === '' ? '{' : `{${first},`;
  for (let i = 0; i < labels.length; i++) {
    const pair = labels[i]!;
    out += `${i === 0 ? '' : ','}${pair[0]}="${escapeQuoted(pair[1])}"`;
  }
  return `${out}}`;
}

export interface SerializeOptions {
  /**
   * The caller vouches the list is normalized (a parse result, its prefix rename, a subset), so
   * {@link normalizeFamilies} is skipped: 0.1 s and 12 MB per 100,000 samples. Else output may be invalid.
   */
  normalized?: boolean;
}
