/**
 * The `state` commands: a source's state read, its watermark moved, its windows marked for re-load,
 * each under the lock a run of the source takes, tried and never waited for (a busy source is
 * reported locked). Design: docs/design/ledger.md.
 */
import type { Config, SourceConfig } from '../config.js';
import { migratePending, requireMigrated } from '../db/migrate.js';
import type { Pool } from '../db/pool.js';
import type { Logger } from '../log.js';
import { sourceLockName } from '../sync/run/context.js';
import type { ReloadMarks, SourceState, WatermarkMove, WindowGroup } from '../sync/store/ports.js';
import type { PgLedger } from '../sync/store/pg/ledger.js';
import { iso, type Window } from '../sync/windows.js';
import { storeOf } from './runtime.js';

/** A value, or the source whose lock another process holds. */
export type UnderLock<T> = { locked: false; value: T } | { locked: true; source: string };

/** `fn` in one transaction under `source`'s lock, tried once. */
async function underSourceLock<T>(
  on: { pool: Pool; config: Config; log: Logger },
  source: string,
  fn: (ledger: PgLedger) => Promise<T>,
): Promise<UnderLock<T>> {
  return storeOf(on.pool, on.config, on.log).session(async (session) => {
    const lockName = sourceLockName(on.config.database.schema, source);
    const held = await session.lock(lockName, { wait: false }, () => session.transaction(() => fn(session.ledger(source))));
    return held.acquired ? { locked: false, value: held.value } : { locked: true, source };
  });
}

/**
 * @returns the states in `sources`' order, or the first source whose lock is held (nothing is read after it).
 * Reads only (SELECT is enough); never migrates.
 * @throws the database's error; {@link PendingMigrationsError} naming the pending migrations.
 */
export async function showState(pool: Pool, config: Config, log: Logger, sources: readonly SourceConfig[]): Promise<UnderLock<SourceState[]>> {
  await requireMigrated(pool, config.database.schema);
  const states: SourceState[] = [];
  for (const source of sources) {
    const read = await underSourceLock({ pool, config, log }, source.name, (ledger) => ledger.state());
    if (read.locked) return read;
    states.push(read.value);
  }
  return { locked: false, value: states };
}

/** From START_DATE when there is none. @throws {InvalidArgumentError} forward past a stretch not loaded without `force`; the database's error. */
export async function moveWatermark(
  pool: Pool,
  config: Config,
  log: Logger,
  move: { source: SourceConfig; to: Date; force: boolean; now?: number },
): Promise<UnderLock<WatermarkMove>> {
  await migratePending(pool, config.database.schema, log, config.database.migrate);
  const start = move.source.sync.startDate;
  const origin = 'at' in start ? start.at.getTime() : (move.now ?? Date.now()) - start.agoMs;
  return underSourceLock({ pool, config, log }, move.source.name, (ledger) => ledger.setWatermark({ to: move.to.getTime(), force: move.force, origin }));
}

export async function resetWindows(pool: Pool, config: Config, log: Logger, reset: { source: SourceConfig; range: Window }): Promise<UnderLock<ReloadMarks>> {
  await migratePending(pool, config.database.schema, log, config.database.migrate);
  return underSourceLock({ pool, config, log }, reset.source.name, (ledger) => ledger.markForReload(reset.range));
}

const isoOrNull = (ms: number | undefined): string | null => (ms === undefined ? null : iso(ms));

const groupJson = (g: WindowGroup) => ({ count: g.count, from: isoOrNull(g.from), to: isoOrNull(g.to) });

/** `state show --json`, documented in docs/etl.md (State): instants ISO 8601 UTC, null when absent. */
export function stateJson(states: readonly SourceState[]): { sources: unknown[] } {
  return {
    sources: states.map((s) => ({
      source: s.source,
      watermark: isoOrNull(s.watermark),
      lastRun:
        s.lastRun === undefined
          ? null
          : {
              id: s.lastRun.id,
              status: s.lastRun.status,
              startedAt: iso(s.lastRun.startedAt),
              finishedAt: isoOrNull(s.lastRun.finishedAt),
              error: s.lastRun.error ?? null,
            },
      windows: {
        committed: { ...groupJson(s.windows.committed), records: s.windows.committed.records },
        parked: groupJson(s.windows.parked),
        expired: groupJson(s.windows.expired),
        reloadRequested: groupJson(s.windows.reloadRequested),
        ...(s.windows.short ? { short: { ...groupJson(s.windows.short), claimed: s.windows.short.claimed, served: s.windows.short.served } } : {}),
      },
      verifiedThrough: isoOrNull(s.verified.through),
      verifiedAt: isoOrNull(s.verified.at),
    })),
  };
}

/** `3 windows in [from, to)`, or `none`. */
function groupText(g: WindowGroup): string {
  if (g.count === 0) return 'none';
  return `${g.count} window${g.count === 1 ? '' : 's'} in [${iso(g.from!)}, ${iso(g.to!)})`;
}

/** Short windows and what E6 claimed and served in them, or `none`. */
function shortText(g: WindowGroup & { claimed: number; served: number }): string {
  return g.count === 0 ? 'none' : `${groupText(g)}: E6 claimed ${g.claimed} records, served ${g.served} (stored)`;
}

/** One block per source, labels aligned. */
export function formatStateText(states: readonly SourceState[]): string {
  const blocks = states.map((s) => {
    const run = s.lastRun;
    const lines: [string, string][] = [
      ['watermark', s.watermark === undefined ? 'none (no window loaded yet)' : iso(s.watermark)],
      [
        'last run',
        run === undefined
          ? 'none'
          : `#${run.id} ${run.status}, started ${iso(run.startedAt)}, ${run.finishedAt === undefined ? 'not finished' : `finished ${iso(run.finishedAt)}`}`,
      ],
      ...(run?.error === undefined ? [] : [['last error', run.error] as [string, string]]),
      ['committed', s.windows.committed.count === 0 ? 'none' : `${groupText(s.windows.committed)}, ${s.windows.committed.records} records`],
      ['parked', groupText(s.windows.parked)],
      ['expired', groupText(s.windows.expired)],
      ['marked for re-load', groupText(s.windows.reloadRequested)],
      ...(s.windows.short === undefined ? [] : [['short', shortText(s.windows.short)] as [string, string]]),
      [
        'verified through',
        s.verified.at === undefined
          ? 'no full audit recorded yet (verify)'
          : `${s.verified.through === undefined ? 'none: the first window audited differs' : iso(s.verified.through)} (audit of ${iso(s.verified.at)})`,
      ],
    ];
    const width = Math.max(...lines.map(([label]) => label.length));
    return [`source ${s.source}`, ...lines.map(([label, value]) => `  ${label.padEnd(width)}  ${value}`)].join('\n');
  });
  return blocks.length === 0 ? 'no source configured\n' : `${blocks.join('\n\n')}\n`;
}
