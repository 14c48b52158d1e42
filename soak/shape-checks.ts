/**
 * The end checks of what issue 41 added to the soak: the windows its data makes parked (epsilon)
 * and short (delta), listed with their reasons and nothing else parked or short; the maintenance
 * session's lock (the wait logged and counted, scrapes answered meanwhile); and the runtime role
 * (serve's connections never the owner's). Each returns {@link Check}s for soak/checks.ts.
 */
import { readFileSync } from 'node:fs';
import type pg from 'pg';
import { MAINTENANCE_APPLICATION, MAINTENANCE_HOLD_MS, type MaintenanceRecord } from './maintenance.js';
import type { Check } from './report.js';
import { OWNER_ROLE, RUNTIME_ROLE } from './roles.js';
import type { SoakSource } from './sources.js';
import type { Replica, ReplicaSample } from './timeline.js';
import type { WindowCheck } from './verify.js';

const iso = (d: Date) => d.toISOString();
const span = (w: { start: Date; end: Date }) => `[${iso(w.start)}, ${iso(w.end)})`;

/**
 * Per source with windows its data makes parked or short: exactly those, with their reasons and
 * counts; and over every source, no other window parked (unless it holds quarantined records, as
 * before) or short.
 */
export function shapeChecks(sources: readonly SoakSource[], windowChecks: Record<string, WindowCheck | undefined>): Check[] {
  const checks: Check[] = [];
  const unexpected: string[] = [];
  for (const x of sources) {
    const w = windowChecks[x.name];
    if (w === undefined) continue;
    const wantParked = new Map(x.expectedParked.map((p) => [p.start.getTime(), p]));
    const wantShort = new Set(x.expectedShort.map((d) => d.getTime()));
    for (const p of w.parked) if (!wantParked.has(p.start.getTime())) unexpected.push(`${x.name} ${span(p)} parked: ${p.reason.slice(0, 160)}`);
    for (const sh of w.short)
      if (!wantShort.has(sh.start.getTime())) unexpected.push(`${x.name} ${span(sh)} short (claimed ${sh.claimed}, served ${sh.served})`);
    if (x.expectedParked.length > 0) {
      const lines = x.expectedParked.map((want) => {
        const got = w.parked.find((p) => p.start.getTime() === want.start.getTime());
        const ok = got !== undefined && want.reason.test(got.reason);
        const missing =
          w.watermark === undefined || want.start.getTime() >= w.watermark.getTime()
            ? `not in the ledger: the watermark stopped at ${w.watermark ? iso(w.watermark) : 'none'}`
            : 'committed';
        return {
          ok,
          text: `${iso(want.start)} ${got ? `parked (${want.records} records upstream, none stored): ${got.reason.slice(0, 200)}` : `NOT parked (${missing})`}`,
        };
      });
      checks.push({
        name: `${x.name}'s windows past its paging limit and where pageNumber is ignored parked, with their reasons`,
        pass: lines.every((l) => l.ok),
        detail: lines.map((l) => l.text).join('; '),
      });
    }
    if (x.expectedShort.length > 0) {
      const lines = x.expectedShort.map((start) => {
        const got = w.short.find((sh) => sh.start.getTime() === start.getTime());
        return {
          ok: got !== undefined && got.claimed > got.served,
          text: got ? `${span(got)} E6 claimed ${got.claimed}, served ${got.served}` : `${iso(start)} NOT short`,
        };
      });
      checks.push({
        name: `${x.name}'s windows whose totalRecords claims one more committed short, every served record stored`,
        pass: lines.every((l) => l.ok) && w.pass,
        detail: `${lines.map((l) => l.text).join('; ')}${w.pass ? '; the window check found every served record stored' : '; the window check failed'}`,
      });
    }
  }
  checks.push({
    name: 'no other window parked or short',
    pass: unexpected.length === 0,
    detail: unexpected.length ? unexpected.slice(0, 5).join('; ') : 'none',
  });
  return checks;
}

/** The warn lines of serve's logs (both replicas) saying a statement waits on a lock, with `blockers`. */
function lockWaitLines(
  replicas: readonly Replica[],
): { relation?: string; mode?: string; waitedMs?: number; blockers?: { applicationName?: string }[]; source?: string }[] {
  const out = [];
  for (const r of replicas) {
    let text = '';
    try {
      text = readFileSync(r.logFile, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n')) {
      if (!line.includes('waits on a lock')) continue;
      try {
        out.push(JSON.parse(line) as { relation?: string; mode?: string; waitedMs?: number; blockers?: { applicationName?: string }[]; source?: string });
      } catch {
        // Not JSON: not serve's line.
      }
    }
  }
  return out;
}

/** The sum over a replica's lives and the sources of database_lock_waits_total's last value in each life. */
function lockWaitsCounted(samples: readonly ReplicaSample[]): number {
  const last = new Map<number, number>();
  for (const s of samples) {
    const sum = Object.values(s.sources).reduce((n, x) => n + (Number.isFinite(x.lockWaits) ? x.lockWaits : 0), 0);
    last.set(s.life, sum);
  }
  return [...last.values()].reduce((a, b) => a + b, 0);
}

/**
 * The maintenance session: it held the lock its 20 s, serve logged the wait naming the session and
 * counted it, and every scrape of both replicas while the lock was held answered 200.
 */
export function maintenanceChecks(m: MaintenanceRecord, replicas: readonly Replica[], schema: string): Check[] {
  const held = m.heldFrom !== undefined && m.heldTo !== undefined ? m.heldTo - m.heldFrom : Number.NaN;
  const lines = lockWaitLines(replicas).filter(
    (l) => (l.relation ?? '').startsWith(`${schema}.records`) && (l.blockers ?? []).some((b) => b.applicationName === MAINTENANCE_APPLICATION),
  );
  const counted = replicas.reduce((n, r) => n + lockWaitsCounted(r.samples), 0);
  const during = replicas.flatMap((r) =>
    r.samples.filter((x) => m.heldFrom !== undefined && x.t >= m.heldFrom && x.t <= (m.heldTo ?? Infinity)).map((x) => ({ r: r.name, x })),
  );
  const fmt = (v: number | undefined) => (v === undefined ? '?' : `${v.toFixed(0)} s`);
  return [
    {
      name: `a maintenance session held ACCESS EXCLUSIVE on records for ${MAINTENANCE_HOLD_MS / 1000} s: the wait logged and counted`,
      pass: m.error === undefined && held >= MAINTENANCE_HOLD_MS / 1000 - 1 && lines.length > 0 && counted > 0,
      detail:
        `${m.error ? `session failed: ${m.error}; ` : ''}asked at ${fmt(m.askedAt)}, held ${fmt(m.heldFrom)}–${fmt(m.heldTo)}; ` +
        `${lines.length} warn lines "a statement waits on a lock another process holds" naming ${MAINTENANCE_APPLICATION} ` +
        `(${[...new Set(lines.map((l) => `${l.source ?? '?'} ${l.relation} ${l.mode}`))].slice(0, 6).join(', ')}; longest waitedMs ${Math.max(0, ...lines.map((l) => l.waitedMs ?? 0))}); ` +
        `analytics_exporter_database_lock_waits_total over both replicas and sources ${counted}`,
    },
    {
      name: 'every scrape answered 200 while the lock was held',
      pass: during.length > 0 && during.every((d) => d.x.scrapeStatus === 200 && d.x.readyStatus === 200),
      detail: `${during.filter((d) => d.x.scrapeStatus === 200).length}/${during.length} scrapes 200 (/readyz 200 in ${during.filter((d) => d.x.readyStatus === 200).length}), slowest ${Math.max(0, ...during.map((d) => d.x.scrapeMs)).toFixed(0)} ms`,
    },
  ];
}

/**
 * The runtime role: every sample saw serve's connections log in as it alone, the schema belongs to
 * the owner role, and the runtime role cannot create in the database.
 */
export async function roleCheck(admin: pg.Client, schema: string, replicas: readonly Replica[]): Promise<Check> {
  const roles = new Set(replicas.flatMap((r) => r.samples.flatMap((x) => x.dbRoles.split('+').filter((v) => v !== ''))));
  const { rows } = await admin.query<{ schemaOwner: string; create: boolean; partitionOwners: string | null }>(
    `select n.nspowner::regrole::text as "schemaOwner", has_database_privilege($2, current_database(), 'CREATE') as create,
            (select string_agg(distinct c.relowner::regrole::text, ', ') from pg_inherits i join pg_class c on c.oid = i.inhrelid
              where i.inhparent = (quote_ident($1) || '.records')::regclass) as "partitionOwners"
       from pg_namespace n where n.nspname = $1`,
    [schema, RUNTIME_ROLE],
  );
  const row = rows[0];
  return {
    name: `both replicas ran as the runtime role ${RUNTIME_ROLE} (MIGRATE=off), ${OWNER_ROLE} ran migrate once before them`,
    pass: roles.size === 1 && roles.has(RUNTIME_ROLE) && row?.schemaOwner === OWNER_ROLE && row.create === false,
    detail:
      `serve's connections logged in as: ${[...roles].join(', ') || 'none seen'}; schema ${schema} owned by ${row?.schemaOwner ?? '?'}; ` +
      `${RUNTIME_ROLE} ${row?.create ? 'HAS' : 'has no'} CREATE on the database; records partitions owned by ${row?.partitionOwners ?? 'none'}`,
  };
}
