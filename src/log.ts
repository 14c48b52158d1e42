import { pino, type Logger, type LevelWithSilent } from 'pino';

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

/**
 * Creates the process logger: pino JSON lines on stderr (stdout stays free for
 * command output such as `check`'s step lines), with secrets redacted.
 *
 * @param level pino level name, or `silent`.
 */
export function createLogger(level: LevelWithSilent = 'info', destination: NodeJS.WritableStream = process.stderr): Logger {
  return pino(
    {
      level,
      base: { name: 'analytics-exporter' },
      redact: { paths: REDACTED_PATHS, censor: '[redacted]' },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
    },
    destination as pino.DestinationStream,
  );
}

/** A logger that drops everything, for library use and tests. */
export const silentLogger: Logger = pino({ level: 'silent' });
