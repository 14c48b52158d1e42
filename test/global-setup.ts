/**
 * Vitest globalSetup: one PostgreSQL cluster for the whole run (or TEST_DATABASE_URL's server),
 * handed to every test file as `inject('postgresUrl')`. Test files then isolate themselves with
 * a fresh database each (test/helpers/db.ts), which is much cheaper than a cluster each.
 */
import type { TestProject } from 'vitest/node';
import { startThrowawayCluster } from './helpers/postgres.js';
import { removePgliteTemplate } from './helpers/embedded.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** URL of the run's shared PostgreSQL server (its `postgres` database); create databases from it, never write to it. */
    postgresUrl: string;
  }
}

/**
 * Starts the shared cluster, provides its URL as `postgresUrl`, and returns the teardown that
 * stops it and deletes its folder.
 *
 * @throws Error when PostgreSQL is not installed (the message says how to install it), so a
 *   machine without it fails the run rather than skipping the integration tests.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const startedAt = performance.now();
  const cluster = await startThrowawayCluster();
  if (!cluster.external) {
    console.log(`PostgreSQL test cluster on ${cluster.url} ready in ${Math.round(performance.now() - startedAt)} ms`);
  }
  project.provide('postgresUrl', cluster.url);
  return async () => {
    // The embedded-database template some files made (test/helpers/embedded.ts), named by this pid.
    removePgliteTemplate(process.pid);
    await cluster.stop();
  };
}
