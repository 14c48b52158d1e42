/** The zod schemas settings are read with, each reading the text a user writes and failing with its rule. */
import { z } from 'zod';
import { parseDuration, parseDurationOrZero } from '../time.js';

/** A positive duration (`30s`), in milliseconds. */
export const duration = (rule: string) =>
  z.string().transform((text, ctx) => {
    const ms = parseDuration(text);
    if (ms === undefined || ms <= 0) {
      ctx.addIssue({ code: 'custom', message: `must be a positive duration such as ${rule}` });
      return z.NEVER;
    }
    return ms;
  });

/** A positive duration of at most `max` ms (`maxText` says why), or `off` (undefined). */
export const durationOrOff = (example: string, max?: { ms: number; text: string }) =>
  z.string().transform((text, ctx): number | undefined => {
    if (text === 'off') return undefined;
    const ms = parseDuration(text);
    if (ms !== undefined && ms > 0 && (max === undefined || ms <= max.ms)) return ms;
    const bound = max === undefined ? '' : ` of at most ${max.text}`;
    ctx.addIssue({ code: 'custom', message: `must be a positive duration${bound} such as ${example}, or 'off'` });
    return z.NEVER;
  });

/** A duration that may be zero (`0`, `0s`). */
export const durationOrZero = (rule: string) =>
  z.string().transform((text, ctx) => {
    const ms = parseDurationOrZero(text);
    if (ms === undefined) {
      ctx.addIssue({ code: 'custom', message: `must be a duration such as ${rule}, or 0` });
      return z.NEVER;
    }
    return ms;
  });

/** Decimal digits only: not `1e3`, `0x10` or `1_000`, which a coercion would take. */
export const wholeNumber = (min: number, max: number) => {
  const rule = `must be a whole number from ${min} to ${max}`;
  return z.string().transform((text, ctx) => {
    const value = /^\s*-?\d+\s*$/.test(text) ? Number(text) : NaN;
    if (!(Number.isSafeInteger(value) && value >= min && value <= max)) {
      ctx.addIssue({ code: 'custom', message: rule });
      return z.NEVER;
    }
    return value;
  });
};

const BYTE_UNITS: Readonly<Record<string, number>> = { B: 1, KiB: 1024, MiB: 1024 ** 2, GiB: 1024 ** 3, kB: 1000, MB: 1000 ** 2, GB: 1000 ** 3 };

/** `bytes` in the largest binary unit that divides it (`1GiB`, `64KiB`, `0B`). */
const showBytes = (bytes: number): string => {
  for (const unit of ['GiB', 'MiB', 'KiB'] as const) if (bytes > 0 && bytes % BYTE_UNITS[unit]! === 0) return `${bytes / BYTE_UNITS[unit]!}${unit}`;
  return `${bytes}B`;
};

/** Bytes, or a number and a unit (`64MiB`, `1.5 GB`); a number of bytes is whole. */
export const byteSize = (example: string, min: number, max: number) =>
  z.string().transform((text, ctx) => {
    const match = /^\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*$/.exec(text);
    const unit = match === null ? undefined : BYTE_UNITS[match[2] || 'B'];
    const value = match === null || unit === undefined ? NaN : Number(match[1]) * unit;
    const bytes = Number.isInteger(value) || unit !== 1 ? Math.floor(value) : NaN;
    if (!(bytes >= min && bytes <= max)) {
      ctx.addIssue({
        code: 'custom',
        message: `must be a byte size from ${showBytes(min)} to ${showBytes(max)}, such as ${example}, or a whole number of bytes (units B, KiB, MiB, GiB, kB, MB, GB)`,
      });
      return z.NEVER;
    }
    return bytes;
  });

export const httpUrl = z.url({ protocol: /^https?$/, error: 'must be an http:// or https:// URL' });

export const optional = <T extends z.ZodType>(schema: T) => schema.optional();
