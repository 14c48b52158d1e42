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
 * - `delta`: started with the others but written into the CONFIG_FILE only at the reload a third
 *   of the way in (soak/timeline.ts); E6's `totalRecords` claims one record more than it serves in
 *   three windows of its sparse part (they are committed short, every served record stored).
 * - `epsilon`: E6 refuses pages from offset 2,000 (HTTP 400 `Result window is too large`), and
 *   ignores `pageNumber` at one instant: an instant of 20,000 records and one of 1,200 among
 *   ordinary data, whose windows are parked (`paging_limit`, `pages_repeat`).
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
  /** Windows its data makes parked, by start, with the reason the ledger must give, and those committed short. */
  expectedParked: ExpectedParked[];
  expectedShort: Date[];
}

/** A window a soak source's data makes parked: its start, the `reason` the ledger starts with, and the records it holds upstream. */
export interface ExpectedParked {
  start: Date;
  reason: RegExp;
  records: number;
}

/** Where a source's data is: the soak's range (see {@link startSources}) and SYNC_WINDOW. */
interface DataRange {
  start: Date;
  firstDayEnd: Date;
  denseStart: Date;
  end: Date;
  windowMs: number;
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
  /** Shapes the data and range faults once the sparse part is in, and says which windows they make parked or short. */
  shape?: (sim: Simulator, range: DataRange) => { parked: ExpectedParked[]; short: Date[] };
}

/** Records with an out-of-range number in gamma: one in this many. */
export const REFUSED_EVERY = 5_000;
/** gamma's page-size cap, and beta's hidden filter-time lag. */
const GAMMA_PAGE_CAP = 250;
const BETA_FILTER_LAG_MS = 2 * 60_000;
/** epsilon's paging limit, its instant past it, and its instant where pageNumber is ignored (more than a page, less than the limit). */
const DEEP_PAGE_LIMIT = 2_000;
const DEEP_INSTANT_RECORDS = 20_000;
const REPEAT_INSTANT_RECORDS = 1_200;
/** Windows of delta's sparse part whose count lies (one too many). */
const SHORT_WINDOWS = 3;

/** Start of the window (tiling from `range.start`) holding `ms`. */
const windowOf = (ms: number, range: DataRange): Date =>
  new Date(range.start.getTime() + Math.floor((ms - range.start.getTime()) / range.windowMs) * range.windowMs);

/**
 * epsilon: 20,000 records at an instant 17 min 7 s into the dense part (E6 refuses its pages from
 * offset 2,000), and 1,200 at 32 min 13 s where E6 ignores pageNumber (range fault).
 */
function shapeEpsilon(sim: Simulator, range: DataRange): { parked: ExpectedParked[]; short: Date[] } {
  const deepAt = new Date(range.denseStart.getTime() + 17 * 60_000 + 7_000);
  const repeatAt = new Date(range.denseStart.getTime() + 32 * 60_000 + 13_000);
  sim.insertRecords(sim.dataset.plausibleRecords(DEEP_INSTANT_RECORDS, deepAt, deepAt, true, 5_000_001));
  sim.insertRecords(sim.dataset.plausibleRecords(REPEAT_INSTANT_RECORDS, repeatAt, repeatAt, true, 5_000_002));
  sim.faults.inRanges = [{ from: repeatAt, to: repeatAt, ignorePageNumber: true }];
  const parked = [
    { at: deepAt, reason: /paging limit|Result window is too large/ },
    { at: repeatAt, reason: /^pages repeat/ },
  ].map(({ at, reason }) => {
    const start = windowOf(at.getTime(), range);
    return { start, reason, records: sim.dataset.count(start, new Date(start.getTime() + range.windowMs), false) };
  });
  return { parked, short: [] };
}

/**
 * delta: E6's count one too many in the first {@link SHORT_WINDOWS} windows of its sparse part
 * after the day retention drops that hold records (a window E6 serves nothing for would read as
 * a paging limit). Each range stays inside its window, clear of the boundary sets at its cuts.
 */
function shapeDelta(sim: Simulator, range: DataRange): { parked: ExpectedParked[]; short: Date[] } {
  const short: Date[] = [];
  for (let ms = range.firstDayEnd.getTime(); short.length < SHORT_WINDOWS && ms < range.denseStart.getTime(); ms += range.windowMs) {
    if (sim.dataset.count(new Date(ms), new Date(ms + range.windowMs), false) > 0) short.push(new Date(ms));
  }
  sim.faults.inRanges = short.map((w) => ({ from: new Date(w.getTime() + 1_000), to: new Date(w.getTime() + range.windowMs - 1_000), totalRecordsExtra: 1 }));
  return { parked: [], short };
}

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
    behaviour: `added to CONFIG_FILE by a SIGHUP reload; totalRecords one too many in ${SHORT_WINDOWS} windows of its sparse part (committed short)`,
    atStart: false,
    shape: shapeDelta,
  },
  {
    name: 'epsilon',
    seed: 5505,
    order: 'stable',
    timePrecisionMs: 1_000,
    recordsPerSecond: 2,
    options: { faults: { deepPages: { fromOffset: DEEP_PAGE_LIMIT, answer: 'refuse' } } },
    behaviour:
      `E6 refuses pages from offset ${DEEP_PAGE_LIMIT} (400 Result window is too large) and holds ${DEEP_INSTANT_RECORDS} records at one instant; ` +
      `ignores pageNumber at another instant of ${REPEAT_INSTANT_RECORDS} records: those two windows parked`,
    atStart: true,
    shape: shapeEpsilon,
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
 * @param range.firstDayEnd the end of the partition RETENTION drops (a UTC midnight after `start`).
 * @param range.denseStart where the dense part starts (after `firstDayEnd`); `end` where every dataset ends; `windowMs` SYNC_WINDOW.
 * @returns the sources and the path of the config file.
 * @throws {InvalidArgumentError} from the simulator for an empty range.
 */
export async function startSources(dir: string, range: DataRange): Promise<{ sources: SoakSource[]; configFile: string }> {
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
    const shaped = spec.shape?.(sim, range) ?? { parked: [], short: [] };
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
      expectedParked: shaped.parked,
      expectedShort: shaped.short,
    });
  }
  const configFile = join(dir, 'sources.yaml');
  writeConfig(configFile, sources, { withDelta: false, alphaSchedule: undefined });
  return { sources, configFile };
}
