/**
 * A `serve` replica of the soak: `node dist/cli.js serve` as a child process whose pid the
 * sampler reads, whose exit status the soak checks, and whose warn-and-worse log lines are
 * counted by message. A replica may be killed and started again: each start is a new
 * {@link ServeProcess}, appending to the same log file.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { CLI_PATH, ROOT } from '../bench/lib/children.js';

/** A `serve` child. */
export interface ServeProcess {
  child: ChildProcess;
  pid: number;
  url: string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Whether the child is gone. */
export function isGone(serve: ServeProcess): boolean {
  return serve.child.exitCode !== null || serve.child.signalCode !== null;
}

/**
 * Starts `node dist/cli.js serve` with exactly `env` (plus PATH and HOME). bench/lib/children.ts
 * has startServeChild, but it turns the schedule off and hides the pid and exit status, which a
 * soak needs. Every stderr line is appended to `logFile`; warn and worse are counted by message
 * into `logCounts`.
 *
 * @returns once serve logged its URL.
 * @throws when serve exits before, or does not log it within 60 s.
 */
export async function startServe(env: Record<string, string>, logFile: string, logCounts: Record<string, number>): Promise<ServeProcess> {
  const child = spawn(process.execPath, [CLI_PATH, 'serve'], {
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    cwd: ROOT,
  });
  const killOnExit = () => child.kill('SIGKILL');
  process.on('exit', killOnExit);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((done) =>
    child.once('exit', (code, signal) => {
      process.off('exit', killOnExit);
      done({ code, signal });
    }),
  );
  const log = createWriteStream(logFile, { flags: 'a' });
  child.stdout.resume();
  let pending = '';
  let resolveUrl: (url: string) => void;
  const urlSeen = new Promise<string>((r) => (resolveUrl = r));
  child.stderr.on('data', (chunk: Buffer) => {
    log.write(chunk);
    pending += chunk.toString();
    const lines = pending.split('\n');
    pending = lines.pop()!;
    for (const line of lines) {
      const url = /serving (https?:\/\/[^\s/"]+)\/metrics/.exec(line);
      if (url) resolveUrl(url[1]!);
      try {
        // pino writes level labels here (LOG_LEVEL's formatter); numbers are accepted too.
        const entry = JSON.parse(line) as { level?: string | number; msg?: string };
        const level = entry.level ?? 0;
        if (typeof level === 'number' ? level >= 40 : ['warn', 'error', 'fatal'].includes(level)) {
          const key = `${level}: ${entry.msg ?? '(no message)'}`;
          logCounts[key] = (logCounts[key] ?? 0) + 1;
        }
      } catch {
        logCounts['(not a JSON log line)'] = (logCounts['(not a JSON log line)'] ?? 0) + 1;
      }
    }
  });
  exited.then(
    () => log.end(),
    () => log.end(),
  );
  const url = await Promise.race([
    urlSeen,
    exited.then(({ code, signal }) => Promise.reject(new Error(`serve exited (${signal ?? `code ${code}`}) before it was serving; log: ${logFile}`))),
    new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`serve did not start within 60 s; log: ${logFile}`)), 60_000).unref()),
  ]);
  return { child, pid: child.pid!, url, exited };
}
