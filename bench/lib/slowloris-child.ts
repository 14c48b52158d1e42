/**
 * The slowloris attack of test/helpers/slowloris.ts as a process of its own, so that its 2,000
 * sockets do not slow the event loop of the process measuring the scrapes. Run by the bench
 * (`node --import tsx bench/lib/slowloris-child.ts '<SlowlorisOptions as JSON>'`): prints one
 * JSON line `{"connected":N}` once every connection has reached the server once, and on SIGTERM
 * stops and prints its final counts (`connected`, `open`, `closedByServer`), then exits 0. Exits 1
 * naming `ulimit -n` when it may not open enough files.
 */
import { requireOpenFiles, startSlowloris, type SlowlorisOptions } from '../../test/helpers/slowloris.js';

const options = JSON.parse(process.argv[2] ?? '{}') as SlowlorisOptions;
try {
  requireOpenFiles(options.connections + 100);
} catch (err) {
  process.stderr.write(`${(err as Error).message}\n`);
  process.exit(1);
}
const attack = startSlowloris(options);
const ready = setInterval(() => {
  if (attack.connected < options.connections) return;
  clearInterval(ready);
  process.stdout.write(`${JSON.stringify({ connected: attack.connected })}\n`);
}, 50);
process.once('SIGTERM', () => {
  clearInterval(ready);
  const counts = { connected: attack.connected, open: attack.open, closedByServer: attack.closedByServer };
  void attack.stop().then(() => {
    process.stdout.write(`${JSON.stringify(counts)}\n`);
    process.exit(0);
  });
});
