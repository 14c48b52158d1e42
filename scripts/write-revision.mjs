// Writes dist/revision.txt for the build_info metric: $REVISION, else the git commit, else nothing.
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';

let revision = process.env.REVISION?.trim();
if (!revision) {
  try {
    revision = execFileSync('git', ['rev-parse', '--short=12', 'HEAD'], { stdio: ['ignore', 'pipe', 'ignore'] })
      .toString()
      .trim();
  } catch {
    revision = '';
  }
}
if (revision) writeFileSync(new URL('../dist/revision.txt', import.meta.url), `${revision}\n`);
