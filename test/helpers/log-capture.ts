/** A log destination for tests that read what a logger wrote (src/log.ts createLogger, JSON format). */
import type { LogDestination } from '../../src/log.js';

export interface CapturedLog extends LogDestination {
  /** Everything written, as one string. */
  text(): string;
  /** Every JSON line written, parsed. */
  lines(): Record<string, unknown>[];
}

/** A destination keeping what is written to it; `isTTY` as a terminal would report it. */
export function captureLog(isTTY = false): CapturedLog {
  const chunks: string[] = [];
  return {
    isTTY,
    write: (chunk: string) => void chunks.push(chunk),
    text: () => chunks.join(''),
    lines: () =>
      chunks
        .join('')
        .split('\n')
        .filter((l) => l !== '')
        .map((l) => JSON.parse(l) as Record<string, unknown>),
  };
}
