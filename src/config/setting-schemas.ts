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

/** A positive duration, or `off` (undefined). */
export const durationOrOff = (example: string) =>
  z.string().transform((text, ctx): number | undefined => {
    if (text === 'off') return undefined;
    const ms = parseDuration(text);
    if (ms !== undefined && ms > 0) return ms;
    ctx.addIssue({ code: 'custom', message: `must be a positive duration such as ${example}, or 'off'` });
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

/** Bytes, or a number and a unit (`64MiB`, `1.5 GB`). */
export const byteSize = (example: string, min: number, max: number) =>
  z.string().transform((text, ctx) => {
    const match = /^\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*$/.exec(text);
    const unit = match === null ? undefined : BYTE_UNITS[match[2] || 'B'];
    const bytes = match === null || unit === undefined ? NaN : Math.floor(Number(match[1]) * unit);
    if (!(bytes >= min && bytes <= max)) {
      ctx.addIssue({
        code: 'custom',
        message: `must be a byte size from ${min} to ${max} bytes, such as ${example} or a number of bytes (units B, KiB, MiB, GiB, kB, MB, GB)`,
      });
      return z.NEVER;
    }
    return bytes;
  });

export const httpUrl = z.url({ protocol: /^https?$/, error: 'must be an http:// or https:// URL' });

export const optional = <T extends z.ZodType>(schema: T) => schema.optional();
