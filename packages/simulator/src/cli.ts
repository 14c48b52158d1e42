/**
 * The simulator's command line (its program `analytics-simulator`, and the exporter's `simulate`):
 * runs the simulator of the platform's token endpoint (E0) and analytics API (E6, E7) until SIGINT
 * or SIGTERM, for trying the exporter without a platform account. Flags choose the data and inject
 * faults; docs/simulator.md describes them.
 */
import { readFileSync } from 'node:fs';
import type { Command } from 'commander';
import { z } from 'zod';
import { DEMO_EPOCH_MS, DEMO_RECORD_INTERVAL_MS, demoDatasetBounds } from './demo.js';
import {
  DEFAULT_CUSTOMERS,
  DEFAULT_DUPLICATE_EVERY,
  DEFAULT_RECORDS,
  DEFAULT_SEED,
  DEFAULT_TIME_PRECISION_MS,
  DEFAULT_USERS,
  MAX_RECORDS,
} from './dataset-options.js';
import { describeError, InvalidArgumentError } from './errors.js';
import { EXIT_FAILURE, EXIT_OK, EXIT_USAGE } from './exit.js';
import { createLogger, LOG_FORMATS, LOG_LEVELS, type Logger } from './log.js';
import { bandwidthSchema } from './bandwidth.js';
import { PAGE_SIZE_ECHOES, MAX_FILTER_TIME_LAG_MS } from './behaviours.js';
import { GZIP_MODES } from './gzip.js';
import { RECORD_ORDERS } from './order.js';
import { startSimulator } from './server.js';
import {
  DEFAULT_CLIENT_ID,
  DEFAULT_CLIENT_SECRET,
  DEFAULT_SCOPE,
  DEFAULT_TOKEN_LIFETIME_SECONDS,
  NO_FAULTS,
  type FaultSettings,
  type SimulatorOptions,
} from './settings.js';
import { handleShutdownSignals } from './shutdown.js';
import { parseDurationOrZero, parseIsoDateTime } from './time.js';

/** Port `simulate` listens on unless told otherwise. */
export const DEFAULT_SIMULATE_PORT = 8080;
/** After a shutdown signal, exit anyway if connections have not closed by then. */
const FORCED_EXIT_AFTER_MS = 10_000;

/** Every flag of `simulate`: commander's camelCase key, the flag as typed, and its help. */
const FLAGS = [
  ['host', '--host <address>', 'interface to listen on (default 127.0.0.1; 0.0.0.0 for all)'],
  ['port', '--port <port>', `TCP port, 0 = any free port (default ${DEFAULT_SIMULATE_PORT})`],
  ['seed', '--seed <n>', `seed of the generated records; same seed, same data (default ${DEFAULT_SEED})`],
  [
    'records',
    '--records <n>',
    `number of generated records, up to ${MAX_RECORDS} (default ${DEFAULT_RECORDS}; _ separators allowed; with none of --records, --start, --end: the demo's data, one record every ${DEMO_RECORD_INTERVAL_MS / 1000} s since ${new Date(DEMO_EPOCH_MS).toISOString()} up to now, as npm start serves it)`,
  ],
  ['start', '--start <date-time>', 'timestamp of the first record, ISO 8601 with zone (default 30 days before --end)'],
  ['end', '--end <date-time>', 'end of the data, exclusive, ISO 8601 with zone (default now, in whole seconds; give it for the same data at every start)'],
  ['customers', '--customers <n>', `number of customers, 1 to 9999 (default ${DEFAULT_CUSTOMERS})`],
  ['users', '--users <n>', `users per customer, 1 to 9999 (default ${DEFAULT_USERS})`],
  ['duplicateEvery', '--duplicate-every <n>', `every Nth record is an exact copy of the one before; 0 = none (default ${DEFAULT_DUPLICATE_EVERY})`],
  [
    'timePrecisionMs',
    '--time-precision-ms <ms>',
    `timestamps are multiples of this: 1000 = whole seconds, 1 = milliseconds (default ${DEFAULT_TIME_PRECISION_MS})`,
  ],
  ['clientId', '--client-id <id>', `client id the token endpoint accepts (default ${DEFAULT_CLIENT_ID})`],
  ['clientSecret', '--client-secret <secret>', `client secret the token endpoint accepts; demo use only (default ${DEFAULT_CLIENT_SECRET})`],
  ['scope', '--scope <scope>', `scope a token request must include (default ${DEFAULT_SCOPE})`],
  [
    'tokenLifetime',
    '--token-lifetime <duration>',
    `expires_in and real lifetime of tokens, whole seconds, e.g. 1h (default ${DEFAULT_TOKEN_LIFETIME_SECONDS}s)`,
  ],
  ['toDate', '--to-date <mode>', 'whether a record exactly at toDate is included: inclusive (default) or exclusive'],
  ['order', '--order <order>', 'order of records within an E6 range, drawn per request: stable (default), ties (timestamp order, ties reshuffled) or random'],
  ['prometheusHelp', '--prometheus-help', 'add # HELP and # TYPE lines to /analytics/prometheus (the reference shows none)'],
  ['tlsCert', '--tls-cert <file>', 'PEM server certificate: serve HTTPS (needs --tls-key)'],
  ['tlsKey', '--tls-key <file>', 'PEM private key of --tls-cert'],
  ['tlsClientCa', '--tls-client-ca <file>', 'PEM CA that client certificates must be signed by (with --require-client-cert)'],
  ['requireClientCert', '--require-client-cert', 'mutual TLS: refuse clients without a certificate signed by --tls-client-ca'],
  ['latency', '--latency <duration>', 'delay before answering each request, e.g. 250ms (default none)'],
  [
    'rateLimit',
    '--rate-limit <rate[:burst]>',
    'E6/E7 requests per second the server lets through (one token bucket), burst default the rate rounded up; more answer 429 with Retry-After (default none)',
  ],
  ['rateLimitEvery', '--rate-limit-every <n>', 'every Nth E6/E7 request answers 429 with Retry-After; 0 = never (default 0)'],
  ['retryAfter', '--retry-after <seconds>', `Retry-After of those 429 answers, whole seconds (default ${NO_FAULTS.retryAfterSeconds})`],
  ['errorRate', '--error-rate <share>', 'share of E6/E7 requests answered with --error-status, 0 to 1, seeded (default 0)'],
  ['errorStatus', '--error-status <code>', `HTTP status of --error-rate failures, 400 to 599 (default ${NO_FAULTS.errorStatus})`],
  ['revokeTokensAfter', '--revoke-tokens-after <duration>', 'tokens stop working this long after issue although expires_in says more, e.g. 5m (default never)'],
  ['malformedEvery', '--malformed-every <n>', 'every Nth E6 response is truncated JSON; 0 = never (default 0)'],
  ['ignorePageNumber', '--ignore-page-number', "every E6 page answers page 1's records, echoing the pageNumber asked (a proxy dropping it)"],
  ['arrivals', '--arrivals <R:N>', 'when the Rth E6 request arrives, insert N new records inside its date range first (late arrivals)'],
  ['pageSizeCap', '--page-size-cap <n>', 'E6 serves at most N records a page whatever pageSize asks; 0 = no cap (default 0)'],
  [
    'pageSizeCapEcho',
    '--page-size-cap-echo <echo>',
    "what the envelope's pageSize says under --page-size-cap: served (default, honest) or asked (a lying envelope)",
  ],
  [
    'filterTimeLag',
    '--filter-time-lag <duration>',
    "E6 filters startDate/toDate on a hidden time up to this far either side of each record's timestamp, e.g. 2m (default 0: on the timestamp)",
  ],
  ['admin', '--admin', 'serve POST /admin/records and POST /admin/delete (add late records, delete records); default off: 404'],
  ['gzip', '--gzip <mode>', 'gzip E6/E7 bodies: off (default), on (always, asked or not) or auto (when Accept-Encoding allows gzip)'],
  [
    'bandwidth',
    '--bandwidth <rate>',
    'E6/E7 bodies share one link of this rate, after gzip: e.g. 100mbit, 1gbit, 512kbit, or bytes: 12.5MB, 1MiB (default unlimited)',
  ],
  [
    'outOfRangeEvery',
    '--out-of-range-every <n>',
    'every Nth record carries a number PostgreSQL numeric cannot hold (1e200000, -1e200000, 1e-20000 in turn); 0 = none (default)',
  ],
] as const;

type FlagKey = (typeof FLAGS)[number][0];
const FLAG_NAMES = new Map<string, string>(FLAGS.map(([key, flag]) => [key, flag.split(' ')[0]!]));

const custom = (message: string) => ({ code: 'custom' as const, message });

const wholeNumber = (min: number, max: number) =>
  z.string().transform((text, ctx) => {
    const value = /^\d+(_\d+)*$/.test(text) ? Number(text.replaceAll('_', '')) : NaN;
    if (!(value >= min && value <= max)) {
      ctx.addIssue(custom(`must be a whole number from ${min} to ${max}`));
      return z.NEVER;
    }
    return value;
  });

const dateTime = z.string().transform((text, ctx) => {
  const ms = parseIsoDateTime(text);
  if (ms === undefined) {
    ctx.addIssue(custom('must be an ISO 8601 date-time with a zone, such as 2026-11-01T00:00:00Z'));
    return z.NEVER;
  }
  return new Date(ms);
});

/** A duration such as `250ms` or `1h30m` (or `0`), in milliseconds. */
const durationMs = (rule: string) =>
  z.string().transform((text, ctx) => {
    const ms = parseDurationOrZero(text);
    if (ms === undefined) {
      ctx.addIssue(custom(`must be a duration such as ${rule} (units ms, s, m, h, d, w)`));
      return z.NEVER;
    }
    return ms;
  });

const pemFile = z.string().transform((path, ctx) => {
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    ctx.addIssue(custom(`must name a readable file (${(err as NodeJS.ErrnoException).code ?? 'unreadable'})`));
    return z.NEVER;
  }
});

const flagsSchema = z.object({
  host: z.string().min(1, 'must not be empty').optional(),
  port: wholeNumber(0, 65535).optional(),
  seed: wholeNumber(0, 4_294_967_295).optional(),
  records: wholeNumber(0, MAX_RECORDS).optional(),
  start: dateTime.optional(),
  end: dateTime.optional(),
  customers: wholeNumber(1, 9999).optional(),
  users: wholeNumber(1, 9999).optional(),
  duplicateEvery: wholeNumber(0, MAX_RECORDS)
    .refine((n) => n !== 1, 'must be 0 (no copies) or at least 2')
    .optional(),
  timePrecisionMs: wholeNumber(1, 86_400_000).optional(),
  clientId: z.string().min(1, 'must not be empty').optional(),
  clientSecret: z.string().min(1, 'must not be empty').optional(),
  scope: z
    .string()
    .regex(/^[\x21\x23-\x5b\x5d-\x7e]+$/, 'must be one scope token (RFC 6749 §3.3)')
    .optional(),
  tokenLifetime: durationMs('1h')
    .refine((ms) => ms >= 1000 && ms % 1000 === 0, 'must be whole seconds, at least 1s')
    .optional(),
  toDate: z.enum(['inclusive', 'exclusive'], { error: 'must be inclusive or exclusive' }).optional(),
  order: z.enum(RECORD_ORDERS, { error: 'must be stable, ties or random' }).optional(),
  prometheusHelp: z.boolean().optional(),
  tlsCert: pemFile.optional(),
  tlsKey: pemFile.optional(),
  tlsClientCa: pemFile.optional(),
  requireClientCert: z.boolean().optional(),
  latency: durationMs('250ms').optional(),
  rateLimit: z
    .string()
    .transform((text, ctx) => {
      const m = /^(\d+(?:\.\d*)?|\.\d+)(?::(\d+))?$/.exec(text);
      const perSecond = Number(m?.[1]);
      const burst = m?.[2] === undefined ? Math.ceil(perSecond) : Number(m[2]);
      if (m === null || !(perSecond > 0 && perSecond <= 1_000_000) || !(burst >= 1 && burst <= 1_000_000)) {
        ctx.addIssue(custom('must be RATE or RATE:BURST, requests per second (> 0) and a whole burst (≥ 1), e.g. 50 or 50:10'));
        return z.NEVER;
      }
      return { perSecond, burst };
    })
    .optional(),
  rateLimitEvery: wholeNumber(0, Number.MAX_SAFE_INTEGER).optional(),
  retryAfter: wholeNumber(0, 86_400).optional(),
  errorRate: z
    .string()
    .transform((text, ctx) => {
      const value = /^(\d+(\.\d*)?|\.\d+)$/.test(text) ? Number(text) : NaN;
      if (!(value >= 0 && value <= 1)) {
        ctx.addIssue(custom('must be a number from 0 to 1'));
        return z.NEVER;
      }
      return value;
    })
    .optional(),
  errorStatus: wholeNumber(400, 599).optional(),
  revokeTokensAfter: durationMs('5m').optional(),
  malformedEvery: wholeNumber(0, Number.MAX_SAFE_INTEGER).optional(),
  ignorePageNumber: z.boolean().optional(),
  arrivals: z
    .string()
    .transform((text, ctx) => {
      const m = /^(\d+):(\d+)$/.exec(text);
      const afterRequests = Number(m?.[1]);
      const count = Number(m?.[2]);
      if (m === null || afterRequests < 1 || count > 1_000_000) {
        ctx.addIssue(custom('must be R:N, the request number (≥ 1) and the number of records to insert (≤ 1000000), e.g. 3:50'));
        return z.NEVER;
      }
      return { afterRequests, count };
    })
    .optional(),
  pageSizeCap: wholeNumber(0, Number.MAX_SAFE_INTEGER).optional(),
  pageSizeCapEcho: z.enum(PAGE_SIZE_ECHOES, { error: 'must be served or asked' }).optional(),
  filterTimeLag: durationMs('2m')
    .refine((ms) => ms <= MAX_FILTER_TIME_LAG_MS, 'must be at most 1w')
    .optional(),
  admin: z.boolean().optional(),
  gzip: z.enum(GZIP_MODES, { error: 'must be off, on or auto' }).optional(),
  bandwidth: bandwidthSchema.optional(),
  outOfRangeEvery: wholeNumber(0, Number.MAX_SAFE_INTEGER).optional(),
});

type Flags = z.output<typeof flagsSchema>;

/** Where `simulate` writes, and what stops it; the CLI passes the process's, tests their own. */
export interface SimulateIo {
  /** One line, without the newline. */
  stdout: (line: string) => void;
  stderr: (line: string) => void;
  /** Stops the simulator when aborted. */
  signal?: AbortSignal;
  /** Stop on SIGINT and SIGTERM (the CLI); tests leave this off. */
  handleSignals?: boolean;
  /** Called once the simulator listens, with its URL. */
  onListening?: (url: string) => void;
}

function showValue(raw: Record<string, unknown>, key: string): string {
  const value = raw[key];
  if (key === 'clientSecret') return '***';
  return typeof value === 'string' ? JSON.stringify(value) : String(value);
}

/** Validates flag values; returns the first problem as "--flag rule; got value" lines, or the flags. */
function parseFlags(raw: Record<string, unknown>, now: number): { flags: Flags } | { error: string } {
  const input: Record<string, unknown> = {};
  for (const [key] of FLAGS) if (raw[key] !== undefined) input[key] = raw[key];
  const parsed = flagsSchema.safeParse(input);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((issue) => {
      const key = String(issue.path[0]);
      return `${FLAG_NAMES.get(key) ?? key} ${issue.message}; got ${showValue(input, key)}`;
    });
    return { error: lines.join('\n') };
  }
  const flags = parsed.data;
  const need = (condition: boolean, key: FlagKey, rule: string): string | undefined =>
    condition ? undefined : `${FLAG_NAMES.get(key)!} ${rule}; got ${showValue(input, key)}`;
  const end = dataBounds(flags, now).end;
  const problem =
    need(
      (flags.tlsCert === undefined) === (flags.tlsKey === undefined),
      flags.tlsCert === undefined ? 'tlsKey' : 'tlsCert',
      'needs --tls-cert and --tls-key together',
    ) ??
    need(flags.tlsClientCa === undefined || flags.requireClientCert === true, 'tlsClientCa', 'is used only with --require-client-cert') ??
    need(
      flags.requireClientCert !== true || (flags.tlsClientCa !== undefined && flags.tlsCert !== undefined),
      'requireClientCert',
      'needs --tls-cert, --tls-key and --tls-client-ca',
    ) ??
    need(flags.start === undefined || flags.start.getTime() < end.getTime(), 'start', `must be before the end of the data (${end.toISOString()})`) ??
    need(flags.pageSizeCapEcho === undefined || (flags.pageSizeCap ?? 0) > 0, 'pageSizeCapEcho', 'is used only with --page-size-cap');
  return problem === undefined ? { flags } : { error: problem };
}

/**
 * The data's bounds: the demo's (the same records as `npm start` serves, growing with time) when
 * none of --records, --start and --end is given; otherwise the flags', the end defaulting to `now`.
 */
function dataBounds(flags: Flags, now: number): { start: Date | undefined; end: Date; records: number | undefined } {
  if (flags.records === undefined && flags.start === undefined && flags.end === undefined) return demoDatasetBounds(now);
  return { start: flags.start, end: flags.end ?? new Date(Math.floor(now / 1000) * 1000), records: flags.records };
}

function simulatorOptions(flags: Flags, logger: Logger, now: number): SimulatorOptions {
  const faults: Partial<FaultSettings> = {};
  if (flags.latency !== undefined) faults.latencyMs = flags.latency;
  if (flags.rateLimit !== undefined) faults.rateLimit = flags.rateLimit;
  if (flags.rateLimitEvery !== undefined) faults.rateLimitEvery = flags.rateLimitEvery;
  if (flags.retryAfter !== undefined) faults.retryAfterSeconds = flags.retryAfter;
  if (flags.errorRate !== undefined) faults.errorRate = flags.errorRate;
  if (flags.errorStatus !== undefined) faults.errorStatus = flags.errorStatus;
  if (flags.revokeTokensAfter !== undefined) faults.revokeTokensAfterSeconds = flags.revokeTokensAfter / 1000;
  if (flags.malformedEvery !== undefined) faults.malformedEvery = flags.malformedEvery;
  if (flags.arrivals !== undefined) faults.arrivals = flags.arrivals;
  if (flags.ignorePageNumber === true) faults.ignorePageNumber = true;
  return {
    host: flags.host ?? '127.0.0.1',
    port: flags.port ?? DEFAULT_SIMULATE_PORT,
    seed: flags.seed,
    ...dataBounds(flags, now),
    customers: flags.customers,
    users: flags.users,
    duplicateEvery: flags.duplicateEvery,
    timePrecisionMs: flags.timePrecisionMs,
    clientId: flags.clientId,
    clientSecret: flags.clientSecret,
    scope: flags.scope,
    tokenLifetimeSeconds: flags.tokenLifetime === undefined ? undefined : flags.tokenLifetime / 1000,
    toDate: flags.toDate,
    order: flags.order,
    prometheusHelp: flags.prometheusHelp,
    pageSizeCap: flags.pageSizeCap,
    pageSizeCapEcho: flags.pageSizeCapEcho,
    filterTimeLagMs: flags.filterTimeLag,
    admin: flags.admin,
    gzip: flags.gzip,
    bandwidth: flags.bandwidth,
    outOfRangeEvery: flags.outOfRangeEvery,
    tls:
      flags.tlsCert !== undefined && flags.tlsKey !== undefined
        ? { cert: flags.tlsCert, key: flags.tlsKey, ca: flags.tlsClientCa, requireClientCert: flags.requireClientCert === true }
        : undefined,
    faults,
    logger,
  };
}

/**
 * Runs `simulate` with already-parsed flag values (commander's camelCase keys, strings and
 * booleans) until `io.signal` aborts or, with `io.handleSignals`, SIGINT/SIGTERM arrives.
 * Prints one line to stdout once listening: the URL and the demo credentials.
 *
 * @returns the exit status: 0 after a clean stop, 2 for an invalid flag value (a message naming
 *   the flag and the value goes to stderr), 1 when the server cannot start (e.g. port in use).
 */
export async function runSimulate(raw: Record<string, unknown>, io: SimulateIo, logger?: Logger): Promise<number> {
  const now = Date.now();
  const parsed = parseFlags(raw, now);
  if ('error' in parsed) {
    for (const line of parsed.error.split('\n')) io.stderr(`simulate: ${line}`);
    return EXIT_USAGE;
  }
  const level = LOG_LEVELS.find((l) => l === (raw.logLevel ?? process.env.LOG_LEVEL ?? 'info')) ?? 'info';
  const format = LOG_FORMATS.find((f) => f === (raw.logFormat ?? process.env.LOG_FORMAT ?? 'auto')) ?? 'auto';
  const log = logger ?? createLogger(level, format);
  const options = simulatorOptions(parsed.flags, log, now);

  let simulator;
  try {
    simulator = await startSimulator(options);
  } catch (err) {
    if (err instanceof InvalidArgumentError) {
      io.stderr(`simulate: ${err.message}`);
      return EXIT_USAGE;
    }
    io.stderr(`simulate: cannot listen on ${options.host}:${options.port}: ${describeError(err)}`);
    return EXIT_FAILURE;
  }

  const { url, dataset } = simulator;
  const id = options.clientId ?? DEFAULT_CLIENT_ID;
  const secret = options.clientSecret ?? DEFAULT_CLIENT_SECRET;
  io.stdout(
    `simulator (demo data) listening on ${url}: STATISTICS_URL=${url} AUTH_URL=${url} CLIENT_ID=${id} CLIENT_SECRET=${secret} TOKEN_SCOPE=${options.scope ?? DEFAULT_SCOPE}`,
  );
  log.info(
    {
      url,
      records: dataset.baseRecords,
      start: dataset.start.toISOString(),
      end: dataset.end.toISOString(),
      customers: dataset.customerCount,
      faults: simulator.faults,
    },
    'simulator started',
  );
  io.onListening?.(url);

  await new Promise<void>((resolve) => {
    let stopping = false;
    const stop = (reason: string): void => {
      if (stopping) return;
      stopping = true;
      io.signal?.removeEventListener('abort', onAbort);
      log.info({ reason }, 'simulator stopping');
      void simulator.close().then(() => {
        shutdown?.dispose();
        resolve();
      });
    };
    const onAbort = (): void => stop('aborted');
    // A connection that refuses to close must not keep the process alive forever.
    const shutdown =
      io.handleSignals === true
        ? handleShutdownSignals({ log, stop: (signal) => stop(signal), forcedExitAfterMs: FORCED_EXIT_AFTER_MS, exitCode: EXIT_FAILURE })
        : undefined;
    if (io.signal?.aborted) stop('aborted');
    else io.signal?.addEventListener('abort', onAbort, { once: true });
  });
  return EXIT_OK;
}

/**
 * Gives a command (the `analytics-simulator` program itself, or the exporter's `simulate`) every
 * flag with help text and the action, validated with zod when the command runs. An invalid value
 * prints `simulate: --flag rule; got value` to stderr and sets `process.exitCode = 2`; a start
 * failure sets 1. Reads `--client-id`, `--log-level` and `--log-format` also from the parent
 * program's flags of those names.
 */
export function configureSimulateCommand(command: Command): void {
  for (const [, flag, help] of FLAGS) command.option(flag, help);
  command.addHelpText(
    'after',
    [
      '',
      'Durations take units: ms, s, m, h, d, w (e.g. 250ms, 1h30m).',
      'Prints one line with the URL and the demo credentials, then serves until Ctrl-C.',
      'Exit status: 0 after a clean stop, 1 when it cannot listen, 2 for an invalid flag value.',
    ].join('\n'),
  );
  command.action(async (_options: unknown, cmd: Command) => {
    const code = await runSimulate(cmd.optsWithGlobals(), {
      stdout: (line) => process.stdout.write(`${line}\n`),
      stderr: (line) => process.stderr.write(`${line}\n`),
      handleSignals: true,
    });
    process.exitCode = code;
  });
}
