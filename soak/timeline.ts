/**
 * The soak's replicas and its events, each at a share of the run so that a short soak sees every
 * one: at 1/3 `delta` is written into the CONFIG_FILE and both replicas get SIGHUP; at 1/2 replica
 * B is killed with SIGKILL and started again; at 2/3 alpha's `sync.schedule` changes and both get
 * `POST /-/reload`; from 80 % to 86.7 % (minutes 24–26 of 30) the hostile client attacks both.
 */
import type { SoakSource } from './sources.js';
import { writeConfig } from './sources.js';
import { isGone, startServe, type ServeProcess } from './serve-process.js';
import type { Sample } from './sampler.js';
import { startHostile, type HostileTally } from './hostile.js';

/** A sample of one replica, with which of its processes (0: the first, 1: after its restart). */
export interface ReplicaSample extends Sample {
  life: number;
  /** The harness's own largest event-loop delay since its previous sample, in milliseconds: a scrape the harness was too busy to take in time is not serve's fault. */
  harnessLagMs: number;
}

/** One `serve` replica and its samples. */
export class Replica {
  readonly lives: ServeProcess[] = [];
  readonly samples: ReplicaSample[] = [];
  /** Seconds since the soak's start at which it was killed, and serving again. */
  killedAt: number | undefined;
  restartedAt: number | undefined;
  /** From the moment it is to be killed until it serves again: its samples then are discarded. */
  killing = false;
  constructor(
    readonly name: string,
    readonly env: Record<string, string>,
    readonly logFile: string,
    readonly logCounts: Record<string, number>,
  ) {}

  get current(): ServeProcess {
    return this.lives.at(-1)!;
  }

  get alive(): boolean {
    return this.lives.length > 0 && !this.killing && !isGone(this.current);
  }

  async start(): Promise<ServeProcess> {
    const serve = await startServe(this.env, this.logFile, this.logCounts);
    this.lives.push(serve);
    return serve;
  }
}

/** When each event happened (seconds since the soak's start) and what it saw. */
export interface TimelineRecord {
  /** SIGHUP with delta added, and POST /-/reload with alpha's new schedule: when, and the POST's statuses by replica. */
  sighupAt: number | undefined;
  postAt: number | undefined;
  postStatus: Record<string, number>;
  alphaSchedule: string;
  /** The kill of replica B and its restart. */
  killAt: number | undefined;
  restartAt: number | undefined;
  restartError: string | undefined;
  /** The hostile client's minutes, and what it saw. */
  hostileFrom: number | undefined;
  hostileTo: number | undefined;
  hostile: HostileTally | undefined;
}

/** The shares of the run at which the events happen. */
export const AT = { sighup: 1 / 3, kill: 1 / 2, post: 2 / 3, hostileFrom: 0.8, hostileTo: 0.8 + 2 / 30 } as const;

/** alpha's schedule after the POST reload (serve's SYNC_SCHEDULE is every 15 s). */
export const ALPHA_SCHEDULE = '*/10 * * * * *';

/**
 * Runs the events on their times; `tick(now)` is called every second by the soak's loop and
 * starts what is due (never waiting for it: the scrapes go on).
 */
export class Timeline {
  readonly record: TimelineRecord = {
    sighupAt: undefined,
    postAt: undefined,
    postStatus: {},
    alphaSchedule: ALPHA_SCHEDULE,
    killAt: undefined,
    restartAt: undefined,
    restartError: undefined,
    hostileFrom: undefined,
    hostileTo: undefined,
    hostile: undefined,
  };
  readonly #pending = new Set<Promise<void>>();
  #hostile: { stop(): Promise<HostileTally> } | undefined;

  constructor(
    readonly seconds: number,
    readonly replicas: readonly Replica[],
    readonly configFile: string,
    readonly sources: readonly SoakSource[],
    readonly authorization: string,
  ) {}

  #run(task: () => Promise<void>): void {
    const p = task().finally(() => this.#pending.delete(p));
    this.#pending.add(p);
  }

  /** Starts what is due at `t` seconds since the start. */
  tick(t: number): void {
    const r = this.record;
    const due = (share: number) => t >= share * this.seconds;
    if (r.sighupAt === undefined && due(AT.sighup)) {
      writeConfig(this.configFile, this.sources, { withDelta: true, alphaSchedule: undefined });
      r.sighupAt = t;
      for (const x of this.replicas) if (x.alive) x.current.child.kill('SIGHUP');
    }
    if (r.killAt === undefined && due(AT.kill)) {
      const b = this.replicas[1]!;
      r.killAt = t;
      b.killedAt = t;
      const started = performance.now() - t * 1000;
      b.killing = true;
      this.#run(async () => {
        b.current.child.kill('SIGKILL');
        await b.current.exited;
        try {
          await b.start();
          r.restartAt = b.restartedAt = (performance.now() - started) / 1000;
        } catch (err) {
          r.restartError = (err as Error).message;
        }
        b.killing = false;
      });
    }
    if (r.postAt === undefined && due(AT.post)) {
      writeConfig(this.configFile, this.sources, { withDelta: true, alphaSchedule: ALPHA_SCHEDULE });
      r.postAt = t;
      for (const x of this.replicas) {
        if (!x.alive) continue;
        this.#run(async () => {
          const response = await fetch(`${x.current.url}/-/reload`, { method: 'POST', headers: { authorization: this.authorization } }).catch(() => undefined);
          await response?.arrayBuffer();
          r.postStatus[x.name] = response?.status ?? 0;
        });
      }
    }
    if (r.hostileFrom === undefined && due(AT.hostileFrom)) {
      r.hostileFrom = t;
      const seconds = (AT.hostileTo - AT.hostileFrom) * this.seconds;
      this.#hostile = startHostile(
        this.replicas.filter((x) => x.alive).map((x) => x.current.url),
        seconds,
      );
    }
    if (r.hostileTo === undefined && this.#hostile !== undefined && due(AT.hostileTo)) {
      r.hostileTo = t;
      const hostile = this.#hostile;
      this.#run(async () => {
        r.hostile = await hostile.stop();
      });
    }
  }

  /** Waits for every event started to finish. */
  async settle(): Promise<void> {
    while (this.#pending.size > 0) await Promise.all([...this.#pending]);
  }
}
