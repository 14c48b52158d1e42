/** Exit statuses of the simulator's command line, the same as the exporter's commands use. */
export const EXIT_OK = 0;
/** The simulator could not start (the port is taken, the address is not this host's). */
export const EXIT_FAILURE = 1;
/** Bad usage: a flag broke its rule. */
export const EXIT_USAGE = 2;
