/**
 * The soak's two sources: each an in-process simulator with its own seed, client id, secret and
 * data, listed in the CONFIG_FILE that `serve` and the final `sync` read.
 *
 * Each dataset is dense from an hour before the soak to past its end (new windows keep becoming
 * due) and sparse before that, back to SYNC_START_DATE, so the first run's backfill of more than a
 * day stays small: the dense part is the dataset's base records, the sparse part records inserted
 * into it ({@link Simulator.insertRecords}), which every query merges like base records.
 * `beta` serves E6 in `ties` order (records on one instant reshuffled per request) with
 * timestamps on a 10-second grid, so about a hundred records share every instant.
 */
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startSimulator, type RecordOrder, type Simulator } from '@analytics-exporter/simulator';

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
}

/** How a soak source differs from the other. */
interface SourceSpec {
  name: string;
  seed: number;
  order: RecordOrder;
  timePrecisionMs: number;
  recordsPerSecond: number;
}

/**
 * `alpha`: stable order, whole seconds. `beta`: ties reshuffled per request, 10-second grid (about
 * 100 records an instant at 10 records a second: dense, yet below SYNC_PAGE_SIZE, which an
 * instant must fit in when its order is not stable).
 */
const SPECS: readonly SourceSpec[] = [
  { name: 'alpha', seed: 1101, order: 'stable', timePrecisionMs: 1_000, recordsPerSecond: 10 },
  { name: 'beta', seed: 2202, order: 'ties', timePrecisionMs: 10_000, recordsPerSecond: 10 },
];

/** Sparse records per hour before the dense part. */
const SPARSE_PER_HOUR = 40;
/** Extra sparse records in [start, firstDayEnd): the partition retention drops must hold a few whatever the hour. */
const FIRST_DAY_RECORDS = 60;

export const SOAK_SCOPE = 'api.external';

/**
 * Starts one simulator per source and writes CONFIG_FILE (and each secret in a file beside it) to `dir`.
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
  const lines = ['sources:'];
  for (const spec of SPECS) {
    const credentials = { clientId: `soak-${spec.name}`, clientSecret: randomBytes(18).toString('base64url'), scope: SOAK_SCOPE };
    const sim = await startSimulator({
      seed: spec.seed,
      records: Math.round(((range.end.getTime() - range.denseStart.getTime()) / 1000) * spec.recordsPerSecond),
      start: range.denseStart,
      end: range.end,
      timePrecisionMs: spec.timePrecisionMs,
      order: spec.order,
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
    lines.push(
      `  - name: ${spec.name}`,
      `    statistics_url: ${sim.url}`,
      `    auth_url: ${sim.url}`,
      `    client_id: ${credentials.clientId}`,
      `    client_secret_file: ${secretFile}`,
      `    scope: ${SOAK_SCOPE}`,
      '    labels:',
      `      environment: soak-${spec.name}`,
    );
    sources.push({
      name: spec.name,
      sim,
      credentials,
      order: spec.order,
      timePrecisionMs: spec.timePrecisionMs,
      recordsPerSecond: spec.recordsPerSecond,
      sparseRecords: sparse.length,
    });
  }
  const configFile = join(dir, 'sources.yaml');
  writeFileSync(configFile, `${lines.join('\n')}\n`);
  return { sources, configFile };
}
