/** The package version and source revision, as `/metrics` and `--version` show them. */
import { readFileSync } from 'node:fs';

/** From package.json beside `dist/` or `src/`. */
export const VERSION: string = (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version;

/** REVISION (set by the container build), else `npm run build`'s `revision.txt`, else `unknown`. */
export const REVISION: string = process.env.REVISION?.trim() || readRevisionFile() || 'unknown';

function readRevisionFile(): string | undefined {
  try {
    return readFileSync(new URL('./revision.txt', import.meta.url), 'utf8').trim() || undefined;
  } catch {
    return undefined;
  }
}
