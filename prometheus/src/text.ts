/**
 * Small helpers the rules are written with: selectors from the configured matchers, durations in
 * seconds and in words, and prose written across source lines. No rule is defined here.
 */
import type { RulesConfig } from './config.js';

const UNIT_SECONDS = { s: 1, m: 60, h: 3600, d: 86_400 } as const;
const UNIT_WORDS = { s: 'second', m: 'minute', h: 'hour', d: 'day' } as const;

/** `metric{matchers}`: the metric selected by the configured selector. */
export function select(metric: string, config: RulesConfig): string {
  return `${metric}{${config.selector}}`;
}

/** The number and unit of a one-unit duration (`15m` → [15, 'm']). @throws Error on any other text. */
function parts(duration: string): [number, keyof typeof UNIT_SECONDS] {
  const match = /^([1-9]\d*)([smhd])$/.exec(duration);
  if (!match) throw new Error(`Not a one-unit Prometheus duration: ${JSON.stringify(duration)}`);
  return [Number(match[1]), match[2] as keyof typeof UNIT_SECONDS];
}

/** Seconds in a one-unit duration (`5m` → 300). @throws Error when it is not one. */
export function seconds(duration: string): number {
  const [count, unit] = parts(duration);
  return count * UNIT_SECONDS[unit];
}

/** A duration in words: `5m` → "5 minutes", `1h` → "1 hour". @throws Error when it is not one. */
export function inWords(duration: string): string {
  const [count, unit] = parts(duration);
  return `${count} ${UNIT_WORDS[unit]}${count === 1 ? '' : 's'}`;
}

/** "the last hour" for `1h`, "the last 2 hours" for `2h`. @throws Error when it is not one. */
export function theLast(duration: string): string {
  const [count, unit] = parts(duration);
  return count === 1 ? `the last ${UNIT_WORDS[unit]}` : `the last ${inWords(duration)}`;
}

/** Seconds as Prometheus writes a duration, largest units first: 1800 → "30m", 5400 → "1h30m". */
export function promDuration(totalSeconds: number): string {
  let left = Math.round(totalSeconds);
  let text = '';
  for (const [unit, size] of [
    ['d', 86_400],
    ['h', 3600],
    ['m', 60],
    ['s', 1],
  ] as const) {
    if (left >= size) {
      text += `${Math.floor(left / size)}${unit}`;
      left %= size;
    }
  }
  return text || '0s';
}

/**
 * Prose written across source lines, as one line: each run of white space (line breaks and
 * indentation included) becomes one space, and the ends are trimmed. A YAML folded block (`>-`)
 * reads the rule files' descriptions the same way.
 */
export function prose(strings: TemplateStringsArray, ...values: Array<string | number>): string {
  return String.raw({ raw: strings }, ...values)
    .replace(/\s+/g, ' ')
    .trim();
}
