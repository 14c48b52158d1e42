/** E6/E7 query parameters (reference E6 query parameters, E7 notes): each read once, checked, or refused with 400. */
import { parseIsoDateTime } from './time.js';

/** A query parameter broke its rule: answered 400 `invalid_request` naming the parameter. */
export class ParameterError extends Error {
  constructor(
    readonly parameter: string,
    message: string,
  ) {
    super(message);
  }
}

/** @throws {ParameterError} when the parameter is repeated. */
function single(params: URLSearchParams, name: string): string | undefined {
  const values = params.getAll(name);
  if (values.length > 1) throw new ParameterError(name, `${name} must be given at most once; got ${values.length} values`);
  return values[0];
}

/**
 * A whole-number parameter, `fallback` when absent.
 *
 * @throws {ParameterError} when it is repeated, not a whole number, or outside [min, max].
 */
export function intParam(params: URLSearchParams, name: string, fallback: number, min: number, max: number): number {
  const text = single(params, name);
  if (text === undefined) return fallback;
  const value = /^\d{1,15}$/.test(text) ? Number(text) : NaN;
  if (!(value >= min && value <= max)) {
    throw new ParameterError(name, `${name} must be a whole number from ${min} to ${max}; got ${JSON.stringify(text)}`);
  }
  return value;
}

function dateParam(params: URLSearchParams, name: string, required: boolean): Date | undefined {
  const text = single(params, name);
  if (text === undefined || text === '') {
    if (required) throw new ParameterError(name, `${name} is required (ISO 8601 date-time such as 2026-11-01T00:00:00Z)`);
    return undefined;
  }
  const ms = parseIsoDateTime(text);
  if (ms === undefined) {
    throw new ParameterError(name, `${name} must be an ISO 8601 date-time with a zone, such as 2026-11-01T00:00:00Z; got ${JSON.stringify(text)}`);
  }
  return new Date(ms);
}

/**
 * `startDate` and `toDate` of E6/E7.
 *
 * @param startRequired E6 requires `startDate`; E7 does not.
 * @throws {ParameterError} for a missing, repeated or malformed date, or `toDate` before `startDate`.
 */
export function rangeParams(params: URLSearchParams, startRequired: boolean): { from: Date | undefined; to: Date | undefined } {
  const from = dateParam(params, 'startDate', startRequired);
  const to = dateParam(params, 'toDate', false);
  if (from !== undefined && to !== undefined && to.getTime() < from.getTime()) {
    throw new ParameterError('toDate', 'toDate must not be before startDate');
  }
  return { from, to };
}
