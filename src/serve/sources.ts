/**
 * The sources of a running `serve`: each source's client, sync and audit schedulers and E7 reader,
 * and their reload (SIGHUP, `POST /-/reload`). A reload applies the difference reload.ts finds:
 * removed and changed sources stop as at shutdown, changed and added ones start anew, unchanged
 * ones are untouched; a file that cannot be used changes nothing. Reloads run one at a time. See
 * docs/design/serve-lifecycle.md, Reloads.
 */
import type { Config, SourceConfig } from '../config.js';
import { ConfigError } from '../errors.js';
import type { SyncScheduler } from './cron.js';
import type { AuditResult } from '../sync/audit/source.js';
import type { AnalyticsClient } from '../upstream/analytics.js';
import { settledWithin } from '../settle.js';
import { DRAIN_TIMEOUT_MS, sourceClient, type SourceClient } from '../app/runtime.js';
import { diffSources, isEmptyDiff, type SourcesDiff } from './reload.js';
import type { E7Scraper } from './scrape.js';
import { buildSourceAudit, buildSourceScheduler, type SourceScheduleContext } from './schedules.js';

/** Bound on closing a removed source's client, which waits for its reads in flight. */
const CLIENT_CLOSE_TIMEOUT_MS = 10_000;

/** How a reload ended: the HTTP answer's status and body. */
export type ReloadResult = { ok: true; message: string; diff: SourcesDiff } | { ok: false; status: 400 | 500 | 503; message: string };

export interface ServeSourcesOptions extends SourceScheduleContext {
  scraper: E7Scraper;
  /** One per source of `config`, in its order; closed by their opener. */
  initial: readonly SourceClient[];
  /** Filled here, read by the lifecycle. */
  schedulers: Map<string, SyncScheduler>;
  /** Reads the configuration again, as at start. @throws {ConfigError} for a file that cannot be used. */
  load: () => Config;
  /** Fixed at start. */
  poolMax: number;
}

/** The sources of a running serve. */
export class ServeSources {
  readonly #o: ServeSourcesOptions;
  readonly #audits = new Map<string, SyncScheduler<AuditResult>>();
  readonly #clients = new Map<string, AnalyticsClient>();
  /** Clients a reload opened and still in use: closed by {@link closeClients}. */
  readonly #opened = new Set<AnalyticsClient>();
  /** A removed or changed source's, closing in the background. */
  readonly #closing = new Set<Promise<unknown>>();
  readonly #record: (ok: boolean) => void;
  #sources: SourceConfig[];
  #config: Config;
  #queue: Promise<unknown> = Promise.resolve();
  #stopped = false;

  constructor(options: ServeSourcesOptions) {
    this.#o = options;
    this.#config = options.config;
    this.#sources = [...options.config.sources];
    for (const { source, client } of options.initial) {
      this.#clients.set(source.name, client);
      this.#build(source, client);
    }
    this.#record = options.metrics.trackConfigReloads();
  }

  get sources(): readonly SourceConfig[] {
    return this.#sources;
  }

  /** Stops every source's sync and audit; a reload under way starts nothing more. @returns whether every run ended within `drainMs`. */
  async stop(drainMs: number): Promise<boolean> {
    this.#stopped = true;
    const stopped = await Promise.all([...this.#o.schedulers.values(), ...this.#audits.values()].map((s) => s.stop(drainMs)));
    return stopped.every(Boolean);
  }

  /** Starts every source's schedules, each scheduled source's first sync now. @returns whether any source has a schedule. */
  start(reason = 'startup'): boolean {
    let scheduled = false;
    for (const source of this.#sources) scheduled = this.#start(source, reason) || scheduled;
    return scheduled;
  }

  /** Reads the configuration again and applies the difference, after earlier reloads. Never throws. */
  reload(trigger: string): Promise<ReloadResult> {
    const run = this.#queue.then(() => this.#reload(trigger));
    this.#queue = run;
    return run;
  }

  /** Closes the clients a reload opened, and waits for those closing. */
  async closeClients(): Promise<void> {
    await Promise.allSettled([...[...this.#opened].map((client) => client.close()), ...this.#closing]);
  }

  async #reload(trigger: string): Promise<ReloadResult> {
    const { log } = this.#o;
    let next: Config;
    try {
      next = this.#o.load();
    } catch (err) {
      this.#record(false);
      const message = err instanceof Error ? err.message : String(err);
      log.error({ trigger, err }, `CONFIG_FILE reload failed, so the last good configuration stays in use: ${message}`);
      return { ok: false, status: err instanceof ConfigError ? 400 : 500, message };
    }
    const diff = diffSources(this.#sources, next.sources);
    try {
      await this.#apply(next, diff);
    } catch (err) {
      // Not expected: the file was validated. What was applied before the fault stays.
      this.#record(false);
      const message = err instanceof Error ? err.message : String(err);
      log.error({ trigger, err }, `CONFIG_FILE reload could not be applied in full: ${message}`);
      return { ok: false, status: 500, message };
    }
    this.#record(true);
    const summary = {
      trigger,
      added: diff.added.map((s) => s.name),
      removed: diff.removed.map((s) => s.name),
      changed: Object.fromEntries(diff.changed.map((c) => [c.after.name, c.keys])),
      unchanged: diff.unchanged.map((s) => s.name),
    };
    const message = isEmptyDiff(diff)
      ? 'CONFIG_FILE reloaded: no source added, removed or changed'
      : `CONFIG_FILE reloaded: ${diff.added.length} source(s) added, ${diff.removed.length} removed, ${diff.changed.length} changed`;
    log.info(summary, message);
    const restart = this.#needsRestart(next);
    if (restart !== undefined) log.warn({ trigger }, restart);
    return { ok: true, message, diff };
  }

  async #apply(next: Config, diff: SourcesDiff): Promise<void> {
    const { log, metrics, scraper } = this.#o;
    const coming = [...diff.added, ...diff.changed.map((c) => c.after)];
    // Only the environment's source may lack an upstream (the demo), and it comes from the environment, which a reload does not read again.
    const demo = coming.find((source) => source.upstream === undefined);
    if (demo !== undefined) throw new ConfigError('CONFIG_FILE', `source ${demo.name} has no statistics_url`);
    const going = [...diff.removed, ...diff.changed.map((c) => c.before)];
    const drained = await Promise.all(going.map((source) => this.#stop(source.name)));
    if (this.#stopped) throw new Error('serve is stopping: the reload was not applied');
    going.forEach((source, i) => {
      if (!drained[i]) {
        log.warn(
          { source: source.name, drainTimeoutMs: DRAIN_TIMEOUT_MS },
          "the source's sync did not stop in time after the reload (it waits on a request that cannot be cancelled); its open window rolls back when it ends, and the new schedule's runs skip as locked until then",
        );
      }
    });
    const replaced = new Map<string, AnalyticsClient>();
    for (const source of going) {
      replaced.set(source.name, this.#clients.get(source.name)!);
      this.#clients.delete(source.name);
    }
    for (const source of coming) {
      const client = sourceClient(source, source.upstream!, log, metrics.clientObserver(source.name));
      this.#opened.add(client);
      this.#clients.set(source.name, client);
    }
    this.#config = next;
    this.#sources = diff.sources;
    const keep = new Set(diff.unchanged.map((s) => s.name));
    // The next scrape reads the new list; one in progress ends with the readers it started with.
    scraper.setSources(
      diff.sources.map((source) => ({ name: source.name, labels: source.labels, client: this.#clients.get(source.name)!, limits: source.limits })),
      keep,
    );
    for (const source of diff.removed) await metrics.forgetSource(source.name);
    for (const source of coming) {
      this.#build(source, this.#clients.get(source.name)!);
      this.#start(source, 'reload');
    }
    for (const [name, client] of replaced) this.#closeLater(name, client);
  }

  #build(source: SourceConfig, client: AnalyticsClient): void {
    const context = { ...this.#o, config: this.#config };
    this.#o.schedulers.set(source.name, buildSourceScheduler(context, source, client));
    const audit = buildSourceAudit(context, source, client);
    if (audit !== undefined) this.#audits.set(source.name, audit);
  }

  /** @returns whether the source has a schedule (its first sync then starts now). */
  #start(source: SourceConfig, reason: string): boolean {
    if (this.#stopped) return false;
    this.#audits.get(source.name)?.start();
    if (source.sync.schedule === undefined) return false;
    const scheduler = this.#o.schedulers.get(source.name)!;
    scheduler.start();
    void scheduler.trigger(reason);
    return true;
  }

  /** Stops and forgets a source's sync and audit. @returns whether both ended within the bound. */
  async #stop(name: string): Promise<boolean> {
    const sync = this.#o.schedulers.get(name);
    const audit = this.#audits.get(name);
    this.#o.schedulers.delete(name);
    this.#audits.delete(name);
    const stopped = await Promise.all([sync?.stop(DRAIN_TIMEOUT_MS) ?? true, audit?.stop(DRAIN_TIMEOUT_MS) ?? true]);
    return stopped.every(Boolean);
  }

  /**
   * Closes a client no source uses, in the background; a source no longer configured then loses
   * the series what was using the client may have set since they were removed.
   */
  #closeLater(name: string, client: AnalyticsClient): void {
    const closing = settledWithin(client.close(), CLIENT_CLOSE_TIMEOUT_MS).then(async (closed) => {
      if (!closed) this.#o.log.warn({ source: name }, "the removed source's client did not close in time; its requests end on their own");
      // What waited on its last request sets its gauges in the turns that follow.
      await new Promise((resolve) => setImmediate(resolve));
      if (!this.#sources.some((source) => source.name === name)) await this.#o.metrics.forgetSource(name);
    });
    this.#opened.delete(client);
    this.#closing.add(closing);
    void closing.finally(() => this.#closing.delete(closing));
  }

  /** The warning to log when the pool, sized at start, is too small for the new sources. */
  #needsRestart(next: Config): string | undefined {
    const wanted = next.sources.length + 2;
    if (wanted <= this.#o.poolMax) return undefined;
    return `the database pool was sized at start for ${this.#o.poolMax - 2} sources running at once; with ${next.sources.length}, runs may wait for a connection until serve is restarted`;
  }
}
