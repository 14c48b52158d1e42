/** A leaf, so commands can name it without loading the application layer. */

/**
 * How long a stopping `sync` or `serve` waits for its aborted run after the first SIGINT/SIGTERM: a
 * run waiting on what takes no signal (a token request, a blocked statement) is left to roll back.
 */
export const DRAIN_TIMEOUT_MS = 5_000;
