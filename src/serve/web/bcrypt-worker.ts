/**
 * bcrypt off the main thread: one worker thread running bcryptjs (pure JavaScript), so that the
 * password checks of HTTP Basic authentication never hold the event loop that serves scrapes.
 * bcryptjs's async API yields only every 100 ms, and four concurrent cost-12 checks held the loop
 * for seconds (BENCHMARKS.md, "hostile: authentication").
 */
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';

/** The bcrypt operations {@link BasicAuth} needs; the in-thread bcryptjs and {@link BcryptWorker} both have them. */
export interface BcryptPort {
  /** Whether `password` matches the bcrypt `hash`. */
  compare(password: string, hash: string): Promise<boolean>;
  /** A new bcrypt hash of `password` at `cost` (log2 of rounds, 4..31). */
  hash(password: string, cost: number): Promise<string>;
}

/** The in-thread bcryptjs, loaded on first use (only servers with basic_auth_users need it). */
export const inThreadBcrypt: BcryptPort = {
  compare: async (password, hash) => (await import('bcryptjs')).default.compare(password, hash),
  hash: async (password, cost) => (await import('bcryptjs')).default.hash(password, cost),
};

// CommonJS (an `eval` worker); bcryptjs's path is resolved by the main thread and passed in, so it
// does not depend on the working directory. The sync API: the worker has nothing else to do.
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const bcrypt = require(workerData.bcryptjs);
parentPort.on('message', ({ id, op, password, hash, cost }) => {
  try {
    const value = op === 'compare' ? bcrypt.compareSync(password, hash) : bcrypt.hashSync(password, cost);
    parentPort.postMessage({ id, value });
  } catch (err) {
    parentPort.postMessage({ id, error: String(err && err.message ? err.message : err) });
  }
});
`;

interface Job {
  worker: Worker;
  resolve(value: boolean | string): void;
  reject(err: Error): void;
}

/**
 * One worker thread doing bcrypt, started on first use and unref'd (it never keeps the process
 * alive). Operations queue in the worker and run one at a time, so at most one core does bcrypt.
 * A worker that dies fails its pending operations; the next operation starts a new one.
 */
export class BcryptWorker implements BcryptPort {
  #worker: Worker | undefined;
  readonly #jobs = new Map<number, Job>();
  #nextId = 0;

  /** @throws Error when the worker fails or exits before answering. */
  compare(password: string, hash: string): Promise<boolean> {
    return this.#run({ op: 'compare', password, hash }) as Promise<boolean>;
  }

  /** @throws Error when the worker fails or exits before answering, or bcryptjs refuses the cost. */
  hash(password: string, cost: number): Promise<string> {
    return this.#run({ op: 'hash', password, cost }) as Promise<string>;
  }

  /** Stops the worker; pending operations fail. Idempotent; a later operation starts a new worker. */
  async close(): Promise<void> {
    const worker = this.#worker;
    this.#worker = undefined;
    if (worker === undefined) return;
    this.#failAll(worker, new Error('the bcrypt worker was stopped'));
    await worker.terminate();
  }

  #run(message: { op: 'compare' | 'hash'; password: string; hash?: string; cost?: number }): Promise<boolean | string> {
    const id = this.#nextId++;
    const worker = this.#started();
    return new Promise((resolve, reject) => {
      this.#jobs.set(id, { worker, resolve, reject });
      worker.postMessage({ id, ...message });
    });
  }

  #started(): Worker {
    if (this.#worker !== undefined) return this.#worker;
    const bcryptjs = createRequire(import.meta.url).resolve('bcryptjs');
    const worker = new Worker(WORKER_SOURCE, { eval: true, workerData: { bcryptjs } });
    worker.unref();
    worker.on('message', ({ id, value, error }: { id: number; value?: boolean | string; error?: string }) => {
      const job = this.#jobs.get(id);
      this.#jobs.delete(id);
      if (error !== undefined) job?.reject(new Error(`bcrypt failed: ${error}`));
      else job?.resolve(value!);
    });
    const gone = (err: Error): void => {
      if (this.#worker === worker) this.#worker = undefined;
      this.#failAll(worker, err);
    };
    worker.on('error', gone);
    worker.on('exit', (code) => gone(new Error(`the bcrypt worker exited (code ${code})`)));
    this.#worker = worker;
    return worker;
  }

  /** Fails the operations sent to `worker` (a worker stopped or dead; those of a newer one go on). */
  #failAll(worker: Worker, err: Error): void {
    for (const [id, job] of this.#jobs) {
      if (job.worker !== worker) continue;
      this.#jobs.delete(id);
      job.reject(err);
    }
  }
}
