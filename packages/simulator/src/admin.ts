/**
 * The admin requests (`--admin`): change the data while a client runs, as an upstream does when
 * records arrive late or are deleted. Not part of the reference; refused (404) unless enabled.
 *
 * - `POST /admin/records` `{ "records": [record, …] }` or `{ "at": ISO, "count": n, "padBytes"?: b }`:
 *   inserts the records, or `n` plausible records at instant `at` (each with a field `padding` of `b`
 *   characters when given: records as large as a test needs, beyond what a request body holds);
 *   answers `{ inserted, records }` (padded records with `padding` shortened to its length).
 * - `POST /admin/delete` `{ "records": [record, …] }` or `{ "from": ISO, "to": ISO, "count": n }`:
 *   deletes one record equal to each given one, or `n` records spread over those whose timestamp
 *   lies in `[from, to]`; answers `{ deleted, records }`. A record not found deletes nothing (404).
 * - `GET /admin/stats`: the simulator's request, response and wire counts since start
 *   (`SimulatorStats`), for a benchmark that runs the simulator as a process of its own.
 */
import type http from 'node:http';
import { z } from 'zod';
import type { Dataset } from './dataset.js';
import { InvalidArgumentError } from './errors.js';
import { analyticsRecordSchema, type AnalyticsRecord } from './records.js';
import type { Responder } from './respond.js';
import type { SimulatorStats } from './settings.js';
import { parseIsoDateTime } from './time.js';
import type { RecordView } from './view.js';

/** Largest admin request body read; more is refused with 413. */
export const MAX_ADMIN_BODY_BYTES = 32 * 1024 * 1024;
/** Most records one admin request adds or deletes. */
export const MAX_ADMIN_RECORDS = 100_000;
/** Most characters of `padding` an admin request gives each record it makes (`padBytes`). */
export const MAX_PAD_BYTES = 256 * 1024 * 1024;

const instant = z.string().transform((text, ctx) => {
  const ms = parseIsoDateTime(text);
  if (ms === undefined) {
    ctx.addIssue({ code: 'custom', message: 'must be an ISO 8601 date-time with a zone, such as 2026-11-01T00:00:00Z' });
    return z.NEVER;
  }
  return new Date(ms);
});
const countSchema = z.number().int().min(1).max(MAX_ADMIN_RECORDS);
const recordsSchema = z.array(analyticsRecordSchema).min(1).max(MAX_ADMIN_RECORDS);

const byRecords = z.strictObject({ records: recordsSchema });
const atInstant = z.strictObject({ at: instant, count: countSchema, padBytes: z.number().int().min(0).max(MAX_PAD_BYTES).optional() });
const inRange = z
  .strictObject({ from: instant, to: instant, count: countSchema })
  .refine((s) => s.to.getTime() >= s.from.getTime(), { message: 'must not be before from', path: ['to'] });

/** Whether a body names its records (else it names an instant or a range): picks the schema, so a refusal names the field. */
const namesRecords = (body: unknown): boolean => typeof body === 'object' && body !== null && 'records' in body;

/** The request body, or undefined when it is larger than {@link MAX_ADMIN_BODY_BYTES}. */
async function readBody(req: http.IncomingMessage): Promise<string | undefined> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_ADMIN_BODY_BYTES) return undefined;
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** The admin requests of one simulator. */
export class AdminEndpoints {
  readonly #dataset: Dataset;
  readonly #view: RecordView;
  readonly #respond: Responder;
  readonly #stats: SimulatorStats;

  constructor(dataset: Dataset, view: RecordView, respond: Responder, stats: SimulatorStats) {
    this.#stats = stats;
    this.#dataset = dataset;
    this.#view = view;
    this.#respond = respond;
  }

  /** Answers one request to a path under `/admin/`. */
  async handle(req: http.IncomingMessage, res: http.ServerResponse, path: string): Promise<void> {
    const respond = this.#respond;
    if (path === '/admin/stats') {
      if (req.method === 'GET') respond.sendJson(res, 200, this.#stats);
      else respond.sendJson(res, 405, { error: 'method_not_allowed', error_description: `${path} accepts GET` }, { allow: 'GET' });
      return;
    }
    if (path !== '/admin/records' && path !== '/admin/delete') {
      respond.sendJson(res, 404, { error: 'not_found', error_description: `no resource at ${path}` });
      return;
    }
    if (req.method !== 'POST') {
      respond.sendJson(res, 405, { error: 'method_not_allowed', error_description: `${path} accepts POST` }, { allow: 'POST' });
      return;
    }
    const text = await readBody(req);
    if (text === undefined) {
      respond.sendJson(res, 413, { error: 'too_large', error_description: `request body larger than ${MAX_ADMIN_BODY_BYTES} bytes` }, { connection: 'close' });
      return;
    }
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      respond.sendJson(res, 400, { error: 'invalid_json', error_description: 'the body must be a JSON object' });
      return;
    }
    if (path === '/admin/records') this.#add(res, body);
    else this.#delete(res, body);
  }

  #invalid(res: http.ServerResponse, error: z.ZodError): void {
    const issue = error.issues[0]!;
    this.#respond.sendJson(res, 400, { error: 'invalid_request', error_description: `${issue.path.join('.') || 'body'}: ${issue.message}` });
  }

  #add(res: http.ServerResponse, body: unknown): void {
    let added: AnalyticsRecord[];
    if (namesRecords(body)) {
      const parsed = byRecords.safeParse(body);
      if (!parsed.success) return this.#invalid(res, parsed.error);
      added = parsed.data.records;
    } else {
      const parsed = atInstant.safeParse(body);
      if (!parsed.success) return this.#invalid(res, parsed.error);
      const { at, count, padBytes = 0 } = parsed.data;
      added = this.#plausibleAt(at, count).map((r) => (padBytes > 0 ? { ...r, padding: 'x'.repeat(padBytes) } : r));
      if (padBytes > 0) {
        this.#dataset.insert(added);
        // Not echoed whole: the answer would be as large as what was inserted.
        const shown = added.map((r) => ({ ...r, padding: `(${padBytes} characters)` }));
        return this.#respond.sendJson(res, 200, { inserted: added.length, records: shown });
      }
    }
    this.#dataset.insert(added);
    this.#respond.sendJson(res, 200, { inserted: added.length, records: added });
  }

  #delete(res: http.ServerResponse, body: unknown): void {
    const parsed = namesRecords(body) ? byRecords.safeParse(body) : inRange.safeParse(body);
    if (!parsed.success) return this.#invalid(res, parsed.error);
    try {
      const deleted = this.#view.delete(parsed.data);
      this.#respond.sendJson(res, 200, { deleted: deleted.length, records: deleted });
    } catch (err) {
      if (!(err instanceof InvalidArgumentError)) throw err;
      this.#respond.sendJson(res, 404, { error: 'not_found', error_description: err.message });
    }
  }

  /** `count` plausible records at exactly `at`, a batch of its own (salted by the records inserted so far). */
  #plausibleAt(at: Date, count: number): AnalyticsRecord[] {
    return this.#dataset.plausibleRecords(count, at, at, true, 0x41444d00 + this.#dataset.insertedRecords);
  }
}
