import { createRequire } from 'node:module';
import { pino, type Logger, type LevelWithSilent } from 'pino';
import type { LogFormat } from './config.js';
import { coerceError, redactSecrets } from './errors.js';

export type { Logger };

/**
 * Paths pino blanks before a line is written, as a second line of defence: no code
 * path is meant to log these, but if one ever does, the value never reaches a log.
 */
export const REDACTED_PATHS = [
  'clientSecret',
  'client_secret',
  'accessToken',
  'access_token',
  'authorization',
  'headers.authorization',
  'req.headers.authorization',
  'config.clientSecret',
  'password',
  '*.clientSecret',
  '*.accessToken',
  '*.password',
  '*.client_secret',
  '*.access_token',
  '*.authorization',
  '*.headers.authorization',
];

/** Where log lines go: anything with a synchronous `write` (process.stderr, a bar-aware stream, a test's capture). */
export interface LogDestination {
  write(chunk: string): unknown;
  /** Whether it is a terminal; decides `auto` ({@link resolveLogFormat}). */
  isTTY?: boolean;
}

/**
 * The format `auto` stands for on `destination`: `pretty` on a terminal (a person reads it),
 * `json` otherwise (a collector parses it). `json` and `pretty` stand for themselves.
 */
export function resolveLogFormat(format: LogFormat, destination: LogDestination): 'json' | 'pretty' {
  if (format !== 'auto') return format;
  return destination.isTTY === true ? 'pretty' : 'json';
}

/** An error as it is logged: the same shape at every level of the `cause` chain. */
export interface SerializedError {
  /** The class name (`UpstreamHttpError`, `DatabaseError`, `TypeError`, `AggregateError`). */
  type: string;
  /** The stable code: ours (`ERR_UPSTREAM_HTTP`), an errno (`ECONNREFUSED`) or a PostgreSQL SQLSTATE; absent when the error has none. */
  code?: string;
  /** The HTTP status behind the error, when there was one. */
  status?: number;
  message: string;
  /** Only when asked for (the logger is at `debug` or `trace`). */
  stack?: string;
  cause?: SerializedError;
}

/** Causes followed below the logged error; deeper ones are left out (a cycle ends here too). */
export const MAX_CAUSE_DEPTH = 5;

/**
 * Turns anything thrown into the logged shape `{type, code, message}` (plus `status` where there is
 * one, `stack` when `options.stack`, and `cause`, in the same shape, down to {@link MAX_CAUSE_DEPTH}).
 * A non-Error value is coerced first ({@link coerceError}); an error with an empty message (Node's
 * AggregateError for a host with several addresses) takes its inner errors' messages.
 * Messages and stacks are logged with secrets masked ({@link redactSecrets}): errors of this project
 * are built without them, but an upstream's or a library's message may quote one.
 */
export function serializeError(value: unknown, options: { stack?: boolean } = {}): SerializedError {
  return serializeAt(value, options.stack === true, 0);
}

function serializeAt(value: unknown, withStack: boolean, depth: number): SerializedError {
  const error = coerceError(value);
  const { code, status, cause } = error as { code?: unknown; status?: unknown; cause?: unknown };
  const inner = error instanceof AggregateError ? (error.errors as unknown[]).map((e) => coerceError(e).message).filter((m) => m !== '') : [];
  const out: SerializedError = {
    type: error.constructor?.name && error.constructor.name !== 'Object' ? error.constructor.name : error.name || 'Error',
    ...(typeof code === 'string' || typeof code === 'number' ? { code: String(code) } : {}),
    ...(typeof status === 'number' ? { status } : {}),
    message: redactSecrets(error.message || inner.join('; ') || error.name || 'Error'),
  };
  if (withStack && typeof error.stack === 'string') out.stack = redactSecrets(error.stack);
  if (cause !== undefined && cause !== null && cause !== value && depth + 1 <= MAX_CAUSE_DEPTH) out.cause = serializeAt(cause, withStack, depth + 1);
  return out;
}

/** Levels at which a logged error carries its stack. */
const STACK_LEVELS: ReadonlySet<string> = new Set(['debug', 'trace']);

/**
 * One synchronous pino-pretty formatter in front of `destination` (never a worker transport: a
 * line is on the terminal when `write` returns, so nothing is lost when the process exits). One
 * line per entry, its fields inline; an error is shown whole under its line.
 */
function prettyDestination(destination: LogDestination): pino.DestinationStream {
  // Loaded only for a terminal: JSON logs (containers, cron, tests) never need it. pino-pretty is
  // CommonJS, so require() loads it synchronously, as createLogger must.
  const { prettyFactory } = createRequire(import.meta.url)('pino-pretty') as typeof import('pino-pretty');
  const colorize = destination.isTTY === true && process.env.NO_COLOR === undefined;
  const prettify = prettyFactory({ colorize, singleLine: true, ignore: 'name', translateTime: 'SYS:HH:MM:ss.l', errorLikeObjectKeys: ['err'] });
  // The JSON line is masked before it is parsed (its JSON-escaped forms), the pretty line after (by the destination).
  return { write: (line: string) => void destination.write(prettify(redactSecrets(line))) };
}

/**
 * `destination` behind the masking of secrets: every line pino writes, at every level and in
 * every field, has each registered secret masked in all its forms ({@link redactSecrets}) before
 * it is written. A JSON line is masked as written, so JSON-escaped forms are caught too.
 */
function maskedDestination(destination: LogDestination): LogDestination {
  return { write: (line: string) => destination.write(redactSecrets(line)), ...(destination.isTTY !== undefined ? { isTTY: destination.isTTY } : {}) };
}

export interface LoggerOptions {
  /** `auto` (default) follows whether `destination` is a terminal ({@link resolveLogFormat}). */
  format?: LogFormat;
  /** Default process.stderr: stdout stays free for command output such as `check`'s step lines. */
  destination?: LogDestination;
}

/**
 * Creates the process logger: pino lines on stderr, JSON or pretty ({@link LoggerOptions.format}),
 * with secrets redacted by pino before either format sees the line (the fields of
 * {@link REDACTED_PATHS}), every line then masked of every registered secret in all its forms
 * (src/redact.ts), and `err` fields written by {@link serializeError} (the stack only at `debug`
 * and `trace`).
 *
 * @param level pino level name, or `silent`.
 */
export function createLogger(level: LevelWithSilent = 'info', options: LoggerOptions = {}): Logger {
  const destination = maskedDestination(options.destination ?? process.stderr);
  const withStack = STACK_LEVELS.has(level);
  return pino(
    {
      level,
      base: { name: 'analytics-exporter' },
      redact: { paths: REDACTED_PATHS, censor: '[redacted]' },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
      serializers: { err: (err: unknown) => serializeError(err, { stack: withStack }) },
    },
    resolveLogFormat(options.format ?? 'auto', destination) === 'pretty' ? prettyDestination(destination) : (destination as pino.DestinationStream),
  );
}

/** A logger that drops everything, for library use and tests. */
export const silentLogger: Logger = pino({ level: 'silent' });
