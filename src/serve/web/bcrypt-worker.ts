/**
 * bcrypt off the main thread: one worker running bcryptjs, so that password checks never hold the
 * event loop that serves scrapes (bcryptjs's async API yields only every 100 ms). See
 * docs/design/http-hardening.md, Basic auth.
 */
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';

/** The bcrypt operations {@link BasicAuth} needs. */
export interface BcryptPort {
  compare(password: string, hash: string): Promise<boolean>;
  /** `cost`: log2 of rounds, 4..31. */
  hash(password: string, cost: number): Promise<string>;
}

/** Loaded on first use: only servers with users need it. */
export const inThreadBcrypt: BcryptPort = {
  compare: async (password, hash) => (await import('bcryptjs')).default.compare(password, hash),
  hash: async (password, cost) => (await import('bcryptjs')).default.hash(password, cost),
};

// CommonJS (an `eval` worker), bcryptjs's path from the main thread; the sync API: nothing else runs here.
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

/** One unref'd worker, started on first use; one that dies fails its pending operations. */
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

  /** Stops the worker; pending operations fail. Idempotent. */
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

  /** Fails the operations sent to `worker`; a newer worker's go on. */
  #failAll(worker: Worker, err: Error): void {
    for (const [id, job] of this.#jobs) {
      if (job.worker !== worker) continue;
      this.#jobs.delete(id);
      job.reject(err);
    }
  }
}
