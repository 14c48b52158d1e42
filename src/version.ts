import { readFileSync } from 'node:fs';

/** The package version, read from package.json beside `dist/` (built) or `src/` (tests). */
export const VERSION: string = (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version;

/**
 * The source revision: the REVISION environment variable (set by the container build), else the
 * `revision.txt` that `npm run build` writes beside the compiled files, else `unknown`.
 */
export const REVISION: string = process.env.REVISION?.trim() || readRevisionFile() || 'unknown';

function readRevisionFile(): string | undefined {
  try {
    return readFileSync(new URL('./revision.txt', import.meta.url), 'utf8').trim() || undefined;
  } catch {
    return undefined;
  }
}
