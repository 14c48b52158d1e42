/**
 * The simulator's logger: pino lines on stderr, JSON for a collector or one pretty line per entry
 * on a terminal, with the demo client secret and tokens blanked should a line ever carry them.
 */
import { createRequire } from 'node:module';
import { pino, type Logger, type LevelWithSilent } from 'pino';

export type { Logger };

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];
/** `auto`: `pretty` on a terminal, `json` otherwise. */
export const LOG_FORMATS = ['auto', 'json', 'pretty'] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];

/** Paths pino blanks before a line is written: nothing means to log them; this is the second line of defence. */
const REDACTED_PATHS = ['clientSecret', 'client_secret', 'accessToken', 'access_token', 'authorization', '*.clientSecret', '*.authorization'];

/**
 * Creates the simulator's logger on `destination` (default process.stderr, so stdout keeps the
 * one line that tells the URL and credentials).
 *
 * @param level pino level name, or `silent`.
 * @param format `auto` follows whether the destination is a terminal.
 */
export function createLogger(
  level: LevelWithSilent = 'info',
  format: LogFormat = 'auto',
  destination: NodeJS.WritableStream & { isTTY?: boolean } = process.stderr,
): Logger {
  const options: pino.LoggerOptions = {
    level,
    base: { name: 'analytics-simulator' },
    redact: { paths: REDACTED_PATHS, censor: '[redacted]' },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label) => ({ level: label }) },
    serializers: { err: pino.stdSerializers.err },
  };
  const pretty = format === 'pretty' || (format === 'auto' && destination.isTTY === true);
  if (!pretty) return pino(options, destination as pino.DestinationStream);
  // Synchronous (no worker transport), so a line is written before the process exits; pino-pretty
  // is CommonJS and loaded only for a terminal.
  const { prettyFactory } = createRequire(import.meta.url)('pino-pretty') as typeof import('pino-pretty');
  const prettify = prettyFactory({
    colorize: destination.isTTY === true && process.env.NO_COLOR === undefined,
    singleLine: true,
    ignore: 'name',
    translateTime: 'SYS:HH:MM:ss.l',
  });
  return pino(options, { write: (line: string) => void destination.write(prettify(line)) });
}

/** A logger that drops everything, for library use and tests. */
export const silentLogger: Logger = pino({ level: 'silent' });
