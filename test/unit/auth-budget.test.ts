import bcrypt from 'bcryptjs';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { AuthRefusalLog, budgetKey, FailureBudget } from '../../src/serve/web/auth-budget.js';
import { BasicAuth, bcryptCost } from '../../src/serve/web/basic-auth.js';
import { BcryptWorker } from '../../src/serve/web/bcrypt-worker.js';
import type { Logger } from '../../src/log.js';

const basic = (user: string, password: string): string => `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;
const HASH_4 = bcrypt.hashSync('right-password', 4);
const OTHER_4 = bcrypt.hashSync('other-password', 4);
const ATTACKER = '127.0.0.2';
const SCRAPER = '127.0.0.1';

/** A clock the test moves by hand, in milliseconds. */
function manualClock(): { now: () => number; advance: (ms: number) => void } {
  let t = 1_000_000;
  return { now: () => t, advance: (ms) => (t += ms) };
}

afterEach(() => {
  vi.restoreAllMocks();
  vi.useRealTimers();
});

describe('FailureBudget (per-address token bucket of failed logins)', () => {
  it('gives N tokens, then the milliseconds until one refills, and refills at N per period', () => {
    const clock = manualClock();
    const budget = new FailureBudget(10, { now: clock.now });
    for (let i = 0; i < 10; i++) expect(budget.take(ATTACKER)).toBe(0);
    // One token per 6 s (10 a minute).
    expect(budget.take(ATTACKER)).toBe(6000);
    clock.advance(4500);
    expect(budget.take(ATTACKER)).toBe(1500);
    clock.advance(1500);
    expect(budget.take(ATTACKER)).toBe(0);
    expect(budget.take(ATTACKER)).toBe(6000);
    // Another address has its own budget.
    expect(budget.take(SCRAPER)).toBe(0);
    // A whole period refills the whole budget, never more.
    clock.advance(10 * 60_000);
    for (let i = 0; i < 10; i++) expect(budget.take(ATTACKER)).toBe(0);
    expect(budget.take(ATTACKER)).toBeGreaterThan(0);
  });

  it('gives a token back on refund, up to the capacity', () => {
    const clock = manualClock();
    const budget = new FailureBudget(2, { now: clock.now });
    expect(budget.take(ATTACKER)).toBe(0);
    expect(budget.take(ATTACKER)).toBe(0);
    expect(budget.take(ATTACKER)).toBeGreaterThan(0);
    budget.refund(ATTACKER);
    expect(budget.take(ATTACKER)).toBe(0);
    budget.refund(ATTACKER);
    budget.refund(ATTACKER);
    budget.refund(ATTACKER);
    expect([budget.take(ATTACKER), budget.take(ATTACKER), budget.take(ATTACKER)]).toEqual([0, 0, 30_000]);
  });

  it('remembers at most maxAddresses, forgetting the one touched longest ago', () => {
    const clock = manualClock();
    const budget = new FailureBudget(1, { now: clock.now, maxAddresses: 3 });
    for (const address of ['10.0.0.1', '10.0.0.2', '10.0.0.3']) expect(budget.take(address)).toBe(0);
    // Touching 10.0.0.1 again makes 10.0.0.2 the oldest.
    expect(budget.take('10.0.0.1')).toBeGreaterThan(0);
    expect(budget.take('10.0.0.4')).toBe(0);
    expect(budget.size).toBe(3);
    expect(budget.take('10.0.0.2')).toBe(0); // forgotten: a full budget again
    expect(budget.take('10.0.0.1')).toBeGreaterThan(0); // remembered
    for (let i = 0; i < 10_000; i++) budget.take(`10.1.${i >> 8}.${i & 255}`);
    expect(budget.size).toBe(3);
  });

  it('keys an IPv4-mapped IPv6 address as its IPv4 address', () => {
    expect(budgetKey('::ffff:127.0.0.2')).toBe('127.0.0.2');
    expect(budgetKey('::FFFF:10.1.2.3')).toBe('10.1.2.3');
    expect(budgetKey('2001:DB8::1')).toBe('2001:db8::1');
    expect(budgetKey(undefined)).toBe('unknown');
    const budget = new FailureBudget(1, { now: manualClock().now });
    expect(budget.take('::ffff:127.0.0.2')).toBe(0);
    expect(budget.take('127.0.0.2')).toBeGreaterThan(0);
  });

  it('is off at 0', () => {
    const budget = new FailureBudget(0);
    for (let i = 0; i < 100; i++) expect(budget.take(ATTACKER)).toBe(0);
    expect(budget.size).toBe(0);
  });
});

describe('BasicAuth with a failure budget', () => {
  it('refuses uncached attempts without bcrypt after N failures from one address; cached and other addresses pass', async () => {
    const clock = manualClock();
    const auth = new BasicAuth({ prometheus: HASH_4 }, { budget: new FailureBudget(5, { now: clock.now }) });
    expect((await auth.verify(basic('prometheus', 'right-password'), ATTACKER)).outcome).toBe('ok');
    // Wrong passwords and unknown users both spend it.
    for (let i = 0; i < 3; i++) expect((await auth.verify(basic('prometheus', `wrong-${i}`), ATTACKER)).outcome).toBe('denied');
    for (let i = 0; i < 2; i++) expect((await auth.verify(basic(`nobody-${i}`, 'x'), `::ffff:${ATTACKER}`)).outcome).toBe('denied');
    const compare = vi.spyOn(bcrypt, 'compare');
    // Refused, with the seconds until a token refills (60 s / 5).
    expect(await auth.verify(basic('prometheus', 'wrong-next'), ATTACKER)).toEqual({ outcome: 'budget', retryAfterSeconds: 12 });
    expect(await auth.verify(basic('nobody-9', 'x'), ATTACKER)).toEqual({ outcome: 'budget', retryAfterSeconds: 12 });
    // A remembered failure or success costs nothing and is answered as before.
    expect((await auth.verify(basic('prometheus', 'wrong-0'), ATTACKER)).outcome).toBe('denied');
    expect((await auth.verify(basic('prometheus', 'right-password'), ATTACKER)).outcome).toBe('ok');
    expect(compare).not.toHaveBeenCalled();
    // Another address is untouched by the attacker's spending.
    expect((await auth.verify(basic('prometheus', 'wrong-other'), SCRAPER)).outcome).toBe('denied');
    expect(compare).toHaveBeenCalledTimes(1);
    // Refills: one more attempt after 12 s, the next refused again.
    clock.advance(11_000);
    expect(await auth.verify(basic('prometheus', 'wrong-next'), ATTACKER)).toEqual({ outcome: 'budget', retryAfterSeconds: 1 });
    clock.advance(1_000);
    expect((await auth.verify(basic('prometheus', 'wrong-next'), ATTACKER)).outcome).toBe('denied');
    expect((await auth.verify(basic('prometheus', 'wrong-later'), ATTACKER)).outcome).toBe('budget');
    expect(compare).toHaveBeenCalledTimes(2);
  });

  it('does not spend the budget on correct logins, nor on attempts refused as busy', async () => {
    const clock = manualClock();
    const auth = new BasicAuth({ a: HASH_4, b: OTHER_4 }, { budget: new FailureBudget(1, { now: clock.now }), maxInFlight: 1 });
    expect((await auth.verify(basic('a', 'right-password'), ATTACKER)).outcome).toBe('ok');
    expect((await auth.verify(basic('b', 'other-password'), ATTACKER)).outcome).toBe('ok');
    // Busy (one comparison running) gives its token back: the next attempt is still checked.
    const first = auth.verify(basic('a', 'wrong-1'), SCRAPER);
    expect(await auth.verify(basic('a', 'wrong-2'), ATTACKER)).toEqual({ outcome: 'busy', retryAfterSeconds: 1 });
    expect((await first).outcome).toBe('denied');
    expect((await auth.verify(basic('a', 'wrong-2'), ATTACKER)).outcome).toBe('denied');
    expect((await auth.verify(basic('a', 'wrong-3'), ATTACKER)).outcome).toBe('budget');
  });
});

describe('BcryptWorker', () => {
  it('compares and hashes in a worker thread, and serves BasicAuth', async () => {
    const worker = new BcryptWorker();
    try {
      expect(await worker.compare('right-password', HASH_4)).toBe(true);
      expect(await worker.compare('wrong', HASH_4)).toBe(false);
      const hash = await worker.hash('pw', 5);
      expect(bcryptCost(hash)).toBe(5);
      expect(bcrypt.compareSync('pw', hash)).toBe(true);
      const compare = vi.spyOn(bcrypt, 'compare');
      const auth = new BasicAuth({ prometheus: HASH_4 }, { bcrypt: worker });
      expect((await auth.verify(basic('prometheus', 'right-password'))).outcome).toBe('ok');
      expect((await auth.verify(basic('nobody', 'right-password'))).outcome).toBe('denied');
      expect(bcryptCost((await auth.decoyHash())!)).toBe(4);
      // Nothing ran on this thread.
      expect(compare).not.toHaveBeenCalled();
    } finally {
      await worker.close();
    }
    // Closed: pending work fails, later work starts a new worker.
    expect(await worker.compare('right-password', HASH_4)).toBe(true);
    const failed = expect(worker.compare('right-password', HASH_4)).rejects.toThrow(/stopped/);
    await worker.close();
    await failed;
  });
});

describe('AuthRefusalLog', () => {
  it('logs the first refusal at once and the rest of the interval in one line with counts', () => {
    vi.useFakeTimers();
    const warn = vi.fn();
    const log = { warn } as unknown as Logger;
    const refusals = new AuthRefusalLog(log, 60_000);
    refusals.record('budget', ATTACKER);
    expect(warn).toHaveBeenCalledTimes(1);
    for (let i = 0; i < 1000; i++) refusals.record(i % 4 === 0 ? 'busy' : 'budget', ATTACKER);
    expect(warn).toHaveBeenCalledTimes(1);
    vi.advanceTimersByTime(60_000);
    expect(warn).toHaveBeenCalledTimes(2);
    expect(warn.mock.calls[1]![0]).toMatchObject({ count: 1000, reasons: { budget: 750, busy: 250 }, lastRemote: ATTACKER });
    refusals.record('busy', SCRAPER);
    refusals.close();
    expect(warn).toHaveBeenCalledTimes(3);
    expect(warn.mock.calls[2]![0]).toMatchObject({ count: 1, reasons: { budget: 0, busy: 1 } });
  });
});
