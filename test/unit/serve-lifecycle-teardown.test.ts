/**
 * The teardown stack of serve (src/serve/teardown.ts) and its state table (src/serve/lifecycle-state.ts):
 * releases in reverse, once, each within its bound; a release that throws or hangs; resources
 * registered while a stop is under way or after it.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { nextState, type ServeState } from '../../src/serve/lifecycle-state.js';
import { TeardownStack } from '../../src/serve/teardown.js';

function stack(): { teardown: TeardownStack; errors: [string, unknown][]; timeouts: string[] } {
  const errors: [string, unknown][] = [];
  const timeouts: string[] = [];
  const teardown = new TeardownStack({ onError: (name, err) => errors.push([name, err]), onTimeout: (name) => timeouts.push(name) });
  return { teardown, errors, timeouts };
}

/** A promise and its resolve, for releases the test finishes by hand. */
function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

afterEach(() => {
  vi.useRealTimers();
});

describe('TeardownStack', () => {
  it('releases in reverse order of acquisition, each after the one above has finished', async () => {
    const { teardown } = stack();
    const order: string[] = [];
    for (const name of ['lock', 'upstream', 'database', 'server']) {
      teardown.add(name, async () => {
        order.push(`${name} start`);
        await new Promise((r) => setTimeout(r, 1));
        order.push(`${name} end`);
      });
    }
    expect(teardown.held).toEqual(['lock', 'upstream', 'database', 'server']);
    expect(await teardown.release()).toEqual({ drained: true });
    expect(order).toEqual(['server start', 'server end', 'database start', 'database end', 'upstream start', 'upstream end', 'lock start', 'lock end']);
    expect(teardown.held).toEqual([]);
  });

  it('is idempotent: a second call gets the same answer and releases nothing again', async () => {
    const { teardown } = stack();
    const release = vi.fn();
    teardown.add('lock', release);
    const first = teardown.release();
    const second = teardown.release();
    expect(second).toBe(first);
    expect(await first).toEqual({ drained: true });
    expect(await teardown.release()).toEqual({ drained: true });
    expect(release).toHaveBeenCalledTimes(1);
  });

  it('a release that throws, or rejects, is reported and the rest is still released; the teardown is drained', async () => {
    const { teardown, errors } = stack();
    const released: string[] = [];
    teardown.add('lock', () => void released.push('lock'));
    teardown.add('database', () => Promise.reject(new Error('pool already ended')));
    teardown.add('server', () => {
      throw new Error('not running');
    });
    expect(await teardown.release()).toEqual({ drained: true });
    expect(released).toEqual(['lock']);
    expect(errors.map(([name, err]) => [name, (err as Error).message])).toEqual([
      ['server', 'not running'],
      ['database', 'pool already ended'],
    ]);
  });

  it('a release past its bound answers drained: false at once; what lies below waits for it to settle, in the background', async () => {
    vi.useFakeTimers();
    const { teardown, timeouts } = stack();
    const database = deferred();
    const released: string[] = [];
    teardown.add('lock', () => void released.push('lock'));
    teardown.add('database', () => database.promise, { timeoutMs: 2_000 });
    teardown.add('server', () => void released.push('server'));
    let answer: { drained: boolean } | undefined;
    void teardown.release().then((a) => (answer = a));
    await vi.advanceTimersByTimeAsync(1_999);
    expect(answer).toBeUndefined();
    await vi.advanceTimersByTimeAsync(1);
    expect(answer).toEqual({ drained: false });
    expect(timeouts).toEqual(['database']);
    // The lock stays held while the database may still be using the folder.
    await vi.advanceTimersByTimeAsync(60_000);
    expect(released).toEqual(['server']);
    database.resolve();
    await vi.advanceTimersByTimeAsync(0);
    expect(released).toEqual(['server', 'lock']);
  });

  it('a release that resolves false (busy at its own bound) makes the teardown undrained, and the rest goes on at once', async () => {
    const { teardown } = stack();
    const released: string[] = [];
    teardown.add('upstream', () => void released.push('upstream'));
    teardown.add('sync', () => Promise.resolve(false));
    expect(await teardown.release()).toEqual({ drained: false });
    await new Promise((r) => setImmediate(r));
    expect(released).toEqual(['upstream']);
  });

  it('a release that settles within its bound keeps the teardown drained', async () => {
    vi.useFakeTimers();
    const { teardown, timeouts } = stack();
    teardown.add('database', () => new Promise((r) => setTimeout(r, 1_500)), { timeoutMs: 2_000 });
    const answer = teardown.release();
    await vi.advanceTimersByTimeAsync(1_500);
    expect(await answer).toEqual({ drained: true });
    expect(timeouts).toEqual([]);
  });

  it('a resource acquired while the stop is under way is released next; one acquired after it is released at once', async () => {
    const { teardown } = stack();
    const released: string[] = [];
    const lock = deferred();
    teardown.add('lock', async () => {
      await lock.promise;
      released.push('lock');
    });
    const answer = teardown.release();
    expect(teardown.releasing).toBe(true);
    // A start awaiting its upstream clients when the stop came: they arrive while the lock is being released.
    teardown.add('upstream', () => void released.push('upstream'));
    lock.resolve();
    expect(await answer).toEqual({ drained: true });
    expect(released).toEqual(['lock', 'upstream']);
    // And one that arrives after everything was released.
    teardown.add('server', () => void released.push('server'));
    await new Promise((r) => setImmediate(r));
    expect(released).toEqual(['lock', 'upstream', 'server']);
  });

  it('with nothing held, release answers drained at once', async () => {
    const { teardown } = stack();
    expect(teardown.releasing).toBe(false);
    expect(await teardown.release()).toEqual({ drained: true });
  });
});

describe('serve states', () => {
  it('go starting, migrating, ready, stopping, stopped; a stop from any state; nothing else', () => {
    const all: ServeState[] = ['starting', 'migrating', 'ready', 'stopping', 'stopped'];
    const allowed = new Set(['starting>migrating', 'starting>stopping', 'migrating>ready', 'migrating>stopping', 'ready>stopping', 'stopping>stopped']);
    for (const from of all) {
      for (const to of all) {
        expect(nextState(from, to), `${from} -> ${to}`).toBe(allowed.has(`${from}>${to}`) ? to : from);
      }
    }
  });
});
