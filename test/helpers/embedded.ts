/**
 * Embedded-database folders for tests that start commands without DATABASE_URL. PGlite's first
 * start in an empty folder runs initdb in WebAssembly (about 4.7 s of CPU, against 0.5 s to open an
 * existing database), so tests that are not about that first start get a copy of one folder
 * initialised once per test run. The first start itself stays covered by serve.test.ts's
 * `npm start` case, which uses an empty folder.
 */
import { cpSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { pgliteOptions } from '../../src/db/pglite-options.js';
import { until } from './wait.js';

/**
 * The run's template folder. Test files run in worker processes forked by vitest's main process,
 * so the parent's pid names one run; the global setup (that same main process) removes it.
 */
export function pgliteTemplateDir(runPid = process.ppid): string {
  return join(tmpdir(), `ae-pglite-template-${runPid}`);
}

const READY = 'ready';

/** Creates the run's template once: the first caller initialises it, the others wait for it. */
async function template(): Promise<string> {
  const dir = pgliteTemplateDir();
  const data = join(dir, 'data');
  if (existsSync(join(dir, READY))) return data;
  let creator = false;
  try {
    mkdirSync(dir); // atomic: one worker wins
    creator = true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
  if (creator) {
    // The exporter's own options: initdb's WAL segment size is fixed in the folder it creates.
    const db = await PGlite.create(pgliteOptions(data));
    await db.close();
    writeFileSync(join(dir, READY), '');
    return data;
  }
  await until('the PGlite template of this run', async () => (existsSync(join(dir, READY)) ? true : undefined), 120_000, 50);
  return data;
}

/**
 * A new folder holding an initialised, empty PGlite database (no schema, not migrated), for
 * DATA_DIR. The caller removes it (or leaves it to the OS's temp cleaning).
 *
 * @param prefix of the temp folder's name.
 */
export async function initialisedDataDir(prefix = 'ae-embedded-'): Promise<string> {
  const source = await template();
  const dir = mkdtempSync(join(tmpdir(), prefix));
  cpSync(source, dir, { recursive: true });
  return dir;
}

/** Removes the run's template (global teardown). */
export function removePgliteTemplate(runPid: number): void {
  rmSync(pgliteTemplateDir(runPid), { recursive: true, force: true });
}
