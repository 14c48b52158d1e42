/** Exit statuses shared by every command (documented in `--help` and the README). */
export const EXIT_OK = 0;
/** The run failed: upstream, database, or a check that did not pass. */
export const EXIT_FAILURE = 1;
/** Bad usage or configuration: a flag or variable broke its rule. */
export const EXIT_USAGE = 2;
