import { pino } from 'pino';
import type { Logger } from '../../src/log.js';

/** A logger that drops everything, for tests and benchmarks that do not read the log. */
export const silentLogger: Logger = pino({ level: 'silent' });
