/** Exit statuses shared by every command (documented in `--help` and the README). */
export const EXIT_OK = 0;
/** The run failed: upstream, database, or a check that did not pass. */
export const EXIT_FAILURE = 1;
/** Bad usage or configuration: a flag or variable broke its rule. */
export const EXIT_USAGE = 2;

/**
 * How long a stopping command waits for its aborted sync after the first SIGINT/SIGTERM. Aborting
 * takes milliseconds, except while the run waits on what takes no signal (a token request in
 * flight, a statement blocked on a lock); then the command exits 0 without it and the database
 * rolls back the open window. `sync` and `serve` alike.
 */
export const DRAIN_TIMEOUT_MS = 5_000;
