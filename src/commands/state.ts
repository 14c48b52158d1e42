/**
 * `analytics-exporter state show|set-watermark|reset`: each source's sync state, read and repaired
 * without SQL (src/app/state.ts), under the source's sync lock, tried once: exit 1 naming the
 * source when another process holds it; exit 2 for bad usage, naming the flag.
 */
import type { Command } from 'commander';
import { z } from 'zod';
import type { Config, SourceConfig } from '../config.js';
import type { Pool } from '../db/pool.js';
import { InvalidArgumentError } from '../errors.js';
import type { Logger } from '../log.js';
import { selectSources } from '../app/sources.js';
import type { UnderLock } from '../app/state.js';
import { parseIsoDate } from '../time.js';
import { EXIT_USAGE, stateExitStatus } from './exit.js';
import { formatReloadMarks, formatWatermarkMove } from './format/state.js';
import { runDatabaseCommand } from './common.js';

/** ISO 8601 with a zone. */
function instant(flag: string) {
  return z.string({ error: `${flag} is required` }).transform((text, ctx) => {
    const date = parseIsoDate(text);
    if (date !== undefined) return date;
    ctx.addIssue({ code: 'custom', message: `${flag} must be an ISO 8601 date-time with a zone, such as 2026-11-01T00:00:00Z; got ${JSON.stringify(text)}` });
    return z.NEVER;
  });
}

const oneSource = z.string({ error: '--source NAME is required: the configured source to change' }).min(1, { error: '--source NAME must not be empty' });

export const showOptions = z.object({ source: z.array(z.string()).optional(), json: z.boolean().optional() });

/** With its ISO argument as `to`. */
export const setWatermarkOptions = z.object({ source: oneSource, force: z.boolean().optional(), to: instant('the argument <iso> (the new watermark)') });

export const resetOptions = z.object({ source: oneSource, from: instant('--from'), to: instant('--to') }).refine((o) => o.from < o.to, {
  error: (issue) => {
    const o = issue.input as { from: Date; to: Date };
    return `--from ${o.from.toISOString()} must be before --to ${o.to.toISOString()}`;
  },
});

/** Parses a subcommand's options; on a broken rule prints each message, sets exit status 2, returns undefined. */
function parseUsage<T>(what: string, schema: z.ZodType<T>, raw: unknown): T | undefined {
  const parsed = schema.safeParse(raw);
  if (parsed.success) return parsed.data;
  process.stderr.write(`analytics-exporter ${what}: ${parsed.error.issues.map((i) => i.message).join('; ')}\n`);
  process.exitCode = EXIT_USAGE;
  return undefined;
}

function lockedMessage(what: string, source: string): string {
  return (
    `analytics-exporter ${what}: source ${source}: another process holds its sync lock (a sync run, a scheduled run or audit of serve, ` +
    'verify, or another state command); nothing was done. Run it again when that ends.\n'
  );
}

/** runDatabaseCommand for `state`: the sources chosen first; a held lock or an {@link InvalidArgumentError} printed. */
async function runState<T>(
  command: Command,
  what: string,
  names: readonly string[],
  work: (pool: Pool, config: Config, log: Logger, sources: SourceConfig[]) => Promise<UnderLock<T>>,
  print: (value: T) => void,
): Promise<void> {
  let sources: SourceConfig[] = [];
  await runDatabaseCommand(
    command,
    what,
    async (pool, config, log) => {
      let done: UnderLock<T> | 'usage';
      try {
        done = await work(pool, config, log, sources);
      } catch (err) {
        if (!(err instanceof InvalidArgumentError)) throw err;
        process.stderr.write(`analytics-exporter ${what}: ${err.message}\n`);
        done = 'usage';
      }
      if (done !== 'usage' && done.locked) process.stderr.write(lockedMessage(what, done.source));
      else if (done !== 'usage') print(done.value);
      return stateExitStatus(done);
    },
    (config) => {
      sources = selectSources(config, names);
    },
    // Writes under the source's lock: refused behind a pooler sharing servers.
    { locks: what !== 'state show' },
  );
}

const EXIT_HELP = "\nExit status: 0 done; 1 another process holds the source's sync lock, or the database failed; 2 bad usage (the message names the flag).";

/** Adds `state show`, `state set-watermark` and `state reset`. */
export function registerStateCommand(program: Command): void {
  const state = program
    .command('state')
    .description("show and repair each source's sync state: watermark, last run, windows of the ledger (each under the source's sync lock)");
  registerShow(state);
  registerSetWatermark(state);
  registerReset(state);
}

function registerShow(state: Command): void {
  state
    .command('show')
    .description("print each source's watermark, last run, windows by state (committed, parked, expired, marked for re-load) and verified-through")
    .option('--source <name>', 'this configured source only (repeatable; default: every source)', (name: string, names: string[] | undefined) => [
      ...(names ?? []),
      name,
    ])
    .option('--json', 'print JSON: {"sources": [...]} in the shape docs/etl.md documents (section State)')
    .addHelpText('after', EXIT_HELP)
    .action(async (raw: unknown, command: Command) => {
      const options = parseUsage('state show', showOptions, raw);
      if (options === undefined) return;
      const { formatStateText, showState, stateJson } = await import('../app/state.js');
      await runState(
        command,
        'state show',
        options.source ?? [],
        (pool, config, log, sources) => showState(pool, config, log, sources),
        (states) => process.stdout.write(options.json ? `${JSON.stringify(stateJson(states), null, 2)}\n` : formatStateText(states)),
      );
    });
}

function registerSetWatermark(state: Command): void {
  state
    .command('set-watermark')
    .description(
      "move a source's watermark: the next run re-reads from it (minus SYNC_LOOKBACK); forward past windows not loaded only with --force, which skips them",
    )
    .argument('<iso>', 'the new watermark, ISO 8601 with a zone, such as 2026-11-01T00:00:00Z')
    .option('--source <name>', 'the configured source (required)')
    .option('--force', 'move it forward even past windows that are not loaded (gaps, parked windows): the next runs will not load them')
    .addHelpText('after', EXIT_HELP)
    .action(async (iso: string, raw: Record<string, unknown>, command: Command) => {
      const options = parseUsage('state set-watermark', setWatermarkOptions, { ...raw, to: iso });
      if (options === undefined) return;
      const { moveWatermark } = await import('../app/state.js');
      await runState(
        command,
        'state set-watermark',
        [options.source],
        (pool, config, log, [source]) => moveWatermark(pool, config, log, { source: source!, to: options.to, force: options.force ?? false }),
        (move) => process.stdout.write(formatWatermarkMove(options.source, move)),
      );
    });
}

function registerReset(state: Command): void {
  state
    .command('reset')
    .description(
      "mark a source's windows overlapping [--from, --to) for re-load: the next sync of the source (or serve's next scheduled run) loads them again, parked ones included",
    )
    .option('--source <name>', 'the configured source (required)')
    .option('--from <iso>', 'start of the range, ISO 8601 with a zone (required)')
    .option('--to <iso>', 'end of the range, ISO 8601 with a zone, after --from (required)')
    .addHelpText(
      'after',
      `\nWhole ledger windows are marked; their records stay until the re-load replaces them, and the watermark does not move.\nExpired windows (RETENTION dropped their records) are left as they are: sync --from/--to loads them.${EXIT_HELP}`,
    )
    .action(async (raw: unknown, command: Command) => {
      const options = parseUsage('state reset', resetOptions, raw);
      if (options === undefined) return;
      const { resetWindows } = await import('../app/state.js');
      await runState(
        command,
        'state reset',
        [options.source],
        (pool, config, log, [source]) =>
          resetWindows(pool, config, log, { source: source!, range: { start: options.from.getTime(), end: options.to.getTime() } }),
        (marks) => process.stdout.write(formatReloadMarks(options.source, options, marks)),
      );
    });
}
