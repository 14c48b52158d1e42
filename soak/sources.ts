/**
 * The soak's sources: each an in-process simulator with its own seed, client id, secret, data and
 * upstream behaviours, listed in the CONFIG_FILE that both `serve` replicas and the final `sync`
 * read.
 *
 * - `alpha`: stable order, whole seconds; the fault driver gives it 503s and 429s (soak/faults.ts).
 * - `beta`: ties reshuffled per request on a 10-second grid (about 100 records an instant at 10 a
 *   second: below SYNC_PAGE_SIZE, which an instant must fit in when its order is not stable), E6
 *   filtering on a hidden time up to 2 minutes either side of each timestamp, `toDate` inclusive.
 * - `gamma`: at most 250 records a page whatever `pageSize` asks, one record in 5,000 holding a
 *   number PostgreSQL's `numeric` refuses, late records and deletions days back (soak/late.ts).
 * - `delta`: no fault; started with the others but written into the CONFIG_FILE only at the
 *   reload a third of the way in (soak/timeline.ts).
 *
 * Each dataset is dense from an hour before the soak to past its end (new windows keep becoming
 * due) and sparse before that, back to SYNC_START_DATE: the dense part is the dataset's base
 * records, the sparse part records inserted into it ({@link Simulator.insertRecords}).
 */
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startSimulator, type RecordOrder, type Simulator, type SimulatorOptions } from '@analytics-exporter/simulator';

/** One source of the soak: its CONFIG_FILE name, its simulator and the client the simulator accepts. */
export interface SoakSource {
  name: string;
  sim: Simulator;
  credentials: { clientId: string; clientSecret: string; scope: string };
  order: RecordOrder;
  /** Timestamps of its records are multiples of this (1000: whole seconds). */
  timePrecisionMs: number;
  /** Records of the dense part per second, and records inserted into the sparse part. */
  recordsPerSecond: number;
  sparseRecords: number;
  /** Its upstream behaviours and faults, one line for the report. */
  behaviour: string;
  /** Whether it is in the CONFIG_FILE from the start (`delta` is added by a reload). */
  atStart: boolean;
  secretFile: string;
}

/** How a soak source differs from the others. */
interface SourceSpec {
  name: string;
  seed: number;
  order: RecordOrder;
  timePrecisionMs: number;
  recordsPerSecond: number;
  options: Partial<SimulatorOptions>;
  behaviour: string;
  atStart: boolean;
}

/** Records with an out-of-range number in gamma: one in this many. */
export const REFUSED_EVERY = 5_000;
/** gamma's page-size cap, and beta's hidden filter-time lag. */
const GAMMA_PAGE_CAP = 250;
const BETA_FILTER_LAG_MS = 2 * 60_000;

const SPECS: readonly SourceSpec[] = [
  {
    name: 'alpha',
    seed: 1101,
    order: 'stable',
    timePrecisionMs: 1_000,
    recordsPerSecond: 10,
    options: {},
    behaviour: 'stable order; 503s, 429s and the fault rotation',
    atStart: true,
  },
  {
    name: 'beta',
    seed: 2202,
    order: 'ties',
    timePrecisionMs: 10_000,
    recordsPerSecond: 10,
    options: { filterTimeLagMs: BETA_FILTER_LAG_MS, toDate: 'inclusive' },
    behaviour: `ties order on a 10 s grid, filter time up to ${BETA_FILTER_LAG_MS / 60_000} min either side, toDate inclusive`,
    atStart: true,
  },
  {
    name: 'gamma',
    seed: 3303,
    order: 'stable',
    timePrecisionMs: 1_000,
    recordsPerSecond: 10,
    options: { pageSizeCap: GAMMA_PAGE_CAP, outOfRangeEvery: REFUSED_EVERY },
    behaviour: `page-size cap ${GAMMA_PAGE_CAP}, one record in ${REFUSED_EVERY} with a number PostgreSQL refuses, late records and deletions days back (SYNC_SHRINK=keep)`,
    atStart: true,
  },
  {
    name: 'delta',
    seed: 4404,
    order: 'stable',
    timePrecisionMs: 1_000,
    recordsPerSecond: 5,
    options: {},
    behaviour: 'no fault; added to CONFIG_FILE by a SIGHUP reload',
    atStart: false,
  },
];

/** Sparse records per hour before the dense part. */
const SPARSE_PER_HOUR = 40;
/** Extra sparse records in [start, firstDayEnd): the partition retention drops must hold a few whatever the hour. */
const FIRST_DAY_RECORDS = 60;

export const SOAK_SCOPE = 'api.external';

/** What the CONFIG_FILE holds: which sources, and alpha's `sync.schedule` (none: SYNC_SCHEDULE). */
export interface ConfigState {
  withDelta: boolean;
  alphaSchedule: string | undefined;
}

/**
 * Writes the CONFIG_FILE for `state` (atomically: a new file renamed over the old would change
 * the inode; a reload reads the whole file at once, so a plain write is enough here).
 */
export function writeConfig(file: string, sources: readonly SoakSource[], state: ConfigState): void {
  const lines = ['sources:'];
  for (const x of sources) {
    if (!x.atStart && !state.withDelta) continue;
    lines.push(
      `  - name: ${x.name}`,
      `    statistics_url: ${x.sim.url}`,
      `    auth_url: ${x.sim.url}`,
      `    client_id: ${x.credentials.clientId}`,
      `    client_secret_file: ${x.secretFile}`,
      `    scope: ${SOAK_SCOPE}`,
      '    labels:',
      `      environment: soak-${x.name}`,
    );
    if (x.name === 'alpha' && state.alphaSchedule !== undefined) lines.push('    sync:', `      schedule: '${state.alphaSchedule}'`);
  }
  writeFileSync(file, `${lines.join('\n')}\n`);
}

/**
 * Starts one simulator per source and writes CONFIG_FILE (without `delta`; each secret in a file beside it) to `dir`.
 *
 * @param start SYNC_START_DATE: the first record may lie here.
 * @param firstDayEnd the end of the partition RETENTION drops (a UTC midnight after `start`).
 * @param denseStart where the dense part starts (after `firstDayEnd`); `end` where every dataset ends.
 * @returns the sources and the path of the config file.
 * @throws {InvalidArgumentError} from the simulator for an empty range.
 */
export async function startSources(
  dir: string,
  range: { start: Date; firstDayEnd: Date; denseStart: Date; end: Date },
): Promise<{ sources: SoakSource[]; configFile: string }> {
  const sources: SoakSource[] = [];
  for (const spec of SPECS) {
    const credentials = { clientId: `soak-${spec.name}`, clientSecret: randomBytes(18).toString('base64url'), scope: SOAK_SCOPE };
    const sim = await startSimulator({
      seed: spec.seed,
      records: Math.round(((range.end.getTime() - range.denseStart.getTime()) / 1000) * spec.recordsPerSecond),
      start: range.denseStart,
      end: range.end,
      timePrecisionMs: spec.timePrecisionMs,
      order: spec.order,
      ...spec.options,
      ...credentials,
    });
    const sparseHours = (range.denseStart.getTime() - range.start.getTime()) / 3_600_000;
    const sparse = [
      ...sim.dataset.plausibleRecords(FIRST_DAY_RECORDS, range.start, range.firstDayEnd, false, spec.seed),
      ...sim.dataset.plausibleRecords(Math.round(sparseHours * SPARSE_PER_HOUR), range.firstDayEnd, range.denseStart, false, spec.seed + 1),
    ];
    sim.insertRecords(sparse);
    const secretFile = `${spec.name}.secret`;
    writeFileSync(join(dir, secretFile), credentials.clientSecret, { mode: 0o600 });
    sources.push({
      name: spec.name,
      sim,
      credentials,
      order: spec.order,
      timePrecisionMs: spec.timePrecisionMs,
      recordsPerSecond: spec.recordsPerSecond,
      sparseRecords: sparse.length,
      behaviour: spec.behaviour,
      atStart: spec.atStart,
      secretFile,
    });
  }
  const configFile = join(dir, 'sources.yaml');
  writeConfig(configFile, sources, { withDelta: false, alphaSchedule: undefined });
  return { sources, configFile };
}
