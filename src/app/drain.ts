/**
 * A leaf module, so that commands can name it without loading the application layer.
 */

/**
 * How long a stopping command waits for its aborted sync after the first SIGINT/SIGTERM. Aborting
 * takes milliseconds, except while the run waits on what takes no signal (a token request in
 * flight, a statement blocked on a lock); then the command exits 0 without it and the database
 * rolls back the open window. `sync` and `serve` alike.
 */
export const DRAIN_TIMEOUT_MS = 5_000;
