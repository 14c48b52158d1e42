/**
 * The process logger: pino lines on stderr, JSON or pretty, every line masked of every registered
 * secret (docs/design/secret-masking.md), errors logged as `{type, code, message, cause}`.
 */
import { createRequire } from 'node:module';
import { pino, type Logger, type LevelWithSilent } from 'pino';
import type { LogFormat } from './config.js';
import { coerceError, redactSecrets } from './errors.js';

export type { Logger };

/** Blanked by pino, a second defence: no code path is meant to log them. */
const REDACTED_PATHS = [
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

/** Anything with a synchronous `write`. */
export interface LogDestination {
  write(chunk: string): unknown;
  /** Decides `auto`. */
  isTTY?: boolean;
}

/** `auto` is `pretty` on a terminal, `json` otherwise. */
export function resolveLogFormat(format: LogFormat, destination: LogDestination): 'json' | 'pretty' {
  if (format !== 'auto') return format;
  return destination.isTTY === true ? 'pretty' : 'json';
}

/** The same shape at every level of the `cause` chain. */
export interface SerializedError {
  /** The class name (`UpstreamHttpError`, `DatabaseError`, `TypeError`). */
  type: string;
  /** Ours (`ERR_UPSTREAM_HTTP`), an errno or a SQLSTATE. */
  code?: string;
  status?: number;
  message: string;
  /** At `debug` and `trace` only. */
  stack?: string;
  cause?: SerializedError;
}

/** Deeper causes are left out (a cycle ends here too). */
export const MAX_CAUSE_DEPTH = 5;

/** Anything thrown, secrets masked; an empty message (an AggregateError's) takes its inner errors'. */
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

const STACK_LEVELS: ReadonlySet<string> = new Set(['debug', 'trace']);

/** Synchronous pino-pretty, not a worker transport: nothing is lost when the process exits. */
function prettyDestination(destination: LogDestination): pino.DestinationStream {
  // Only for a terminal; CommonJS, so require() loads it synchronously, as createLogger must.
  const { prettyFactory } = createRequire(import.meta.url)('pino-pretty') as typeof import('pino-pretty');
  const colorize = destination.isTTY === true && process.env.NO_COLOR === undefined;
  const prettify = prettyFactory({ colorize, singleLine: true, ignore: 'name', translateTime: 'SYS:HH:MM:ss.l', errorLikeObjectKeys: ['err'] });
  // Masked as JSON (escaped forms) here, as pretty text by the destination.
  return { write: (line: string) => void destination.write(prettify(redactSecrets(line))) };
}

/** Every line masked of every registered secret before it is written. */
function maskedDestination(destination: LogDestination): LogDestination {
  return { write: (line: string) => destination.write(redactSecrets(line)), ...(destination.isTTY !== undefined ? { isTTY: destination.isTTY } : {}) };
}

export interface LoggerOptions {
  format?: LogFormat;
  /** Default process.stderr: stdout is for command output. */
  destination?: LogDestination;
}

/** The process logger: {@link REDACTED_PATHS} blanked, every line masked, `err` by {@link serializeError}. */
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
