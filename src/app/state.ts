/**
 * The application layer of the `state` commands: each source's state read, its watermark moved, its
 * windows marked for re-load (the ledger: src/sync/store/pg/ledger.ts), each under the source's sync lock — the lock a
 * sync run of it takes (src/sync/run/context.ts sourceLockName) — tried, never waited for: a source
 * whose lock another process holds is reported as locked. The schema is migrated first, as by
 * every database command.
 */
import type { Config, SourceConfig } from '../config.js';
import { migrate } from '../db/migrate.js';
import type { Pool } from '../db/pool.js';
import type { Logger } from '../log.js';
import { sourceLockName } from '../sync/run/context.js';
import type { ReloadMarks, SourceState, WatermarkMove, WindowGroup } from '../sync/store/ports.js';
import type { PgLedger } from '../sync/store/pg/ledger.js';
import { iso, type Window } from '../sync/windows.js';
import { storeOf } from './runtime.js';

/** The outcome of work under a source's lock: its value, or the source whose lock another process holds. */
export type UnderLock<T> = { locked: false; value: T } | { locked: true; source: string };

/** Runs `fn` in one transaction on a connection holding `source`'s sync lock, tried once. */
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
 * The state of each of `sources`, in their order, each read under its own lock.
 *
 * @returns the states, or the first source whose lock another process holds (nothing else is read after it).
 * @throws the database's error; {@link ExporterError} `ERR_DATABASE` from the migrations.
 */
export async function showState(pool: Pool, config: Config, log: Logger, sources: readonly SourceConfig[]): Promise<UnderLock<SourceState[]>> {
  await migrate(pool, config.database.schema, log);
  const states: SourceState[] = [];
  for (const source of sources) {
    const read = await underSourceLock({ pool, config, log }, source.name, (ledger) => ledger.state());
    if (read.locked) return read;
    states.push(read.value);
  }
  return { locked: false, value: states };
}

/**
 * Moves `source`'s watermark to `to` (PgLedger.setWatermark: forward past a stretch not
 * loaded only with `force`), counting from the configured START_DATE when it has none.
 *
 * @throws {InvalidArgumentError} when refused (naming --force and the first unloaded stretch); the database's error.
 */
export async function moveWatermark(
  pool: Pool,
  config: Config,
  log: Logger,
  move: { source: SourceConfig; to: Date; force: boolean; now?: number },
): Promise<UnderLock<WatermarkMove>> {
  await migrate(pool, config.database.schema, log);
  const start = move.source.sync.startDate;
  const origin = 'at' in start ? start.at.getTime() : (move.now ?? Date.now()) - start.agoMs;
  return underSourceLock({ pool, config, log }, move.source.name, (ledger) => ledger.setWatermark({ to: move.to.getTime(), force: move.force, origin }));
}

/** Marks `source`'s windows overlapping `range` for re-load by its next resumed run (PgLedger.markForReload). */
export async function resetWindows(pool: Pool, config: Config, log: Logger, reset: { source: SourceConfig; range: Window }): Promise<UnderLock<ReloadMarks>> {
  await migrate(pool, config.database.schema, log);
  return underSourceLock({ pool, config, log }, reset.source.name, (ledger) => ledger.markForReload(reset.range));
}

/** ISO 8601 or null: the JSON form of an instant. */
const isoOrNull = (ms: number | undefined): string | null => (ms === undefined ? null : iso(ms));

/** A window group in the JSON shape. */
const groupJson = (g: WindowGroup) => ({ count: g.count, from: isoOrNull(g.from), to: isoOrNull(g.to) });

/**
 * `state show --json`: `{ "sources": [ … ] }`, one object per source of this shape (instants ISO
 * 8601 UTC, null when absent; documented in docs/etl.md, section State):
 * `{ source, watermark, lastRun: { id, status, startedAt, finishedAt, error } | null,
 *    windows: { committed: { count, from, to, records }, parked, expired, reloadRequested: { count, from, to } },
 *    verifiedThrough, verifiedAt }`.
 */
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
      },
      verifiedThrough: isoOrNull(s.verified.through),
      verifiedAt: isoOrNull(s.verified.at),
    })),
  };
}

/** A group for a person: `3 windows [from, to)`, or `none`. */
function groupText(g: WindowGroup): string {
  if (g.count === 0) return 'none';
  return `${g.count} window${g.count === 1 ? '' : 's'} in [${iso(g.from!)}, ${iso(g.to!)})`;
}

/** `state show` for a person: one block per source, one line per item, labels aligned. */
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
