/**
 * Setup file of the unit and integration projects: each test file forgets the secrets it
 * registered (src/redact.ts keeps them process-wide), so that with `isolate: false` a secret one
 * file loads (config-file.test.ts's `production-secret-from-file`) does not mask another file's
 * text sharing 8 characters with it (sync-skipped.test.ts's source `production`).
 */
import { afterAll } from 'vitest';
import { clearSecrets } from '../../src/redact.js';

afterAll(() => clearSecrets());
